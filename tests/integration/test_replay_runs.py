"""Replays on the tiny random model as a user runs them: bad logs are refused by the plan in one
line naming `file:line`, exit code 2, no run folder; and the probe and forks take replayed and
logged records as any other (divergence.csv over the logged history, forks.csv arms of a
replayed reply)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

pytestmark = pytest.mark.integration

TALKS = [
    [{"role": "user", "content": "Hello there, how are you today?"},
     {"role": "assistant", "content": "Fine, thank you. How can I help you?"},
     {"role": "user", "content": "Tell me about the weather."},
     {"role": "assistant", "content": "It is sunny and warm in the afternoon."}],
    [{"role": "user", "content": "Give me a recipe."},
     {"role": "assistant", "content": "Boil pasta, add tomato sauce and basil."}],
]  # fmt: skip


def _write(tmp_path: Path, lines: list[str], **changes) -> Path:
    (tmp_path / "logs.jsonl").write_text("".join(line + "\n" for line in lines))
    item = {"id": "logs", "system": "Answer briefly.", "log": "logs.jsonl",
            "replay": ["reference", "own"], "checks": [{"type": "regex_must_not",
                                                        "pattern": "sorry"}]}  # fmt: skip
    (tmp_path / "suite.yaml").write_text(yaml.safe_dump({"suite": "replays", "items": [item]}))
    config = {
        "name": "replay-tiny",
        "models": ["tiny-random-llama"],
        "suites": [str(tmp_path / "suite.yaml")],
        "policies": ["none"],
        "conversation_policies": ["none"],
        "samples": 1,
        "generation": {"engine": "hf", "max_tokens": 16, "turn_tokens": 8, "temperature": 0},
        "scoring": {"window": 8},
        "probe": {"samples": 1, "t_min": 4},
        **changes,
    }
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _refused(tmp_path: Path, run_cli, lines: list[str], **changes) -> str:
    path = _write(tmp_path, lines, **changes)
    out = tmp_path / "out"
    code, _, err = run_cli(["run", str(path), "--out", str(out)])
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert not out.exists()
    return err.strip().removeprefix("error: ")


def test_a_history_longer_than_the_context(tmp_path, tiny_model_path, run_cli):
    long = [{"role": "user", "content": "word " * 40}, {"role": "assistant", "content": "ok"}]
    lines = [json.dumps({"messages": TALKS[1]}), json.dumps({"id": "long", "messages": long})]
    generation = {"engine": "hf", "max_tokens": 16, "turn_tokens": 8, "max_model_len": 40}
    err = _refused(tmp_path, run_cli, lines, generation=generation)
    assert err.startswith(f"{(tmp_path / 'logs.jsonl').resolve()}:2: conversation 'long'")
    assert "context is 40" in err


def test_a_log_line_that_is_not_json(tmp_path, tiny_model_path, run_cli):
    err = _refused(tmp_path, run_cli, [json.dumps({"messages": TALKS[0]}), "{not json"])
    assert "logs.jsonl:2:" in err and "JSON" in err


def test_roles_a_replay_cannot_follow(tmp_path, tiny_model_path, run_cli):
    odd = [{"role": "assistant", "content": "Hi!"}, {"role": "user", "content": "Hello."},
           {"role": "assistant", "content": "How can I help?"}]  # fmt: skip
    err = _refused(tmp_path, run_cli, [json.dumps(odd)])
    assert "logs.jsonl:1:" in err


def test_probe_and_forks_take_replayed_records(tmp_path, tiny_model_path, run_cli):
    lines = [json.dumps({"id": f"t{i}", "messages": m}) for i, m in enumerate(TALKS)]
    forks = {"at": [0, 4], "tokens": 4, "draws": 1, "records": 2}
    path = _write(tmp_path, lines, forks=forks)
    out = tmp_path / "out"
    code, _, err = run_cli(["run", str(path), "--out", str(out)])
    assert code == 0, err
    records = [json.loads(x) for x in (out / "generations.jsonl").read_text().splitlines()]
    # reference: 3 replies; own: 2 conversations; logged: 2 (1 sample each)
    assert [r.get("history") for r in records].count("reference") == 3
    assert [r.get("history") for r in records].count("logged") == 2
    div = pd.read_csv(out / "divergence.csv")
    # probe.samples 1: sample 0 of (logs, none), a replayed record, and of (logs, logged)
    assert set(div["policy"]) == {"none", "logged"}
    assert "logged" in set(div[div["policy"] == "logged"]["role"])
    forks_csv = pd.read_csv(out / "forks.csv")
    assert set(forks_csv["policy"]) == {"none"} and set(forks_csv["sample"]) == {0, 1}
    assert {"with", "without"} == set(forks_csv["arm"])
    turns = pd.read_csv(out / "turns.csv", keep_default_na=False)
    assert set(turns["history"]) == {"logged", "reference", "own"}
    assert set(turns["conversation_id"]) == {"t0", "t1"}
