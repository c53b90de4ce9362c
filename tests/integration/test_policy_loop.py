"""The policy loop with a scripted engine: exact offsets, EOS continuation, merged groups,
token accounting. Only the tokenizer of the tiny model is loaded (milliseconds per test)."""

from __future__ import annotations

import pytest

from harness.engines import GenerationResult, SamplingSettings
from harness.policies import (
    AdaptivePolicy,
    ChatFormat,
    NonePolicy,
    PeriodicPolicy,
    RestatePolicy,
    SampleSpec,
    policy_run,
    run_policies,
    run_policy,
)

pytestmark = pytest.mark.integration
WORD = 1234  # a plain token id the scripted engine emits


class ScriptedEngine:
    """Emits WORD tokens; a request whose seed is in `eos_at` stops with EOS after n tokens."""

    name = "scripted"
    max_model_len = 4096

    def __init__(self, tokenizer, eos_at: dict[int, int] | None = None) -> None:
        self.tokenizer = tokenizer
        self.eos_at = eos_at or {}
        self.batches: list[int] = []

    def generate(self, requests):
        self.batches.append(len(requests))
        out = []
        for request in requests:
            n = request.sampling.max_tokens
            stop = self.eos_at.get(request.sampling.seed)
            if stop is not None and stop < n:
                ids = [WORD] * (stop - 1) + [self.tokenizer.eos_token_id]
                reason = "stop"
            else:
                ids, reason = [WORD] * n, "length"
            out.append(
                GenerationResult(
                    token_ids=ids, text="", finish_reason=reason,
                    prompt_tokens=len(request.prompt_ids), cached_prompt_tokens=0,
                )
            )  # fmt: skip
        return out

    def close(self) -> None:
        pass


@pytest.fixture(scope="module")
def chat(tiny_model_path):
    from transformers import AutoTokenizer

    return ChatFormat(AutoTokenizer.from_pretrained(tiny_model_path))


def _specs(n: int) -> list[SampleSpec]:
    return [
        SampleSpec(system="Be brief.", user="Tell me a story.", reminder="Be brief.",
                   restatement="Sure:", seed=i, meta={"sample": i})
        for i in range(n)
    ]  # fmt: skip


def test_periodic_offsets_and_accounting(chat):
    engine = ScriptedEngine(chat.tokenizer)
    records = run_policy(
        policy_run(PeriodicPolicy(every=10, placement="user")), engine, chat, _specs(2),
        SamplingSettings(max_tokens=35),
    )  # fmt: skip
    reminder = chat.turn_ids("user", "Reminder: Be brief. Continue.", None)
    for record in records:
        kinds = [(s.kind, s.end - s.start) for s in record.segments]
        r = len(reminder)
        assert kinds == [
            ("generated", 10), ("injected", r), ("generated", 10), ("injected", r),
            ("generated", 10), ("injected", r), ("generated", 5),
        ]  # fmt: skip
        assert record.tokens.generated == 35 and record.tokens.injected == 3 * r
        assert record.rounds == 4 and record.finish_reason == "length"
        # every round re-sends the prompt and the continuation so far
        p = len(record.prompt_ids)
        assert record.tokens.processed == sum(
            p + (10 + r) * k + g for k, g in enumerate([10, 10, 10, 5])
        )
    assert engine.batches == [2, 2, 2, 2]


def test_eos_continue_turn_is_a_segment_and_budget_is_generated_tokens(chat):
    # sample 0's first round (seed 0 * 7919 + 0 = 0) ends with EOS after 4 tokens
    engine = ScriptedEngine(chat.tokenizer, eos_at={0: 4})
    records = run_policy(
        policy_run(NonePolicy(), continue_on_eos=True),
        engine,
        chat,
        _specs(2),
        SamplingSettings(max_tokens=20),
    )
    first = records[0]
    assert [(s.kind, s.source) for s in first.segments] == [
        ("generated", "model"), ("injected", "continue"), ("generated", "model"),
    ]  # fmt: skip
    assert first.continuation_ids[3] == chat.eos_id
    continue_ids = first.continuation_ids[first.segments[1].start : first.segments[1].end]
    assert chat.tokenizer.decode(continue_ids).startswith("\n<|im_start|>user\nContinue.")
    assert first.tokens.generated == 20
    stopped = run_policy(policy_run(NonePolicy()), ScriptedEngine(chat.tokenizer, {0: 4}), chat,
                         _specs(1), SamplingSettings(max_tokens=20))[0]  # fmt: skip
    assert stopped.finish_reason == "stop" and stopped.tokens.generated == 4


def test_merged_groups_share_batches_and_match_separate_runs(chat):
    settings = SamplingSettings(max_tokens=30)
    engine = ScriptedEngine(chat.tokenizer)
    merged = run_policies(
        [(policy_run(NonePolicy()), _specs(2)), (policy_run(PeriodicPolicy(every=10)), _specs(2)),
         (policy_run(RestatePolicy()), _specs(2))],
        engine, chat, settings,
    )  # fmt: skip
    assert engine.batches == [6, 2, 2]  # none and restate finish in round one
    alone = run_policy(policy_run(PeriodicPolicy(every=10)), ScriptedEngine(chat.tokenizer), chat,
                       _specs(2), settings)  # fmt: skip
    assert [r.continuation_ids for r in merged[1]] == [r.continuation_ids for r in alone]
    assert merged[2][0].segments[0].kind == "restatement"
    assert merged[2][0].tokens.restated == len(chat.encode("Sure:"))


def test_adaptive_reads_only_generated_text_of_the_last_window(chat):
    seen = []

    def violates(state, text):
        seen.append(text)
        return state.spec.meta["sample"] == 1

    records = run_policy(
        policy_run(AdaptivePolicy(every=8), violates=violates), ScriptedEngine(chat.tokenizer),
        chat, _specs(2), SamplingSettings(max_tokens=24),
    )  # fmt: skip
    assert [sum(s.source == "reminder" for s in r.segments) for r in records] == [0, 2]
    word = chat.tokenizer.decode([WORD])
    assert seen and all(text == word * 8 for text in seen)  # no reminder text leaks in


class ContinuousScriptedEngine(ScriptedEngine):
    """The scripted engine with continuous batching: one request at a time, last queued first,
    so samples finish their rounds in another order than the round loop's."""

    def generate_continuous(self, first, follow):
        queue = list(first)
        while queue:
            key, request = queue.pop()
            [result] = self.generate([request])
            queue.extend(follow(key, result))


def _conversation_specs(n: int) -> list[SampleSpec]:
    return [
        SampleSpec(system="Be brief.", user="Hi.", reminder="Be brief.", restatement="Sure:",
                   seed=10 + i, meta={"sample": i}, turns=[("And then?", False), ("Why?", True)])
        for i in range(n)
    ]  # fmt: skip


def test_continuous_batching_gives_the_records_of_the_round_loop(chat):
    # EOS mid-round for some samples (continue turns), reminders, restatements, adaptive
    # windows and scripted conversations, merged: every record must come out the same
    eos = {0: 4, 7919 + 1: 6, 7919 * 2 + 2: 3, 10 * 7919: 2}
    settings = SamplingSettings(max_tokens=40)

    def groups():
        def violates(state, text):
            return state.spec.seed % 2 == 0

        return [
            (policy_run(NonePolicy(), continue_on_eos=True), _specs(3)),
            (policy_run(RestatePolicy(), continue_on_eos=True), _specs(3)),
            (policy_run(PeriodicPolicy(every=16), continue_on_eos=True), _specs(3)),
            (
                policy_run(AdaptivePolicy(every=8), continue_on_eos=True, violates=violates),
                _specs(3),
            ),
            (policy_run(PeriodicPolicy(placement="system", every_turns=2)), _conversation_specs(2)),
        ]

    rounds = run_policies(groups(), ScriptedEngine(chat.tokenizer, eos), chat, settings,
                          turn_tokens=12)  # fmt: skip
    engine = ContinuousScriptedEngine(chat.tokenizer, eos)
    handed: list[int] = []
    continuous = run_policies(groups(), engine, chat, settings, turn_tokens=12,
                              on_group_done=lambda i, _: handed.append(i))  # fmt: skip
    assert set(engine.batches) == {1}  # the continuous path ran, one request at a time
    assert sorted(handed) == [0, 1, 2, 3, 4]
    strip = {"seconds"}
    for group_rounds, group_continuous in zip(rounds, continuous, strict=True):
        for a, b in zip(group_rounds, group_continuous, strict=True):
            assert a.model_dump(exclude=strip) == b.model_dump(exclude=strip)
    assert any(r.tokens.injected for r in rounds[2])  # the mix exercised reminders
    assert any(s.source == "continue" for r in rounds[0] for s in r.segments)
