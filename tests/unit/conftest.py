"""Fixtures shared by unit tests of several modules."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.script_module import load_script

BENCH = Path(__file__).parents[2] / "bench"


@pytest.fixture
def gate_family_bench(monkeypatch):
    """bench/gate_family.py as a module: the gates' and the prescription's family simulations."""
    monkeypatch.syspath_prepend(str(BENCH))
    return load_script(BENCH / "gate_family.py", "bench_gate_family")
