"""The plan's totals as the one bound of a run's requests and tokens (harness/units/budgets.py):
a hosted model's text counted by `ByteBound`, a user simulator's turns counted on the model
that plays the user. The bound over a real run's spending: tests/e2e/test_chat_cli.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.engines.positions import FRAMING_TOKENS, ByteBound
from harness.text.chat import ChatFormat

ROOT = Path(__file__).parent.parent.parent
CONVERSATIONS = str(ROOT / "tasks" / "conversations.yaml")


@pytest.mark.parametrize("text", ["Always answer in French.", "Réponds en français.",
                                  "日本語で答えてください", "emoji 🦜🦜 and tabs\t\t"])  # fmt: skip
def test_byte_bound_counts_every_byte_and_frames_each_message(text):
    chat = ChatFormat(ByteBound())
    assert len(chat.encode(text)) == len(text.encode())  # no provider token is under a byte
    # system and user message, each framed, and the reply's opening
    framing = 3 * FRAMING_TOKENS + 2 * FRAMING_TOKENS
    assert len(chat.prompt_ids(text, "Hi")) == len(text.encode()) + 2 + framing


def _plan(generation: dict, items: list[str], tmp_path: Path, suite: str = CONVERSATIONS):
    from harness.api import load_config, plan

    model = "gpt-4o-mini" if generation.get("engine") == "chat" else "smollm2-135m-instruct"
    config = load_config({
        "name": "bounds", "models": [model], "suites": [suite], "items": items,
        "policies": ["none"], "conversation_policies": ["none"], "samples": 2,
        "generation": {"max_tokens": 96, "turn_tokens": 16, **generation},
        "probe": {"enabled": False},
    }, base=ROOT)  # fmt: skip
    return plan(config, tmp_path / "never-written")


def test_a_user_simulator_s_turns_are_units_of_the_plan(tmp_path):
    """conv-it-museum: 2 scripted turns after the first, 3 simulated (40 tokens at most each)."""
    the_plan = _plan({"engine": "hf"}, ["conv-it-museum"], tmp_path)
    [gen] = [u for u in the_plan.units if u.stage == "generate"]
    [sim] = [u for u in the_plan.units if u.stage == "simulated-user"]
    assert gen.budget.requests == 2 * (1 + 2 + 3)  # a request per reply, 2 samples
    assert sim.model == "smollm2-135m-instruct" and sim.items == ["conv-it-museum"]
    assert sim.budget.requests == 2 * 3 and sim.budget.output_tokens == 2 * 3 * 40
    # each simulated turn sends the simulator's prompt and at most the whole conversation,
    # whose replies alone are 6 x 16 tokens
    assert sim.budget.input_tokens > 2 * 3 * 6 * 16
    assert not [u for u in _plan({"engine": "hf"}, ["conv-fr-travel"], tmp_path / "b").units
                if u.stage == "simulated-user"]  # fmt: skip


def test_replies_re_send_simulated_messages_at_their_most(tmp_path):
    """10 more tokens a simulated message: each of a sample's 6 replies may re-send 3 such
    messages 10 tokens longer (the bound counts every turn in every request)."""
    import yaml

    suite = yaml.safe_load(Path(CONVERSATIONS).read_text())
    plans = []
    for most in (40, 50):
        for item in suite["items"]:
            if item["id"] == "conv-it-museum":
                item["user_simulator"]["max_tokens"] = most
        path = tmp_path / f"suite-{most}.yaml"
        path.write_text(yaml.safe_dump(suite, allow_unicode=True))
        plans.append(_plan({"engine": "hf"}, ["conv-it-museum"], tmp_path / str(most), str(path)))
    gen = [next(u for u in p.units if u.stage == "generate") for p in plans]
    assert gen[1].budget.input_tokens - gen[0].budget.input_tokens == 2 * 6 * 3 * 10


def test_a_hosted_model_is_budgeted_in_bytes_not_its_position_unit(tmp_path):
    """On a chat endpoint counting positions in characters, a reply's input is still bounded
    in bytes: the Italian prompt's accented letters count twice."""
    chat = {"engine": "chat", "base_url": "http://127.0.0.1:9/v1", "chat": {"positions": "chars"}}
    the_plan = _plan(chat, ["conv-it-museum"], tmp_path)
    [gen] = [u for u in the_plan.units if u.stage == "generate"]
    [totals] = the_plan.totals.models
    system = "Sei una guida museale a Firenze. Rispondi sempre in italiano."
    first = len(system.encode()) + len(b"What should I see at the Uffizi?") + 5 * FRAMING_TOKENS
    assert gen.budget.input_tokens >= 2 * 6 * first  # every reply re-sends the first prompt
    assert totals.planned.requests == 2 * 6 + 2 * 3  # the replies and the simulated turns
