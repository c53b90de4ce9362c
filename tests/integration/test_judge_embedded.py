"""The embedded model as a judge on the hf engine: its verdicts parse or are undetermined (a
135M model is a poor judge; only the plumbing is asserted), a re-run asks nothing, and an
unreachable openai judge stops `harness run` with one line before anything is written."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

from harness.checks.judge import JudgeCheck
from harness.config.run import GenerationConfig
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
    verdicts = lambda results: [(check.passed(r), r.reason) for r in results]  # noqa: E731
    assert verdicts(again) == verdicts(first)


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


def test_harness_score_asks_the_judge_once_and_caches_in_the_out_folder(
    tmp_path, run_cli, scripted_engine, embedded_model_path
):
    """`harness score` with a judge check: the judge (here a stand-in that reads the real
    prompts and says "pass") is asked in one batch, its verdicts land in windows.csv and in
    OUT/cache/judge, and scoring again asks nothing."""
    import json

    import pandas as pd
    from transformers import AutoTokenizer

    from harness.engines import GenerationResult

    tokenizer = AutoTokenizer.from_pretrained(embedded_model_path)
    batches: list[int] = []

    class PassingJudge:
        name, max_model_len = "stand-in", 8192

        def __init__(self) -> None:
            self.tokenizer = tokenizer

        def generate(self, requests):
            batches.append(len(requests))
            prompts = [tokenizer.decode(r.prompt_ids) for r in requests]
            assert all("RULE: The text is written in French." in p for p in prompts)
            answer = ' true, "reason": "ok"}'
            return [
                GenerationResult(token_ids=[1], text=answer, finish_reason="stop", prompt_tokens=1)
                for _ in prompts
            ]

        def close(self) -> None:
            pass

    scripted_engine(PassingJudge())
    suite = {"suite": "s", "items": [{
        "id": "fr", "system": "French only.", "user": "Tell a story.", "reminder": "French.",
        "restatement": "Voici :",
        "checks": [{"type": "judge", "rule": "The text is written in French.", "name": "fr"}],
    }]}  # fmt: skip
    (tmp_path / "suite.yaml").write_text(yaml.safe_dump(suite))
    logs = tmp_path / "logs.jsonl"
    logs.write_text("".join(json.dumps({"item": "fr", "text": t}) + "\n" for t in TEXTS))
    out = tmp_path / "out"
    args = ["score", str(logs), "--suite", str(tmp_path / "suite.yaml"), "--out", str(out)]
    code, _, stderr = run_cli(args)
    assert code == 0, stderr
    windows = pd.read_csv(out / "windows.csv")
    assert set(windows["check"]) == {"judge:fr"} and windows["value"].eq(1.0).all()
    assert batches == [len(TEXTS)]  # one window per short text, one batch
    assert len(list((out / "cache" / "judge").glob("*.json"))) == len(TEXTS)
    code, _, _ = run_cli(args)
    assert code == 0 and batches == [len(TEXTS)]  # the second scoring asked nothing
