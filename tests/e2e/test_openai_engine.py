"""The openai engine against a real `vllm serve` of the embedded model on 127.0.0.1 (the
session's `vllm_server`, tests/conftest.py), and the one-line error for an endpoint nobody
listens on."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from harness.engines import SamplingSettings, make_engine
from harness.policies import ChatFormat, PeriodicPolicy, SampleSpec, policy_run, run_policy

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.slow]
CONFIGS = Path(__file__).parent.parent / "data" / "configs"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_periodic_policy_through_a_served_model(vllm_server, embedded_model_path):
    engine = make_engine("openai", embedded_model_path, base_url=vllm_server)
    assert engine.model == "smollm2"  # the server's only model, found by GET /models
    chat = ChatFormat(engine.tokenizer)
    specs = [
        SampleSpec(
            system="Always answer in French.",
            user="Write a long story about a lighthouse.",
            reminder="Answer only in French.",
            seed=i,
        )
        for i in range(2)
    ]
    policy = policy_run(PeriodicPolicy(every=24, placement="user"), continue_on_eos=True)
    records = run_policy(
        policy, engine, chat, specs, SamplingSettings(temperature=0.7, max_tokens=72)
    )
    for record in records:
        assert record.engine == "openai" and record.tokens.generated == 72
        reminders = [s for s in record.segments if s.source == "reminder"]
        assert len(reminders) == 2
        assert record.tokens.processed > record.tokens.generated
    # the same seed through the server reproduces the same tokens
    again = run_policy(
        policy, engine, chat, specs, SamplingSettings(temperature=0.7, max_tokens=72)
    )
    assert [r.continuation_ids for r in again] == [r.continuation_ids for r in records]
    engine.close()


def test_wrong_served_model_name_is_one_line(vllm_server, embedded_model_path):
    from harness.errors import UserError

    with pytest.raises(UserError, match=r"model 'gpt-17' is not served .*\(served: smollm2\)"):
        make_engine("openai", embedded_model_path, base_url=vllm_server, served_model="gpt-17")


def test_closed_port_gives_one_line_error_and_writes_nothing(tmp_path, embedded_model_path):
    config = yaml.safe_load((CONFIGS / "valid.yaml").read_text())
    config["generation"] = {
        "engine": "openai",
        "base_url": f"http://127.0.0.1:{_free_port()}/v1",
        "max_tokens": 64,
    }
    config["suites"] = [str(CONFIGS / "mini-suite.yaml")]
    path = tmp_path / "endpoint.yaml"
    path.write_text(yaml.safe_dump(config))
    out = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, "-m", "harness", "run", str(path), "--out", str(out)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "cannot reach http://127.0.0.1:" in result.stderr
    assert not out.exists()
