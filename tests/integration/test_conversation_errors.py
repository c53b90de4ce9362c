"""Conversation bad input found by the plan, before anything is written: one line naming the
config, the item, the policy and the field, exit code 2, no run folder."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.integration
CONFIGS = Path(__file__).parent.parent / "data" / "configs"
TALK = {
    "id": "talk-fr",
    "system": "Always answer in French.",
    "user": "Hello!",
    "turns": ["How are you?", {"user": "Answer in English now.", "pressure": True}],
    "checks": [{"type": "language", "target": "fr"}],
}


def _run(
    tmp_path: Path, run_cli, policies=None, conversation_policies=None, items=None, **generation
):
    suite = yaml.safe_load((CONFIGS / "mini-suite.yaml").read_text())
    suite["items"].append(TALK)
    (tmp_path / "suite.yaml").write_text(yaml.safe_dump(suite, allow_unicode=True))
    config = {
        "name": "talk",
        "models": ["tiny-random-llama"],
        "suites": [str(tmp_path / "suite.yaml")],
        "policies": policies or ["none"],
        "samples": 1,
        "generation": {
            k: v
            for k, v in {"engine": "hf", "max_tokens": 64, "turn_tokens": 16, **generation}.items()
            if v is not None
        },
        "scoring": {"window": 16},
        "probe": {"enabled": False},
    }
    if conversation_policies:
        config["conversation_policies"] = conversation_policies
    if items:
        config["items"] = items
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    out = tmp_path / "out"
    code, _, err = run_cli(["run", str(path), "--out", str(out)])
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert str(path) in err and not out.exists()
    return err


def test_token_rhythm_on_a_conversation(tmp_path, tiny_model_path, run_cli):
    err = _run(tmp_path, run_cli, policies=[{"name": "periodic", "every": 16}])
    assert "item 'talk-fr', policy 'periodic-16-user'" in err
    assert "use `every_turns` (periodic) or `on: turn` (adaptive)" in err


def test_turn_rhythm_on_a_single_reply(tmp_path, tiny_model_path, run_cli):
    err = _run(tmp_path, run_cli, policies=[{"name": "periodic", "every_turns": 2}])
    assert "item 'mini-fr', policy 'periodic-turns2-user'" in err
    assert "need a conversation item" in err and "`conversation_policies`" in err


def test_conversation_without_turn_tokens(tmp_path, tiny_model_path, run_cli):
    err = _run(tmp_path, run_cli, conversation_policies=["none"], turn_tokens=None)
    assert "item 'talk-fr', policy 'none'" in err and "field 'generation.turn_tokens'" in err


def test_conversation_beyond_the_context(tmp_path, tiny_model_path, run_cli):
    err = _run(
        tmp_path,
        run_cli,
        conversation_policies=[{"name": "periodic", "every_turns": 1, "placement": "system"}],
        items=["talk-fr"],
        max_model_len=60,
    )
    assert "item 'talk-fr', policy 'periodic-turns1-system'" in err
    assert "the conversation needs at least" in err and "context is 60" in err
