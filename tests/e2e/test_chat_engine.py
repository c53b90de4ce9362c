"""`generation: {engine: chat}` against the session's real `vllm serve` of the embedded model
(tests/conftest.py `vllm_server`, its chat-completions API): a single reply with a judge check,
the quickstart's conversation item (conv-fr-travel: scripted turns with a pressure turn) and a
simulated user, all through the one endpoint; then a fault proxy between the harness and the
server, a kill -9 mid-run and a resume that sends no request twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from harness.engines.positions import END_MARK, piece_id
from tests.chat_server import FaultProxy

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.slow]
ROOT = Path(__file__).parent.parent.parent
KEY = "sk-planted-E2E-7777"
END_ID = piece_id(END_MARK.encode())


def _config(tmp_path: Path, url: str, name: str) -> Path:
    config = {
        "name": name,
        "models": ["smollm2"],  # the name the server serves the embedded model under
        "suites": [
            str(ROOT / "tests" / "data" / "hosted" / "suite.yaml"),
            str(ROOT / "tasks" / "conversations.yaml"),
        ],
        "items": ["fr-story", "conv-fr-travel", "fr-museum"],
        "policies": ["none"],
        "conversation_policies": ["none"],
        "samples": 2,
        "generation": {
            "engine": "chat",
            "base_url": url,
            "api_key_env": "HOSTED_E2E_KEY",
            "max_tokens": 96,
            "max_model_len": 2048,
            "turn_tokens": 16,
            "temperature": 0.7,
            "chat": {"positions": "logprobs", "concurrency": 8, "max_retries": 6},
        },  # fmt: skip
        "scoring": {"window": 16},
        "probe": {"enabled": False},
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _cmd(config: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "harness", "run", str(config), "--out", str(out)]


def _env() -> dict:
    return {**os.environ, "HOSTED_E2E_KEY": KEY}


def test_chat_run_through_served_model(vllm_server, tmp_path):
    from transformers import AutoTokenizer

    from harness.models import resolve_model

    out = tmp_path / "out"
    result = subprocess.run(
        _cmd(_config(tmp_path, vllm_server, "chat-e2e"), out),
        capture_output=True, text=True, env=_env(), timeout=1800,
    )  # fmt: skip
    assert result.returncode in (0, 1), result.stderr[-3000:]
    turns = pd.read_csv(out / "turns.csv")
    assert {"conv-fr-travel", "fr-museum"} <= set(turns["item"])
    assert turns[turns["item"] == "conv-fr-travel"]["pressure"].any()
    windows = pd.read_csv(out / "windows.csv")
    assert set(windows["item"]) == {"fr-story", "conv-fr-travel", "fr-museum"}
    a_k = pd.read_csv(out / "turn_adherence.csv")
    travel = a_k[a_k["item"] == "conv-fr-travel"]
    assert travel["turn"].max() == 6 and travel["a"].between(0, 1).all()
    print("a(k) conv-fr-travel via chat:", travel[["turn", "a", "n"]].to_dict("records"))
    # positions from the server's logprobs: the embedded tokenizer cuts each reply the same way
    tokenizer = AutoTokenizer.from_pretrained(resolve_model("smollm2-135m-instruct").path)
    same = total = 0
    for line in (out / "generations.jsonl").read_text().splitlines():
        record = json.loads(line)
        for seg in record["segments"]:
            if seg["kind"] != "generated" or not seg["text"].strip():
                continue
            ids = record["continuation_ids"][seg["start"] : seg["end"]]
            if ids and ids[-1] == END_ID:  # the reply ended with the model's EOS
                ids = ids[:-1]
            n_tokens = len(tokenizer(seg["text"], add_special_tokens=False)["input_ids"])
            total += 1
            same += len(ids) == n_tokens
    print(f"replies whose logprobs positions equal the tokenizer's: {same}/{total}")
    assert total >= 10 and same / total >= 0.9
    manifest = json.loads((out / "manifest.json").read_text())
    hosted = manifest["hosted"]["smollm2"]
    print(f"replies cut by the fallback unit: {hosted['positions_fallback']}")
    assert hosted["served_model"] == "smollm2" and hosted["failed"] == 0
    assert hosted["positions_fallback"] <= 0.1 * total
    for path in out.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path


def test_faults_kill_and_resume_send_no_request_twice(vllm_server, tmp_path):
    proxy = FaultProxy(vllm_server, every=4)
    try:
        config, out = _config(tmp_path, proxy.url, "chat-faults"), tmp_path / "out"
        first = subprocess.Popen(_cmd(config, out), env=_env(), start_new_session=True,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        deadline = time.time() + 900
        while sum(proxy.forwarded.values()) < 12 and time.time() < deadline:
            time.sleep(0.5)
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
        before = sum(proxy.forwarded.values())
        result = subprocess.run(_cmd(config, out), capture_output=True, text=True, env=_env(),
                                timeout=1800)  # fmt: skip
        assert result.returncode in (0, 1), result.stderr[-3000:]
        repeats = sum(n - 1 for n in proxy.forwarded.values())
        print(f"faults {dict(proxy.faults)}, forwarded {sum(proxy.forwarded.values())} "
              f"({before} before the kill), distinct {len(proxy.forwarded)}, "
              f"repeats {repeats}")  # fmt: skip
        assert set(proxy.faults) == {"429", "500", "drop"}
        # a request in flight at the kill may be answered and lost (not yet in the cache; a
        # chat completion has no idempotency key): one engine batch is in flight at a time,
        # so at most the config's `concurrency` of them; every other request reached the
        # server once
        concurrency = yaml.safe_load(config.read_text())["generation"]["chat"]["concurrency"]
        assert repeats <= concurrency
        windows = pd.read_csv(out / "windows.csv")
        assert set(windows["item"]) == {"fr-story", "conv-fr-travel", "fr-museum"}
        lines = (out / "generations.jsonl").read_text().splitlines()
        assert all(json.loads(line)["finish_reason"] != "error" for line in lines)
        for path in out.rglob("*"):
            if path.is_file():
                assert KEY.encode() not in path.read_bytes(), path
    finally:
        proxy.close()
