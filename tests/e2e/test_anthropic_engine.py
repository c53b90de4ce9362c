"""`generation: {engine: chat, chat: {protocol: anthropic}}`, Anthropic's Messages API through
the anthropic SDK, as a user runs it: what needs assistant prefill (`restate`, an inline
reminder, the judge's verdict prefill) beside a scripted conversation.

- Against the Messages stand-in of tests/chat_server.py (no model): the dry run sends nothing;
  the run's requests carry the restatement as the last assistant message; resume sends none.
- Against the session's real `vllm serve` of the embedded model (its `/v1/messages`, served
  with the prefill template of the `vllm_server` fixture): turns.csv and windows.csv rows,
  finish reasons, the prefill honoured (the input tokens the server counted are those of an
  open assistant turn, not a closed one and a new one), and a planted key in no file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tests.chat_server import MessagesStandIn
from tests.conftest import PREFILL_TEMPLATE

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1800)]
ROOT = Path(__file__).parent.parent.parent
SUITE = ROOT / "tests" / "data" / "hosted" / "prefill.yaml"
KEY = "sk-ant-planted-E2E-3141"
RESTATEMENT = "Voici une courte histoire, écrite en français :"


def _config(tmp_path: Path, url: str, model: str, forks: dict | None = None, **chat) -> Path:
    config = {
        "name": "anthropic-test",
        "models": [model],
        "suites": [str(SUITE)],
        "policies": ["none", "restate", {"name": "periodic", "every": 16, "placement": "inline"}],
        "conversation_policies": ["none", {"name": "periodic", "every_turns": 1}],
        "samples": 2,
        "generation": {
            "engine": "chat",
            "base_url": url,
            "api_key_env": "ANTHROPIC_E2E_KEY",
            "max_tokens": 48,
            "turn_tokens": 16,
            "chat": {"protocol": "anthropic", "concurrency": 4, **chat},
        },  # fmt: skip
        "scoring": {"window": 16},
        "probe": {"enabled": False},
        "pricing": {model: {"input": 3.0, "output": 15.0, "as_of": "2026-12-01"}},
    }
    if forks:
        config["forks"] = forks
    path = tmp_path / "anthropic.yaml"
    path.write_text(yaml.safe_dump(config, allow_unicode=True))
    return path


def _run(config: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "harness", "run", str(config), "--out", str(out), *extra],
        capture_output=True, text=True, env={**os.environ, "ANTHROPIC_E2E_KEY": KEY},
        timeout=1500,
    )  # fmt: skip


def _no_key(out: Path) -> None:
    for path in out.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path


def test_prefill_run_through_the_messages_protocol_and_resume(tmp_path):
    server = MessagesStandIn()
    try:
        # token-level forks continue a reply mid-message: prefills too
        forks = {"at": [8], "tokens": 8, "draws": 1, "policies": ["none"]}
        config = _config(tmp_path, server.root, "claude-test", forks=forks)
        out = tmp_path / "out"
        dry = _run(config, out, "--dry-run")
        assert dry.returncode == 0, dry.stderr[-2000:]
        assert "claude-test" in dry.stdout and "2026-12-01" in dry.stdout and server.bodies == []
        first = _run(config, out)
        assert first.returncode in (0, 1), first.stderr[-2000:]
        sent = len(server.bodies)
        prefilled = [b for b in server.bodies if b["messages"][-1]["role"] == "assistant"]
        assert {"role": "assistant", "content": RESTATEMENT} in [
            b["messages"][-1] for b in prefilled
        ]
        # the judge's answer starts with its verdict prefill; an inline aside is a prefill too
        # (replies are cut at 16 characters, the policy's rhythm, and go on after the aside)
        assert any(b["messages"][-1]["content"] == '{"pass":' for b in prefilled)
        assert any(b["messages"][-1]["content"].endswith("]") for b in prefilled)
        assert len(pd.read_csv(out / "forks.csv")) > 0
        assert any("system" not in b for b in prefilled)  # the fork arm without the prompt
        assert all("temperature" not in b and "seed" not in b for b in server.bodies)
        windows = pd.read_csv(out / "windows.csv")
        assert {"restate", "periodic-16-inline"} <= set(windows["policy"])
        assert set(pd.read_csv(out / "turns.csv")["item"]) == {"fr-bakery"}
        hosted = json.loads((out / "manifest.json").read_text())["hosted"]["claude-test"]
        assert hosted["protocol"] == "anthropic" and hosted["positions"] == "chars"
        assert hosted["failed"] == 0 and hosted["cost_usd"] > 0
        (out / "windows.csv").unlink()
        again = _run(config, out)
        assert again.returncode in (0, 1), again.stderr[-2000:]
        assert len(server.bodies) == sent  # every answer from the run's caches
        _no_key(out)
    finally:
        server.close()


def test_prefill_template_renders_every_other_request_as_the_model_does(embedded_model_path):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(embedded_model_path)
    prefill = PREFILL_TEMPLATE.read_text()
    chats = [
        [{"role": "user", "content": "Hi"}],
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
         {"role": "assistant", "content": "Hello."}, {"role": "user", "content": "More?"}],
    ]  # fmt: skip
    for chat in chats:
        own = tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
        assert (
            tokenizer.apply_chat_template(
                chat, tokenize=False, add_generation_prompt=True, chat_template=prefill
            )
            == own
        )
    # a last assistant message: open, as `continue_final_message` renders it
    chat = [*chats[0], {"role": "assistant", "content": "Sure"}]
    continued = tokenizer.apply_chat_template(chat, tokenize=False, continue_final_message=True)
    assert (
        tokenizer.apply_chat_template(
            chat, tokenize=False, add_generation_prompt=True, chat_template=prefill
        )
        == continued
    )


def test_restate_through_vllm_messages_endpoint(vllm_server, embedded_model_path, tmp_path):
    from transformers import AutoTokenizer

    root = vllm_server.removesuffix("/v1")  # the anthropic SDK appends /v1/messages
    config = _config(tmp_path, root, "smollm2", positions="hf:smollm2-135m-instruct")
    out = tmp_path / "out"
    result = _run(config, out)
    assert result.returncode in (0, 1), result.stderr[-3000:]
    turns = pd.read_csv(out / "turns.csv")
    assert set(turns["item"]) == {"fr-bakery"} and turns["turn"].max() == 3
    windows = pd.read_csv(out / "windows.csv")
    assert {"none", "restate", "periodic-16-inline"} <= set(windows["policy"])
    records = [json.loads(line) for line in (out / "generations.jsonl").read_text().splitlines()]
    assert {r["finish_reason"] for r in records} <= {"stop", "length"}
    # the prefill honoured: the server counted the tokens of an open assistant turn that
    # holds the restatement (a closed turn and a new one would take 5 more)
    tokenizer = AutoTokenizer.from_pretrained(embedded_model_path)
    chat = [
        {"role": "system", "content": "Always answer in French."},
        {"role": "user", "content": "Write a short story about a lighthouse."},
        {"role": "assistant", "content": RESTATEMENT},
    ]

    def count(**how) -> int:
        text = tokenizer.apply_chat_template(chat, tokenize=False, **how)
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])

    open_turn, closed = count(continue_final_message=True), count(add_generation_prompt=True)
    restated = [r for r in records if r["policy"] == "restate"]
    assert len(restated) == 2 and closed > open_turn
    for record in restated:
        first = record["segments"][0]
        assert first["kind"] == "restatement" and first["text"] == RESTATEMENT
        print("restate reply:", repr(record["segments"][1]["text"][:80]))
        if len(record["segments"]) == 2:  # one request: its input is the open turn's
            assert record["tokens"].get("api_input") == open_turn, (record["tokens"], closed)
    # inline reminders every 16 tokens: the reply goes on after the aside (a prefill)
    inline = [r for r in records if r["policy"] == "periodic-16-inline"]
    resumed = [r for r in inline if [s["kind"] for s in r["segments"]][:3] == [
        "generated", "injected", "generated"]]  # fmt: skip
    assert resumed, [[s["kind"] for s in r["segments"]] for r in inline]
    manifest = json.loads((out / "manifest.json").read_text())
    hosted = manifest["hosted"]["smollm2"]
    assert hosted["served_model"] == "smollm2" and hosted["failed"] == 0
    assert hosted["protocol"] == "anthropic" and hosted["requests"] > 0
    print("hosted:", {k: hosted[k] for k in ("requests", "input_tokens", "output_tokens")})
    _no_key(out)
