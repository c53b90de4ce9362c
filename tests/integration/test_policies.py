"""Policies on the embedded model with the shared vLLM engine: segments at the promised
offsets, seeds reproduce, greedy `none` agrees between vLLM and transformers."""

from __future__ import annotations

import pytest

from harness.engines import SamplingSettings
from harness.errors import UserError
from harness.policies import (
    AdaptivePolicy,
    ChatFormat,
    NonePolicy,
    PeriodicPolicy,
    RestatePolicy,
    SampleSpec,
    policy_run,
    run_policy,
)

pytestmark = pytest.mark.integration

REMINDER = "Answer only in French."
RESTATEMENT = "Bien sûr ! Voici ma réponse, entièrement en français :"


def _specs(n=2, seed=0):
    return [
        SampleSpec(
            system="Always answer in French.",
            user="Write a long story about a lighthouse keeper.",
            reminder=REMINDER,
            restatement=RESTATEMENT,
            seed=seed + i,
            meta={"sample": i, "item": "fr-story"},
        )
        for i in range(n)
    ]


def _kinds(record):
    return [(s.kind, s.source, s.end - s.start) for s in record.segments]


def test_periodic_user_injects_exactly_every_k_generated_tokens(vllm_engine):
    chat = ChatFormat(vllm_engine.tokenizer)
    settings = SamplingSettings(temperature=0.7, max_tokens=96)
    # continue_on_eos keeps every sample running to the full budget
    policy = policy_run(PeriodicPolicy(every=32, placement="user"), continue_on_eos=True)
    records = run_policy(policy, vllm_engine, chat, _specs(), settings)
    reminder = chat.turn_ids("user", f"Reminder: {REMINDER} Continue.", None)
    for record in records:
        assert record.tokens.generated == 96
        generated_before = 0
        for seg in record.segments:
            if seg.kind == "generated":
                generated_before += seg.end - seg.start
            elif seg.source == "reminder":
                assert generated_before % 32 == 0 and 0 < generated_before < 96
                ids = record.continuation_ids[seg.start : seg.end]
                assert ids in (reminder, reminder[1:])  # EOS already closed the turn
        reminders = [s for s in record.segments if s.source == "reminder"]
        assert len(reminders) == 2
        # segments tile the continuation with no gap or overlap
        assert record.segments[0].start == 0
        assert all(
            a.end == b.start for a, b in zip(record.segments[:-1], record.segments[1:], strict=True)
        )
        assert record.segments[-1].end == len(record.continuation_ids)
        assert record.tokens.injected == len(record.continuation_ids) - 96


def test_restate_prefills_the_assistant_turn(vllm_engine):
    chat = ChatFormat(vllm_engine.tokenizer)
    records = run_policy(
        policy_run(RestatePolicy()),
        vllm_engine,
        chat,
        _specs(1),
        SamplingSettings(temperature=0, max_tokens=24),
    )
    record = records[0]
    restated = chat.encode(RESTATEMENT)
    assert record.segments[0].kind == "restatement"
    assert record.continuation_ids[: len(restated)] == restated
    assert record.segments[1].start == len(restated)
    assert record.tokens.restated == len(restated)


def test_adaptive_reminds_only_violating_samples(vllm_engine):
    chat = ChatFormat(vllm_engine.tokenizer)
    seen_windows = []

    def violates(state, window_text):
        seen_windows.append(window_text)
        return state.spec.meta["sample"] == 0  # only sample 0 "violates"

    policy = policy_run(AdaptivePolicy(every=16), continue_on_eos=True, violates=violates)
    records = run_policy(
        policy, vllm_engine, chat, _specs(2), SamplingSettings(temperature=0.7, max_tokens=48)
    )
    assert [len([s for s in r.segments if s.source == "reminder"]) for r in records] == [2, 0]
    assert len(seen_windows) == 4  # two boundaries (16, 32) x two samples
    assert all(window.strip() for window in seen_windows)


def test_same_seed_same_tokens(vllm_engine):
    chat = ChatFormat(vllm_engine.tokenizer)
    settings = SamplingSettings(temperature=0.8, max_tokens=40)
    policy = policy_run(PeriodicPolicy(every=20, placement="inline"))
    first = run_policy(policy, vllm_engine, chat, _specs(2, seed=5), settings)
    again = run_policy(policy, vllm_engine, chat, _specs(2, seed=5), settings)
    assert [r.continuation_ids for r in first] == [r.continuation_ids for r in again]
    assert first[0].continuation_ids != first[1].continuation_ids


def test_greedy_none_same_tokens_on_vllm_and_hf(vllm_engine, hf_engine):
    chat = ChatFormat(vllm_engine.tokenizer)
    settings = SamplingSettings(temperature=0, max_tokens=48)
    on_vllm = run_policy(policy_run(NonePolicy()), vllm_engine, chat, _specs(1), settings)[0]
    on_hf = run_policy(policy_run(NonePolicy()), hf_engine, chat, _specs(1), settings)[0]
    assert on_vllm.continuation_ids == on_hf.continuation_ids
    assert on_vllm.engine == "vllm" and on_hf.engine == "hf"


def test_max_tokens_beyond_context_is_a_clear_error(vllm_engine):
    chat = ChatFormat(vllm_engine.tokenizer)
    with pytest.raises(UserError, match="exceeds the context of 4096 tokens"):
        run_policy(
            policy_run(NonePolicy()),
            vllm_engine,
            chat,
            _specs(1),
            SamplingSettings(temperature=0, max_tokens=5000),
        )
