"""The embedded model as a judge on the hf engine: its verdicts parse or are undetermined (a
135M model is a poor judge; only the plumbing is asserted), a re-run asks nothing, and an
unreachable openai judge stops `harness run` with one line before anything is written."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

from harness.checks.judge import JudgeCheck
from harness.config import GenerationConfig
from harness.models import EMBEDDED_MODEL
from harness.scoring.judge import JudgeDefaults, JudgeRunner
from harness.store import RunStore

pytestmark = pytest.mark.integration
CONFIGS = Path(__file__).parent.parent / "data" / "configs"
TEXTS = [
    "Le vieux gardien du phare regardait la mer chaque soir, seul avec son chien.",
    "Then he went back up the stairs and wrote a long letter to his brother.",
    "La tempête dura trois jours et trois nuits sans un instant de répit.",
]


def test_the_embedded_model_judges_and_a_rerun_asks_nothing(tmp_path, embedded_model_path):
    from harness.engines import make_engine

    started = []

    def counting_factory(kind, path, **options):
        started.append(kind)
        return make_engine(kind, path, **options)

    check = JudgeCheck(type="judge", rule="The text is written in French.")
    defaults = JudgeDefaults(EMBEDDED_MODEL, GenerationConfig(engine="hf"))
    with JudgeRunner(RunStore(tmp_path), defaults, engine_factory=counting_factory) as judges:
        first = check.with_judges(judges).score_many(TEXTS)
    assert started == ["hf"]
    for result in first:
        if math.isnan(result.value):
            assert result.reason.startswith("judge verdict malformed: ")
        else:
            assert result.value in (0.0, 1.0)
    assert len(list((tmp_path / "cache" / "judge").glob("*.json"))) == len(TEXTS)
    with JudgeRunner(RunStore(tmp_path), defaults, engine_factory=counting_factory) as judges:
        again = check.with_judges(judges).score_many(TEXTS)
    assert started == ["hf"]  # every verdict came from the cache: no engine started
    assert [(r.value, r.reason) for r in again] == [(r.value, r.reason) for r in first] or all(
        math.isnan(a.value) and math.isnan(b.value) for a, b in zip(again, first, strict=True)
    )


def test_an_unreachable_openai_judge_is_one_line_exit_2(tmp_path, run_cli, monkeypatch):
    import harness.engines.openai_engine as openai_engine

    monkeypatch.setattr(openai_engine.time, "sleep", lambda _s: None)  # no retry back-off
    suite = yaml.safe_load((CONFIGS / "mini-suite.yaml").read_text())
    judge = {"engine": "openai", "base_url": "http://127.0.0.1:9/v1"}
    suite["items"][0]["checks"].append({"type": "judge", "rule": "French only.", "judge": judge})
    (tmp_path / "mini-suite.yaml").write_text(yaml.safe_dump(suite))
    config = yaml.safe_load((CONFIGS / "valid.yaml").read_text())
    config.update(policies=["none"], probe={"enabled": False})
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    out = tmp_path / "out"
    code, _, stderr = run_cli(["run", str(path), "--out", str(out)])
    assert code == 2 and len(stderr.strip().splitlines()) == 1, stderr
    assert (
        "item 'mini-fr', check 'judge:French only.': judge: openai engine: cannot reach" in stderr
    )
    assert not out.exists()
