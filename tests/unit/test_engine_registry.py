"""The engine registry (harness.engines.ENGINES) and the one stand-in seam over it
(harness.engines.scripted.every_engine, tests/conftest.py's `scripted_engine`)."""

from pathlib import Path

import pytest

from harness.engines import ENGINES, make_engine
from harness.engines.scripted import ScriptedEngine, every_engine
from harness.errors import UserError


def test_inside_the_block_every_kind_makes_the_stand_in_and_the_real_ones_come_back():
    real = dict(ENGINES)
    engine = ScriptedEngine({"x": 1.0})
    with every_engine(engine):
        assert all(make_engine(kind, Path("/nowhere")) is engine for kind in real)
        with pytest.raises(UserError, match="unknown engine: 'scripted'"):
            make_engine("scripted", Path("/nowhere"))
    assert real == ENGINES


def test_the_fixture_swaps_the_engines_for_one_test(scripted_engine):
    engine = scripted_engine(ScriptedEngine({"x": 1.0}))
    assert make_engine("vllm", Path("/nowhere"), max_model_len=8) is engine


def test_after_the_fixture_the_registry_builds_real_engines_again():
    assert ENGINES["hf"].build.__name__ == "HfEngine"
