"""Conversation bookkeeping through a scripted engine and a one-token-per-character chat:
segment offsets, turn indices, reminder placement (system / user), the adaptive trigger after a
failing reply, the simulated user, the total budget and the context stop."""

from __future__ import annotations

import pytest

from harness.engines import GenerationResult, SamplingSettings
from harness.engines.scripted import CharTokenizer
from harness.policies import (
    AdaptivePolicy,
    ChatFormat,
    NonePolicy,
    PeriodicPolicy,
    RestatePolicy,
    SampleSpec,
    policy_run,
    run_policies,
)
from harness.policies.base import SimulatorSpec
from harness.policies.conversation import Simulators

EOS = 0  # CharTokenizer.eos_token_id


class ScriptedEngine:
    """Replies by the number of user turns in the prompt: turn k answers REPLIES[k] (EOS
    appended when the text ends in '$'), cut at max_tokens. A prompt that starts with
    '<system>SIM' is the simulated user's: it answers 'sim<k>'."""

    name = "scripted"

    def __init__(self, replies: dict[int, str], max_model_len: int = 10_000) -> None:
        self.replies, self.max_model_len, self.batches = replies, max_model_len, []

    def generate(self, requests):
        self.batches.append(len(requests))
        return [self._one(r) for r in requests]

    def _one(self, request):
        prompt = "".join(chr(i) for i in request.prompt_ids)
        n = request.sampling.max_tokens
        if prompt.startswith("<system>SIM"):
            text = f"sim{prompt.count('<assistant>') - 1}"
            ids = [ord(c) for c in text][:n]
            return GenerationResult(token_ids=ids, text=text, finish_reason="stop", prompt_tokens=0)
        reply = self.replies[prompt.count("<user>")]
        ids = [ord(c) for c in reply.rstrip("$")] + ([EOS] if reply.endswith("$") else [])
        ids = ids[:n]
        stop = bool(ids) and ids[-1] == EOS
        return GenerationResult(
            token_ids=ids,
            text="".join(chr(i) for i in ids if i != EOS),
            finish_reason="stop" if stop else "length",
            prompt_tokens=len(request.prompt_ids),
        )

    def close(self) -> None:
        pass


def _spec(**kw) -> SampleSpec:
    base = dict(system="S", user="U1", reminder="R", turns=[("U2", False), ("U3", True)], seed=1)
    return SampleSpec(**{**base, **kw})


def _layout(record):
    """(kind, source, turn, text) per segment, with the offsets checked to tile the ids."""
    pos, out = 0, []
    for seg in record.segments:
        assert seg.start == pos
        ids = record.continuation_ids[seg.start : seg.end]
        if seg.kind != "generated":  # the engine's text of a reply leaves EOS out
            assert ids == [ord(c) for c in seg.text]
        out.append((seg.kind, seg.source, seg.turn, "".join(map(chr, ids))))
        pos = seg.end
    assert pos == len(record.continuation_ids)
    return out


def _run(policy, spec, replies, turn_tokens=5, max_tokens=100, **kw):
    engine = kw.pop("engine", None) or ScriptedEngine(replies)
    [[record]] = run_policies(
        [(policy, [spec])],
        engine,
        ChatFormat(CharTokenizer()),
        SamplingSettings(max_tokens=max_tokens),
        turn_tokens=turn_tokens,
        **kw,
    )
    return record, engine


REPLIES = {1: "ok$", 2: "abcdefgh", 3: "fin$"}


def test_turns_tile_the_continuation_with_turn_indices():
    record, engine = _run(policy_run(NonePolicy()), _spec(), REPLIES)
    assert _layout(record) == [
        ("generated", "model", 1, "ok\x00"),
        ("markup", "chat", 2, "<user>"),
        ("user", "user", 2, "U2"),
        ("markup", "chat", 2, "<assistant>"),
        ("generated", "model", 2, "abcde"),  # cut at turn_tokens, no EOS: the turn ends there
        ("markup", "chat", 3, "<user>"),
        ("user", "user", 3, "U3"),
        ("markup", "chat", 3, "<assistant>"),
        ("generated", "model", 3, "fin\x00"),
    ]
    assert record.finish_reason == "stop" and record.rounds == 3
    assert record.tokens.generated == 3 + 5 + 4 and record.tokens.injected == 0
    assert record.turn_positions() == {1: [0, 1, 2], 2: list(range(22, 27)), 3: [46, 47, 48, 49]}
    assert engine.batches == [1, 1, 1]


def test_user_turn_pieces_split_markup_from_text():
    # the char template opens a turn with '<user>': as characters of the rendered span that
    # are not the message, they are markup
    chat = ChatFormat(CharTokenizer())
    pieces = chat.user_turn_pieces("Hi", EOS, "R", "system")
    assert [(k, s, t) for k, s, _, t in pieces] == [
        ("markup", "chat", "<system>"),
        ("injected", "reminder", "R"),
        ("markup", "chat", "<user>"),
        ("user", "user", "Hi"),
        ("markup", "chat", "<assistant>"),
    ]


@pytest.mark.parametrize(
    ("placement", "turn3"),
    [
        (
            "system",
            [
                ("markup", "chat", 3, "<system>"),
                ("injected", "reminder", 3, "R"),
                ("markup", "chat", 3, "<user>"),
                ("user", "user", 3, "U3"),
            ],
        ),
        (
            "user",
            [
                ("markup", "chat", 3, "<user>"),
                ("injected", "reminder", 3, "Reminder: R\n\n"),
                ("user", "user", 3, "U3"),
            ],
        ),
    ],
)
def test_periodic_every_turns_places_the_reminder(placement, turn3):
    policy = policy_run(PeriodicPolicy(placement=placement, every_turns=3))
    spec = _spec(turns=[("U2", False), ("U3", False), ("U4", False)])
    replies = {1: "a$", 2: "b$", 3: "c$", 4: "d$"}
    record, _ = _run(policy, spec, replies)
    layout = _layout(record)
    between = [seg for seg in layout if seg[0] != "generated"]
    by_turn = {k: [seg for seg in between if seg[2] == k] for k in (2, 3, 4)}
    plain = [("markup", "chat", "<user>"), ("user", "user"), ("markup", "chat", "<assistant>")]
    assert [seg[:2] for seg in by_turn[2]] == [p[:2] for p in plain]
    assert by_turn[3] == [*turn3, ("markup", "chat", 3, "<assistant>")]
    assert [seg[3] for seg in by_turn[4]] == ["<user>", "U4", "<assistant>"]
    assert policy.label == f"periodic-turns3-{placement}"
    assert record.tokens.injected == len(turn3[1][3])  # one reminder, before turn 3 only


def test_adaptive_on_turn_reminds_after_a_failing_reply_only():
    seen = []

    def violates(state, text):
        seen.append((state.turn, text))
        return "BAD" in text

    spec = _spec(turns=[("U2", False), ("U3", False), ("U4", False)])
    replies = {1: "fine$", 2: "BAD$", 3: "fine$", 4: "end$"}
    record, _ = _run(
        policy_run(AdaptivePolicy(placement="system", on="turn"), violates=violates), spec, replies
    )
    injected = [(s.turn, s.text) for s in record.segments if s.kind == "injected"]
    assert injected == [(3, "R")]  # before the user turn that follows the failing reply 2
    assert seen == [(1, "fine"), (2, "BAD"), (3, "fine")]  # the last reply has no next turn


def test_restate_prefills_turn_one_and_the_budget_ends_the_conversation():
    record, _ = _run(policy_run(RestatePolicy()), _spec(restatement="Q"), REPLIES, max_tokens=7)
    assert _layout(record)[:2] == [
        ("restatement", "restatement", 1, "Q"),
        ("generated", "model", 1, "ok\x00"),
    ]
    # 3 + 5 > 7: the second reply is cut by the total budget and the conversation ends
    assert [s.text for s in record.segments if s.kind == "generated"] == ["ok", "abcd"]
    assert record.finish_reason == "length"


def test_context_end_stops_the_conversation_and_keeps_what_came_before():
    spec = _spec()
    prompt = len(ChatFormat(CharTokenizer()).prompt_ids("S", "U1"))
    # room for reply 1 (3), user turn 2 (19) and 2 tokens of reply 2
    engine = ScriptedEngine(REPLIES, max_model_len=prompt + 3 + 19 + 2)
    record, _ = _run(policy_run(NonePolicy()), spec, REPLIES, engine=engine)
    assert [s.text for s in record.segments if s.kind == "generated"] == ["ok", "ab"]
    assert record.finish_reason == "context"


def test_simulated_user_speaks_after_the_scripted_turns_in_its_own_batch():
    sim = SimulatorSpec(system="SIM", turns=2, max_tokens=8)
    spec = _spec(turns=[("U2", False)], simulator=sim)
    replies = {1: "a$", 2: "b$", 3: "c$", 4: "d$"}
    record, engine = _run(policy_run(NonePolicy()), spec, replies, simulators=Simulators())
    users = [(s.turn, s.source, s.text) for s in record.segments if s.kind == "user"]
    # the simulator sees turns 1..k as its own messages: after turn 2 it has spoken twice
    assert users == [(2, "user", "U2"), (3, "simulator", "sim2"), (4, "simulator", "sim3")]
    assert engine.batches == [1, 1, 1, 1, 1, 1]  # reply 1, reply 2, sim, reply 3, sim, reply 4
    assert record.finish_reason == "stop"


def test_single_replies_and_conversations_share_rounds():
    single = SampleSpec(system="S", user="U1", seed=2)
    engine = ScriptedEngine({1: "ok$", 2: "abcdefgh", 3: "fin$"})
    chat = ChatFormat(CharTokenizer())
    [[conv], [one]] = run_policies(
        [(policy_run(NonePolicy()), [_spec()]), (policy_run(NonePolicy()), [single])],
        engine,
        chat,
        SamplingSettings(max_tokens=100),
        turn_tokens=5,
    )
    assert engine.batches == [2, 1, 1]
    assert one.segments[0].turn is None and "turn" not in one.segments[0].model_dump()
    assert conv.is_conversation and not one.is_conversation


def test_prompt_ids_are_memoised_as_rendered_and_each_call_gets_its_own_list():
    from harness.text.chat import TEMPLATE_DEFAULT

    fmt, fresh = ChatFormat(CharTokenizer()), ChatFormat(CharTokenizer())
    for system in ("S", None, TEMPLATE_DEFAULT, "S"):
        first = fmt.prompt_ids(system, "U1")
        assert first == fresh.encode(fresh.prompt_text(system, "U1"))  # the render, encoded
        first.append(-1)  # a caller extending its prompt does not change the next one
        assert fmt.prompt_ids(system, "U1") == first[:-1]
    assert len(fmt._prompts) == 3


def test_a_single_reply_has_its_own_budget_beside_a_conversations_total():
    """`single_tokens` (generation.single_reply_tokens) bounds a single reply, while
    `max_tokens` stays a conversation's total: one run gives a reply a reply's budget and a
    conversation room for all its replies."""
    single = SampleSpec(system="S", user="U1", seed=2)
    engine = ScriptedEngine({1: "abcdefghij", 2: "klmnopqrst", 3: "uvwxyz$"})
    chat = ChatFormat(CharTokenizer())
    [[conv], [one]] = run_policies(
        [(policy_run(NonePolicy()), [_spec()]), (policy_run(NonePolicy()), [single])],
        engine,
        chat,
        SamplingSettings(max_tokens=20),
        turn_tokens=8,
        single_tokens=6,
    )
    assert (one.tokens.generated, one.finish_reason) == (6, "length")  # cut at its own 6
    assert conv.tokens.generated == 8 + 8 + 4  # 8 a reply, 20 in all: the third cut at 4
    assert conv.finish_reason == "length"


def test_a_reply_with_no_tokens_is_left_out_of_whole_reply_scoring():
    """A reply whose request failed for good has no token: whole-reply scoring skips its turn
    (it crashed with IndexError on `positions[0]`) and judges the others."""
    from harness.scoring.score import _replies

    record, _ = _run(policy_run(NonePolicy()), _spec(), REPLIES)
    empty = [
        seg.model_copy(update={"end": seg.start})
        if seg.kind == "generated" and seg.turn == 2
        else seg
        for seg in record.segments
    ]
    replies = _replies(record.model_copy(update={"segments": empty}), "t", CharTokenizer(), {})
    assert [where["turn"] for where, _ in replies] == [1, 3]
