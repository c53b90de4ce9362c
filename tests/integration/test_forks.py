"""Forks on the embedded model (the session's vLLM engine): both arms continue exactly the
record's prefix ids, and at fork_t = 0 the `without` arm is a baseline-prompt generation."""

from __future__ import annotations

import pytest

from harness.config.run import ForksConfig
from harness.engines.base import GenerationRequest, SamplingSettings
from harness.stages.forks import fork_requests, fork_seed, generate_arms
from harness.stages.probe import record_baseline_ids
from harness.text.records import GenerationRecord, Segment

pytestmark = pytest.mark.integration

SYSTEM = "Always answer in French."
USER = "Tell me a short story about a lighthouse keeper."
SAMPLING = SamplingSettings(temperature=0.7, top_p=0.95, max_tokens=48)


@pytest.fixture(scope="module")
def record(vllm_engine) -> GenerationRecord:
    from harness.text.chat import ChatFormat

    chat = ChatFormat(vllm_engine.tokenizer)
    prompt = chat.prompt_ids(SYSTEM, USER)
    request = GenerationRequest(
        prompt_ids=prompt, sampling=SAMPLING.model_copy(update={"seed": 7, "min_tokens": 48})
    )
    out = vllm_engine.generate([request])[0]
    return GenerationRecord(
        model="smollm2-135m-instruct",
        item="fr",
        policy="none",
        seed=7,
        prompt_messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": USER}],
        prompt_ids=prompt,
        continuation_ids=out.token_ids,
        segments=[Segment(kind="generated", start=0, end=len(out.token_ids))],
        text=out.text,
        finish_reason=out.finish_reason,
        engine="vllm",
    )


def test_arms_share_the_exact_prefix_ids(vllm_engine, record):
    base = record_baseline_ids(vllm_engine.tokenizer, record, "none")
    assert base != record.prompt_ids and len(base) < len(record.prompt_ids)
    forks = ForksConfig(at=[0, 16, 40], tokens=12, draws=2)
    requests = fork_requests(record, base, forks, SAMPLING)
    assert len(requests) == 3 * 2 * 2
    for ident, request in requests:
        prompt = record.prompt_ids if ident["arm"] == "with" else base
        t = ident["fork_t"]
        assert request.prompt_ids[: len(prompt)] == prompt
        assert request.prompt_ids[len(prompt) :] == record.continuation_ids[:t]
        assert request.sampling.seed == fork_seed(record.seed, t, ident["draw"])
        assert request.sampling.max_tokens == 12


def test_without_arm_at_zero_reproduces_a_baseline_generation(vllm_engine, record):
    base = record_baseline_ids(vllm_engine.tokenizer, record, "none")
    forks = ForksConfig(at=[0, 24], tokens=16, draws=2)
    arms = generate_arms(vllm_engine, [record], [base], forks, SAMPLING)
    assert len(arms) == 2 * 2 * 2
    for draw in range(2):
        seed = fork_seed(record.seed, 0, draw)
        alone = vllm_engine.generate(
            [
                GenerationRequest(
                    prompt_ids=base,
                    sampling=SAMPLING.model_copy(update={"max_tokens": 16, "seed": seed}),
                )
            ]
        )[0]
        (arm,) = [a for a in arms if (a.fork_t, a.arm, a.draw) == (0, "without", draw)]
        assert arm.token_ids == alone.token_ids
        assert arm.prompt_tokens == len(base)
    # the two draws differ (distinct seeds), and arms of one draw get the same seed
    zero = [a for a in arms if a.fork_t == 0 and a.arm == "without"]
    assert zero[0].token_ids != zero[1].token_ids
    later = [a for a in arms if a.fork_t == 24]
    assert {a.prompt_tokens for a in later} == {len(base) + 24, len(record.prompt_ids) + 24}
