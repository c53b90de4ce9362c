"""The chat engine's Anthropic Messages protocol (`chat.protocol: anthropic`, the anthropic
SDK) over real HTTP against the Messages stand-in of tests/chat_server.py (no model): the
payload shape (system prompt as `system`, an assistant prefill as the last message, sent
without its trailing whitespace, no seed, top_p only below 1, the key in `x-api-key`), stop
reasons mapped to finish reasons, usage tokens, the request cache, refusals before the first
request and the config's defaults. Whole runs: tests/e2e/test_anthropic_engine.py."""

from __future__ import annotations

import pytest

from harness.config.run import ChatOptions, GenerationConfig, RunConfig
from harness.engines import GenerationRequest, SamplingSettings, make_engine
from harness.engines.refusals import refusals as chat_refusals
from harness.errors import UserError
from harness.scoring.judge import _takes_prefill
from harness.text.chat import ChatFormat
from tests.chat_server import MessagesStandIn

KEY = "sk-ant-planted-1234"


@pytest.fixture
def messages_server():
    server = MessagesStandIn()
    yield server
    server.close()


def _engine(server, monkeypatch, **options):
    monkeypatch.setenv("ANTHROPIC_TEST_KEY", KEY)
    return make_engine(
        "chat", None, model="claude-test", protocol="anthropic", positions="chars",
        base_url=server.root, api_key_env="ANTHROPIC_TEST_KEY", **options,
    )  # fmt: skip


def _request(chat, prefill="", seed=1, n=40, stop=(), user="Write about a lighthouse.", **s):
    ids = chat.prompt_ids("Always answer in French.", user) + chat.encode(prefill)
    sampling = SamplingSettings(max_tokens=n, seed=seed, stop=list(stop), **s)
    return GenerationRequest(prompt_ids=ids, sampling=sampling)


def test_payload_has_system_and_the_prefill_as_last_assistant_message(messages_server, monkeypatch):
    engine = _engine(messages_server, monkeypatch)
    chat = ChatFormat(engine.tokenizer)
    [result] = engine.generate([_request(chat, prefill="Voici l'histoire :", stop=["FIN"])])
    [body] = messages_server.bodies
    assert messages_server.paths == ["/v1/messages"]
    assert body == {
        "model": "claude-test",
        "max_tokens": 40,
        "system": "Always answer in French.",
        "messages": [
            {"role": "user", "content": "Write about a lighthouse."},
            {"role": "assistant", "content": "Voici l'histoire :"},
        ],
        "stop_sequences": ["FIN"],
    }  # no seed (the Messages API has none), no temperature or top_p (API version 2026-10-21)
    assert f"Bearer {KEY}" in messages_server.seen_keys  # the SDK 2.x sends the key so
    # the reply continues the prefill: the continuation alone, positions in characters
    assert result.text and engine.tokenizer.decode(result.token_ids) == result.text
    assert result.api_tokens[1] == 3 and result.api_tokens[0] > 3  # cache reads are input
    assert engine.identity["served_model"] == "claude-test"
    assert engine.identity["protocol"] == "anthropic" and engine.takes_prefill
    assert _takes_prefill(engine)  # judges get their verdict prefill here


def test_prefill_sent_without_trailing_whitespace_which_the_reply_supplies(
    messages_server, monkeypatch
):
    engine = _engine(messages_server, monkeypatch)
    chat = ChatFormat(engine.tokenizer)
    aside = "Il était une fois\n\n[Answer only in French.]\n\n"  # an inline reminder's shape
    [result] = engine.generate([_request(chat, prefill=aside)])
    [body] = messages_server.bodies
    assert body["messages"][-1] == {"role": "assistant", "content": aside.rstrip()}
    # the stand-in writes the blank line the prefill was sent without: it is not doubled
    assert not result.text.startswith("\n") and engine.usage.prefill_whitespace == 0


def test_stop_reasons_map_to_finish_reasons(messages_server, monkeypatch):
    engine = _engine(messages_server, monkeypatch)
    chat = ChatFormat(engine.tokenizer)
    ended, cut, refused, stopped = engine.generate([
        _request(chat, seed=1, n=400), _request(chat, seed=2, n=1),
        _request(chat, user="REFUSE this"), _request(chat, user="STOP here", stop=["."]),
    ])  # fmt: skip
    assert ended.finish_reason == "stop" and ended.token_ids[-1] == chat.eos_id
    assert cut.finish_reason == "length" and cut.token_ids[-1] != chat.eos_id
    assert refused.finish_reason == "content_filter" and engine.usage.refused == 1
    assert stopped.finish_reason == "stop"


def test_a_reply_longer_than_its_budget_in_positions_is_cut_there(messages_server, monkeypatch):
    engine = _engine(messages_server, monkeypatch)
    chat = ChatFormat(engine.tokenizer)
    # max_tokens 10 counts the endpoint's tokens (the stand-in's words): 10 words are more
    # than 10 characters, the run's positions
    [result] = engine.generate([_request(chat, n=10)])
    assert messages_server.bodies[0]["max_tokens"] == 10
    assert len(result.token_ids) == 10 and len(result.text) == 10
    assert result.finish_reason == "length" and engine.usage.cut_to_budget == 1


def test_each_seed_is_a_request_of_its_own_and_a_resume_sends_none(
    messages_server, monkeypatch, tmp_path
):
    engine = _engine(messages_server, monkeypatch, cache_dir=tmp_path)
    chat = ChatFormat(engine.tokenizer)
    requests = [_request(chat, seed=s) for s in (1, 2, 2)]
    first = engine.generate(requests)
    # the seed is not sent, yet samples stay apart; the twin of one batch goes out once
    assert len(messages_server.bodies) == 2 and "seed" not in messages_server.bodies[0]
    again = _engine(messages_server, monkeypatch, cache_dir=tmp_path)
    assert [r.text for r in again.generate(requests)] == [r.text for r in first]
    assert len(messages_server.bodies) == 2 and again.usage.cached == 2
    for path in tmp_path.rglob("*"):
        assert not path.is_file() or KEY.encode() not in path.read_bytes()


@pytest.mark.parametrize(
    ("status", "message"),
    [(404, "model: claude-none"), (400, "Prefilling assistant messages is not supported")],
)
def test_wrong_model_or_a_model_without_prefill_is_one_line(monkeypatch, status, message):
    server = MessagesStandIn(status=status, message=message)
    try:
        engine = _engine(server, monkeypatch)
        with pytest.raises(UserError, match=rf"\(anthropic\) answered {status} for model 'claude"):
            engine.generate([_request(ChatFormat(engine.tokenizer), prefill="Voici")])
        assert len(server.bodies) == 1  # not retried: every request would get it
    finally:
        server.close()


def test_a_mid_conversation_system_message_is_refused_not_sent(messages_server, monkeypatch):
    engine = _engine(messages_server, monkeypatch)
    chat = ChatFormat(engine.tokenizer)
    ids = chat.prompt_ids("Be brief.", "Hello") + chat.encode("Hi") + [chat.eos_id]
    for _kind, _src, piece, _ in chat.user_turn_pieces(
        "More?", chat.eos_id, "Stay brief.", "system"
    ):
        ids += piece
    request = GenerationRequest(prompt_ids=ids, sampling=SamplingSettings(max_tokens=4))
    with pytest.raises(UserError, match="placement system"):
        engine.generate([request])
    assert messages_server.bodies == []


def _run_config(protocol: str, **changes) -> RunConfig:
    data = {
        "name": "t", "models": ["claude-test"], "suites": ["s.yaml"], "samples": 1,
        "policies": ["none", "restate", {"name": "periodic", "every": 8, "placement": "inline"}],
        "forks": {"at": [4], "tokens": 8, "draws": 1},
        "generation": {"engine": "chat", "base_url": "http://127.0.0.1:9",
                       "chat": {"protocol": protocol}},
        "probe": {"enabled": False},
    }  # fmt: skip
    for key, value in changes.items():
        data[key] = value
    return RunConfig.model_validate(data)


def test_prefill_features_run_on_anthropic_and_stay_refused_on_chat_completions():
    assert chat_refusals(_run_config("anthropic")) == []
    refused = chat_refusals(_run_config("openai"))
    assert [f for f, _ in refused] == [
        "assistant prefill (policy restate)",
        "assistant prefill (policy periodic, placement inline)",
        "assistant prefill (token-level forks: forks.at continues a reply mid-message)",
    ]
    assert all("chat.protocol: anthropic" in alternative for _, alternative in refused)


def test_what_the_messages_api_lacks_is_refused():
    system = _run_config(
        "anthropic", conversation_policies=[{"name": "periodic", "every_turns": 2,
                                             "placement": "system"}],
    )  # fmt: skip
    [(feature, alternative)] = chat_refusals(system)
    assert "a system message after the first (policy periodic" in feature
    assert "placement user" in alternative and "chat.protocol: openai" in alternative
    probe = _run_config("anthropic", probe={"enabled": True})
    assert "the probe: hidden states" in chat_refusals(probe)[0][0]


def test_config_defaults_of_the_anthropic_protocol():
    gen = GenerationConfig(engine="chat", chat={"protocol": "anthropic"})
    assert gen.api_key_env == "ANTHROPIC_API_KEY" and gen.chat.positions == "chars"
    assert gen.protocol == "anthropic"
    named = GenerationConfig(engine="chat", api_key_env="MY_KEY", chat={"protocol": "anthropic"})
    assert named.api_key_env == "MY_KEY"
    with pytest.raises(ValueError, match="Anthropic Messages API returns none"):
        ChatOptions(protocol="anthropic", positions="logprobs")
    # the openai protocol's configs keep their run ids: `protocol` is left out where default
    assert "protocol" not in GenerationConfig(engine="chat", chat={}).model_dump()["chat"]


def test_shipped_anthropic_example_is_priced_bounded_and_refuses_nothing(monkeypatch):
    from pathlib import Path

    from harness.api import load_config, plan
    from harness.commands.run import most_cost

    root = Path(__file__).resolve().parents[2]
    monkeypatch.chdir(root)
    config = load_config(root / "configs" / "anthropic-example.yaml")
    assert config.generation.protocol == "anthropic" and chat_refusals(config) == []
    assert {p.name for p in config.policies} >= {"restate", "periodic"}
    the_plan = plan(config)
    [totals] = the_plan.totals.models
    assert totals.to_send.requests > 0
    [cost] = most_cost(the_plan).values()
    assert float(cost.split()[0].replace(",", "")) > 0 and "prices of 2025-10-15" in cost


def test_the_plan_counts_every_round_of_an_inline_reminder_on_a_chat_endpoint(monkeypatch):
    """A chat endpoint takes one request per reminder round, each re-sending the text so far:
    the dry run's requests, tokens and most cost count them (they were one request)."""
    from pathlib import Path

    from harness.api import load_config, plan

    root = Path(__file__).resolve().parents[2]
    monkeypatch.chdir(root)
    config = load_config(root / "configs" / "anthropic-example.yaml")
    [inline] = [p for p in config.policies if getattr(p, "placement", None) == "inline"]
    the_plan = plan(config)
    [unit] = [u for u in the_plan.units if u.stage == "generate" and u.policy == inline.label]
    rounds = -(-config.generation.single_budget // inline.every)
    replies = unit.samples * len(unit.items)  # samples per item
    assert unit.budget.requests == replies * rounds
    assert unit.budget.output_tokens == replies * config.generation.single_budget
    # round r re-sends r rounds of reply: the input grows with the square of the rounds
    assert unit.budget.input_tokens >= replies * inline.every * rounds * (rounds - 1) // 2
