"""The chat engine through the CLI, as a user runs it, against the chat-completions stand-in
of tests/chat_server.py (a real local HTTP server; no model is started): a whole `harness run`
with a planted key that appears in no file of the run folder and a resume that sends nothing;
refusals before the first request; forks at turn starts, replays and sampling until decided on
chat; the budget that stops a run and a raised one that resumes it; the cost bound."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import date
from pathlib import Path

import pytest
import yaml

from tests.chat_server import SUITE, ChatStandIn

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1800)]


def _config(tmp_path: Path, url: str, **generation) -> Path:
    config = {
        "name": "hosted-test",
        "models": ["stand-in"],
        "suites": [str(SUITE)],
        "policies": ["none", {"name": "periodic", "every": 8, "placement": "user"}],
        "conversation_policies": [
            "none",
            {"name": "periodic", "every_turns": 1, "placement": "system"},
        ],
        "samples": 2,
        "generation": {
            "engine": "chat",
            "base_url": url,
            "api_key_env": "HOSTED_TEST_KEY",
            "max_tokens": 48,
            "turn_tokens": 12,
            "chat": {"concurrency": 4},
            **generation,
        },  # fmt: skip
        "scoring": {"window": 8},
        "probe": {"enabled": False},
    }
    path = tmp_path / "hosted.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _run(config: Path, out: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "HOSTED_TEST_KEY": "sk-planted-SECRET-4242"}
    return subprocess.run(
        [sys.executable, "-m", "harness", "run", str(config), "--out", str(out)],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip


def test_harness_run_on_a_chat_endpoint_resumes_without_sending_again(stand_in, tmp_path):
    import json

    import pandas as pd

    config, out = _config(tmp_path, stand_in.url), tmp_path / "out"
    first = _run(config, out)
    assert first.returncode == 0, first.stderr[-2000:]
    sent = stand_in.requests.total()
    assert sent > 0 and max(stand_in.requests.values()) == 1
    assert stand_in.seen_keys == {"Bearer sk-planted-SECRET-4242"}
    turns = pd.read_csv(out / "turns.csv")
    assert set(turns["item"]) == {"fr-travel", "fr-museum"} and turns["turn"].max() == 3
    windows = pd.read_csv(out / "windows.csv")
    assert set(windows["item"]) == {"fr-story", "fr-travel", "fr-museum"}
    # every file with positions says their unit: the endpoint's tokens, chars for our text
    for name in ("windows.csv", "turns.csv", "adherence_curve.csv", "summary.csv", "rules.csv"):
        assert set(pd.read_csv(out / name)["t_unit"]) == {"logprobs+chars"}, name
    manifest = json.loads((out / "manifest.json").read_text())
    hosted = manifest["hosted"]["stand-in"]
    # generation's requests (the judge's and the simulated user's engines count their own)
    assert 0 < hosted["requests"] < sent and hosted["fingerprints"] == ["fp_standin"]
    assert hosted["positions"] == "logprobs"
    assert manifest["t_unit"]["stand-in"].startswith("logprobs (the endpoint's tokens")
    # the endpoint's tokens per condition: the assistant's replies (the engine's total also
    # has the simulated user's turns, asked of the same model)
    conditions = manifest["hosted_conditions"]
    assert {c["policy"] for c in conditions} >= {"none", "periodic-8-user"}
    assert 0 < sum(c["output_tokens"] for c in conditions) < hosted["output_tokens"]
    # the judge check (fr-story's) through the same endpoint: its requests and tokens are the
    # condition's too, and every request sent, the judge's included, is in the request cache
    judged = [c for c in conditions if c["judge_requests"]]
    assert {c["item"] for c in judged} == {"fr-story"}
    assert 0 < sum(c["judge_requests"] for c in judged) <= sent - hosted["requests"]
    assert all(c["judge_output_tokens"] > 0 for c in judged)
    assert len(list((out / "cache" / "requests").rglob("*.json"))) == sent
    report = (out / "report.html").read_text()
    assert "t is counted in: stand-in: logprobs" in report and "requests sent" in report
    assert "[logprobs+chars]" in report  # the t axes name the unit
    # resume: everything from the run's caches, nothing sent
    (out / "windows.csv").unlink()
    again = _run(config, out)
    assert again.returncode == 0, again.stderr[-2000:]
    assert stand_in.requests.total() == sent
    for path in out.rglob("*"):
        if path.is_file():
            assert b"sk-planted-SECRET-4242" not in path.read_bytes(), path


@pytest.mark.parametrize(
    ("policy", "feature"),
    [
        ("restate", "assistant prefill (policy restate)"),
        ({"name": "periodic", "every": 8, "placement": "inline"}, "placement inline"),
    ],
)
def test_unsupported_features_are_refused_before_any_request(stand_in, tmp_path, policy, feature):
    config = yaml.safe_load(_config(tmp_path, stand_in.url).read_text())
    config["policies"] = ["none", policy]
    path = tmp_path / "refused.yaml"
    path.write_text(yaml.safe_dump(config))
    result = _run(path, tmp_path / "out")
    assert result.returncode == 2
    assert feature in result.stderr and "(engine chat) cannot do" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert stand_in.requests.total() == 0 and not (tmp_path / "out").exists()


def test_probe_is_refused_on_a_chat_endpoint(stand_in, tmp_path):
    config = yaml.safe_load(_config(tmp_path, stand_in.url).read_text())
    config["probe"] = {"enabled": True}
    path = tmp_path / "probe.yaml"
    path.write_text(yaml.safe_dump(config))
    result = _run(path, tmp_path / "out")
    assert result.returncode == 2 and "hidden states" in result.stderr
    assert stand_in.requests.total() == 0


def test_forks_at_turn_starts_run_on_a_chat_endpoint(stand_in, tmp_path):
    import json

    import pandas as pd

    config = yaml.safe_load(_config(tmp_path, stand_in.url).read_text())
    config["forks"] = {"at_turns": [2, 3], "tokens": 8, "draws": 2, "records": 1}
    path = tmp_path / "forks.yaml"
    path.write_text(yaml.safe_dump(config))
    result = _run(path, tmp_path / "out")
    assert result.returncode == 0, result.stderr[-2000:]
    forks = pd.read_csv(tmp_path / "out" / "forks.csv")
    talks = forks[forks["item"].isin(["fr-travel", "fr-museum"])]
    assert set(talks["arm"]) == {"with", "without"} and not talks.empty
    arms = [
        json.loads(line) for line in (tmp_path / "out" / "forks.jsonl").read_text().splitlines()
    ]
    assert arms and all(a["text"] for a in arms)
    assert (tmp_path / "out" / "carried.csv").exists()
    # token-level forks stay refused, naming the alternative
    config["forks"] = {"at": [4], "tokens": 8}
    path.write_text(yaml.safe_dump(config))
    refused = _run(path, tmp_path / "out2")
    assert refused.returncode == 2 and "forks.at_turns" in refused.stderr


def test_replay_and_until_decided_run_on_a_chat_endpoint(stand_in, tmp_path):
    import pandas as pd

    root = Path(__file__).resolve().parents[2]
    config = yaml.safe_load(_config(tmp_path, stand_in.url).read_text())
    replay = {**config, "suites": [str(root / "tasks" / "replay-support.yaml")]}
    replay["generation"] = {**config["generation"], "max_tokens": 128, "turn_tokens": 32}
    replay["scoring"] = {"window": 32, "languages": ["fr", "en"]}
    path = tmp_path / "replay.yaml"
    path.write_text(yaml.safe_dump(replay))
    result = _run(path, tmp_path / "replay")
    assert result.returncode == 0, result.stderr[-2000:]
    turns = pd.read_csv(tmp_path / "replay" / "turns.csv")
    assert {"logged", "own"} <= set(turns["history"])  # logged turns and the chat's own replies
    # sampling until decided: the gate's looks ask the endpoint for more samples
    config["samples"] = {"min": 2, "max": 4, "batch": 2}
    config["gates"] = [{"metric": "auc", "policy": "none", "min": 0.2, "items": ["fr-story"]}]
    path = tmp_path / "sequential.yaml"
    path.write_text(yaml.safe_dump(config))
    result = _run(path, tmp_path / "sequential")
    assert result.returncode in (0, 1), result.stderr[-2000:]
    assert (tmp_path / "sequential" / "gates.csv").exists()
    assert max(stand_in.requests.values()) == 1


def test_run_stops_before_its_budget_and_resumes(tmp_path):
    server = ChatStandIn()
    try:
        path = _config(tmp_path, server.url)
        config = yaml.safe_load(path.read_text())
        config["budget"] = {"output_tokens": 120}
        path.write_text(yaml.safe_dump(config))
        out = tmp_path / "out"
        stopped = _run(path, out)
        assert stopped.returncode == 4, stopped.stderr[-2000:]
        assert "budget reached" in stopped.stderr.strip().splitlines()[-1]
        first = server.requests.total()
        assert first > 0
        config["budget"] = {"output_tokens": 100_000}
        path.write_text(yaml.safe_dump(config))
        done = _run(path, out)
        assert done.returncode == 0, done.stderr[-2000:]
        assert max(server.requests.values()) == 1 and server.requests.total() > first
    finally:
        server.close()


def _planned(path):
    """The config and its plan's totals of the one serving model (what the dry run prints)."""
    from harness.api import load_config, plan

    config = load_config(path)
    the_plan = plan(config)
    [totals] = the_plan.totals.models
    return config, the_plan, totals


def test_shipped_hosted_example_is_priced_and_bounded(monkeypatch):
    from harness.commands.run import most_cost
    from harness.engines.refusals import refusals

    root = Path(__file__).resolve().parents[2]
    monkeypatch.chdir(root)
    config, the_plan, totals = _planned(root / "configs" / "hosted-example.yaml")
    assert config.generation.engine == "chat" and refusals(config) == []
    assert config.pricing["gpt-4o-mini"].as_of == date(2026, 12, 1)
    # 3 conversation policies x 2 conversations of 6 and 7 replies, 1 single reply x none;
    # 8 samples
    assert totals.planned.requests == 8 * (1 + 3 * 6 + 3 * 7)
    assert "prices of 2026-12-01" in most_cost(the_plan)["gpt-4o-mini"]


def test_the_plan_bounds_what_a_run_spent(tmp_path):
    """The plan's totals (the dry run's figures and its most cost) bound what the run then
    spent, as the endpoint counted it: requests, input and output tokens."""
    import json

    server = ChatStandIn()
    try:
        path = _config(tmp_path, server.url)
        _, _, totals = _planned(path)
        assert _run(path, tmp_path / "out").returncode == 0
        spent = json.loads((tmp_path / "out" / "manifest.json").read_text())["hosted"]
        used = spent["stand-in"]
        assert 0 < used["input_tokens"] <= totals.planned.input_tokens
        assert 0 < used["output_tokens"] <= totals.planned.output_tokens
        assert 0 < used["requests"] <= totals.planned.requests
    finally:
        server.close()
