"""The attention_bias generation policy: lam = 0 is the plain model; lam > 0 changes the
continuation; only the transformers engine can run it."""

from __future__ import annotations

import pytest

from harness.engines import SamplingSettings
from harness.errors import UserError
from harness.policies import (
    AttentionBiasPolicy,
    ChatFormat,
    NonePolicy,
    SampleSpec,
    policy_run,
    run_policy,
)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def tiny_hf_engine(tiny_model_path):
    from harness.engines import make_engine

    return make_engine("hf", tiny_model_path)


def _specs():
    return [
        SampleSpec(system="Always answer in French.", user="Tell me a story.", seed=3),
        SampleSpec(system="Be a pirate.", user="Describe your ship in detail, please.", seed=4),
    ]


def test_lam_zero_equals_plain_and_lam_one_differs(tiny_hf_engine):
    chat = ChatFormat(tiny_hf_engine.tokenizer)
    greedy = SamplingSettings(temperature=0, max_tokens=24)
    plain = run_policy(policy_run(NonePolicy()), tiny_hf_engine, chat, _specs(), greedy)
    zero = run_policy(
        policy_run(AttentionBiasPolicy(lam=0.0)), tiny_hf_engine, chat, _specs(), greedy
    )
    strong = run_policy(
        policy_run(AttentionBiasPolicy(lam=4.0)), tiny_hf_engine, chat, _specs(), greedy
    )
    assert [r.continuation_ids for r in zero] == [r.continuation_ids for r in plain]
    assert [r.continuation_ids for r in strong] != [r.continuation_ids for r in plain]
    assert strong[0].policy == "attention_bias-4"


def test_system_prefix_is_the_system_turn(tiny_hf_engine):
    chat = ChatFormat(tiny_hf_engine.tokenizer)
    prompt = chat.prompt_ids("Always answer in French.", "Tell me a story.")
    n = chat.system_prefix_len("Always answer in French.", "Tell me a story.")
    head = chat.tokenizer.decode(prompt[:n])
    assert head == "<|im_start|>system\nAlways answer in French.<|im_end|>\n"


def test_biased_and_plain_groups_share_one_run(tiny_hf_engine):
    """A run with `none` and `attention_bias` side by side: the bias applies to its own
    samples only."""
    from harness.policies import run_policies

    chat = ChatFormat(tiny_hf_engine.tokenizer)
    greedy = SamplingSettings(temperature=0, max_tokens=16)
    plain, biased = run_policies(
        [(policy_run(NonePolicy()), _specs()),
         (policy_run(AttentionBiasPolicy(lam=4.0)), _specs())],
        tiny_hf_engine, chat, greedy,
    )  # fmt: skip
    alone_plain = run_policy(policy_run(NonePolicy()), tiny_hf_engine, chat, _specs(), greedy)
    alone_biased = run_policy(
        policy_run(AttentionBiasPolicy(lam=4.0)), tiny_hf_engine, chat, _specs(), greedy
    )
    assert [r.continuation_ids for r in plain] == [r.continuation_ids for r in alone_plain]
    assert [r.continuation_ids for r in biased] == [r.continuation_ids for r in alone_biased]
    assert [r.continuation_ids for r in biased] != [r.continuation_ids for r in plain]


@pytest.mark.parametrize(
    ("steering", "what"),
    [
        ({"kind": "bias", "lam": 1.0, "prefix_len": 1}, "attention bias"),
        ({"kind": "split_softmax", "k": 0.5, "prefix_len": 1}, "split-softmax"),
        ({"kind": "spotlight", "target": 0.1, "prefix_len": 1}, "SpotLight"),
        ({"kind": "guidance", "gamma": 2, "uncond_prompt_ids": [1], "prompt_len": 1}, "guidance"),
    ],
)
def test_vllm_refuses_a_steered_request(steering, what):
    from harness.engines.base import GenerationRequest, refuse_prompt_bias

    request = GenerationRequest(
        prompt_ids=[1, 2], sampling=SamplingSettings(max_tokens=1), steering=steering
    )
    with pytest.raises(UserError, match=f"{what}.* needs generation.engine: hf"):
        refuse_prompt_bias("vllm", [request])
