"""The chat engine over real HTTP, against the chat-completions stand-in and the fault proxy of
tests/chat_server.py (no model): messages read back from position ids, positions from the
endpoint's logprobs, the request cache (a second engine sends nothing), the SDK's retries
through 429 / 500 / dropped connections, failures, refusals and filters recorded as such, the
rate limit. Whole runs through the CLI: tests/e2e/test_chat_cli.py."""

from __future__ import annotations

import pytest

from harness.engines import GenerationRequest, SamplingSettings, make_engine
from harness.engines.positions import PositionUnits, piece_bytes, piece_id
from harness.errors import UserError
from harness.text.chat import ChatFormat
from tests.chat_server import ChatStandIn, FaultProxy


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
