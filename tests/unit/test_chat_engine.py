"""The chat engine over real HTTP, against the chat-completions stand-in and the fault proxy of
tests/chat_server.py (no model): messages read back from position ids, positions from the
endpoint's logprobs, the request cache (a resumed run sends nothing), the SDK's retries through
429 / 500 / dropped connections, refusals before the first request, and a whole `harness run`
with a planted key that appears in no file of the run folder."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from harness.chat import ChatFormat
from harness.engines import GenerationRequest, SamplingSettings, make_engine
from harness.engines.units import PositionUnits, piece_bytes, piece_id
from harness.errors import UserError
from tests.chat_server import ChatStandIn, FaultProxy

SUITE = Path(__file__).parent.parent / "data" / "hosted" / "suite.yaml"


@pytest.fixture
def stand_in():
    server = ChatStandIn()
    yield server
    server.close()


def _request(chat, system="Always answer in French.", user="Hi!", seed=1, n=20):
    ids = chat.prompt_ids(system, user)
    return GenerationRequest(prompt_ids=ids, sampling=SamplingSettings(max_tokens=n, seed=seed))


def test_piece_ids_round_trip_any_bytes():
    for piece in [b"", b"\x00a", "é".encode(), "🙂".encode()[:2], b" hello"]:
        assert piece_bytes(piece_id(piece)) == piece
    units = PositionUnits("chars")
    assert units.decode(units.encode("héllo 🙂")) == "héllo 🙂"
    assert len(units.encode("héllo")) == 5


def test_messages_read_back_from_the_prompt_ids():
    chat = ChatFormat(PositionUnits("chars"))
    ids = chat.prompt_ids("Be brief.", "Hello")
    ids += chat.encode("Hi there") + [chat.eos_id]
    for kind, _src, piece, _ in chat.user_turn_pieces(
        "More?", chat.eos_id, "Stay brief.", "system"
    ):
        assert kind in ("markup", "injected", "user")
        ids += piece
    messages, prefill = chat.tokenizer.messages_of(ids)
    assert prefill == ""
    assert messages == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hello"},
        {"role": "assistant", "content": "Hi there"},
        {"role": "system", "content": "Stay brief."},
        {"role": "user", "content": "More?"},
    ]
    # an open assistant message is a prefill: refused, never sent
    assert chat.tokenizer.messages_of(chat.prompt_ids(None, "x") + chat.encode("Sure"))[1]


def test_reply_positions_from_logprobs_and_cache(stand_in, tmp_path):
    engine = make_engine("chat", None, model="m", base_url=stand_in.url, cache_dir=tmp_path)
    chat = ChatFormat(engine.tokenizer)
    [result] = engine.generate([_request(chat)])
    assert stand_in.requests.total() == 1
    # one position per logprobs token, then the end mark (the model closed its turn)
    words = result.text.count(" ") + result.text.startswith(".") * 0
    assert result.finish_reason == "stop" and result.token_ids[-1] == chat.eos_id
    assert engine.tokenizer.decode(result.token_ids) == result.text
    assert len(result.token_ids) - 1 >= words
    assert engine.identity["fingerprints"] == ["fp_standin"]
    # a second engine on the same cache (a resumed run) sends nothing
    again = make_engine("chat", None, model="m", base_url=stand_in.url, cache_dir=tmp_path)
    assert again.generate([_request(chat)])[0].token_ids == result.token_ids
    assert stand_in.requests.total() == 1 and again.usage.cached == 1
    # identical requests in one batch go out once
    twins = again.generate([_request(chat, seed=5), _request(chat, seed=5)])
    assert twins[0].token_ids == twins[1].token_ids and stand_in.requests.total() == 2


def test_retries_through_faults_send_each_request_to_the_server_once(stand_in, tmp_path):
    proxy = FaultProxy(stand_in.url, every=2)
    try:
        engine = make_engine("chat", None, model="m", base_url=proxy.url, max_retries=6)
        chat = ChatFormat(engine.tokenizer)
        results = engine.generate([_request(chat, seed=s) for s in range(12)])
        assert all(r.finish_reason in ("stop", "length") for r in results)
        assert engine.usage.failed == 0
        assert set(proxy.faults) == {"429", "500", "drop"}
        assert max(proxy.forwarded.values()) == 1 and len(proxy.forwarded) == 12
    finally:
        proxy.close()


def test_a_request_failing_for_good_is_counted_and_the_batch_completes(stand_in):
    proxy = FaultProxy(stand_in.url, every=1)  # every request fails
    try:
        engine = make_engine("chat", None, model="m", base_url=proxy.url, max_retries=1)
        chat = ChatFormat(engine.tokenizer)
        results = engine.generate([_request(chat, seed=s) for s in range(3)])
        assert [r.finish_reason for r in results] == ["error"] * 3
        assert engine.usage.failed == 3 and len(engine.usage.errors) == 3
    finally:
        proxy.close()


def test_wrong_model_is_one_line():
    server = ChatStandIn(status=404)
    try:
        engine = make_engine("chat", None, model="gpt-17", base_url=server.url)
        chat = ChatFormat(engine.tokenizer)
        with pytest.raises(UserError, match=r"answered 404 for model 'gpt-17'"):
            engine.generate([_request(chat)])
    finally:
        server.close()


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
    manifest = json.loads((out / "manifest.json").read_text())
    hosted = manifest["hosted"]["stand-in"]
    # generation's requests (the judge's are cached as verdicts: cache/judge)
    assert 0 < hosted["requests"] < sent and hosted["fingerprints"] == ["fp_standin"]
    assert hosted["positions"] == "logprobs"
    assert manifest["t_unit"]["stand-in"].startswith("logprobs (the endpoint's tokens")
    # the endpoint's tokens per condition: the assistant's replies (the engine's total also
    # has the simulated user's turns, asked of the same model)
    conditions = manifest["hosted_conditions"]
    assert {c["policy"] for c in conditions} >= {"none", "periodic-8-user"}
    assert 0 < sum(c["output_tokens"] for c in conditions) < hosted["output_tokens"]
    report = (out / "report.html").read_text()
    assert "t is counted in: stand-in: logprobs" in report and "requests sent" in report
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


def test_refusals_and_filtered_replies_are_recorded_as_such(stand_in):
    engine = make_engine("chat", None, model="m", base_url=stand_in.url)
    chat = ChatFormat(engine.tokenizer)
    refused, filtered, fine = engine.generate(
        [_request(chat, user="REFUSE this"), _request(chat, user="FILTER this"), _request(chat)]
    )
    assert refused.finish_reason == "refusal" and refused.text == "I can't help with that."
    assert filtered.finish_reason == "content_filter"
    assert fine.finish_reason in ("stop", "length") and engine.usage.refused == 2


def test_rate_limit_spaces_requests():
    import time

    from harness.engines.ratelimit import RateLimiter

    limiter = RateLimiter(requests_per_minute=600)  # a bucket of 600, refilled 10 per second
    limiter._requests.level = 2  # nearly empty: the third request waits ~0.1 s
    start = time.monotonic()
    for _ in range(3):
        limiter.acquire(0)
    assert 0.07 < time.monotonic() - start < 1.0
    tokens = RateLimiter(tokens_per_minute=60)  # 1 token per second
    tokens.acquire(60)  # the whole minute's allowance
    tokens.spent(1)  # the endpoint counted 1: 59 come back
    start = time.monotonic()
    tokens.acquire(50)
    assert time.monotonic() - start < 0.5


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
