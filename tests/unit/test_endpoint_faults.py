"""A chat endpoint's faults as a user meets them through `harness run` (the real entry point,
no model): a wrong port and a key variable that is not set are each one line naming the cause
(the URL and the error; the variable), exit code 2, no traceback, no run folder left; without
`api_key_env` a local server that needs no key still answers, and a 401 names the variable
the key was read from."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import yaml

from harness.engines import GenerationRequest, SamplingSettings, make_engine
from harness.errors import UserError
from harness.text.chat import ChatFormat
from tests.chat_server import SUITE, ChatStandIn
from tests.unit.test_cli_errors import assert_one_error_line


def _closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _config(tmp_path: Path, url: str, **generation) -> Path:
    config = {
        "name": "faults",
        "models": ["stand-in"],
        "suites": [str(SUITE)],
        "policies": ["none"],
        "samples": 1,
        "generation": {"engine": "chat", "base_url": url, "max_tokens": 48, "turn_tokens": 12,
                       "chat": {"positions": "chars", "max_retries": 0}, **generation},
        "scoring": {"window": 8},
        "probe": {"enabled": False},
    }  # fmt: skip
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_a_wrong_port_is_one_line_naming_the_url_and_the_refusal(tmp_path, run_cli):
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    out = tmp_path / "out"
    code, _, stderr = run_cli(["run", str(_config(tmp_path, url)), "--out", str(out)])
    assert code == 2
    assert_one_error_line(stderr, f"cannot reach {url}", "Connection refused")
    assert not out.exists()  # no error records, no lock, no folder


def test_an_unset_key_variable_is_named(tmp_path, run_cli, monkeypatch, stand_in):
    monkeypatch.delenv("FAULTS_TEST_KEY", raising=False)
    config = _config(tmp_path, stand_in.url, api_key_env="FAULTS_TEST_KEY")
    out = tmp_path / "out"
    code, _, stderr = run_cli(["run", str(config), "--out", str(out)])
    assert code == 2
    assert_one_error_line(stderr, "FAULTS_TEST_KEY is not set")
    assert not out.exists() and stand_in.requests.total() == 0


def _request(engine) -> GenerationRequest:
    ids = ChatFormat(engine.tokenizer).prompt_ids("Be brief.", "Hi!")
    return GenerationRequest(prompt_ids=ids, sampling=SamplingSettings(max_tokens=8, seed=1))


def test_without_api_key_env_a_server_that_needs_no_key_answers(stand_in, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    engine = make_engine("chat", None, model="m", base_url=stand_in.url)
    assert engine.generate([_request(engine)])[0].finish_reason in ("stop", "length")
    assert stand_in.seen_keys == {"Bearer EMPTY"}


@pytest.mark.parametrize("key", [None, "sk-wrong"])
def test_a_401_names_the_keys_variable(monkeypatch, key):
    if key is None:
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    else:
        monkeypatch.setenv("OPENAI_API_KEY", key)
    server = ChatStandIn(status=401)
    try:
        engine = make_engine("chat", None, model="m", base_url=server.url, max_retries=0)
        state = "unset: the key 'EMPTY' was sent" if key is None else "set"
        with pytest.raises(UserError, match=rf"answered 401 .*key from \$OPENAI_API_KEY, {state}"):
            engine.generate([_request(engine)])
    finally:
        server.close()
