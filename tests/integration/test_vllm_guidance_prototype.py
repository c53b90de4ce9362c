"""bench/vllm_guidance.py's pairing logits processor on hand-made vLLM batch updates (no
engine): the cond row becomes log_softmax(u) + gamma (log_softmax(c) - log_softmax(u)), the
uncond row is forced to the guided argmax (the shared token), rows follow vLLM's moves and
swaps, and a pair with one row absent or at another position is left alone and counted."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.script_module import load_script

pytestmark = pytest.mark.integration  # imports vLLM

BENCH = Path(__file__).parents[2] / "bench" / "vllm_guidance.py"


@pytest.fixture(scope="module")
def proto():
    return load_script(BENCH, "bench_vllm_guidance", register=True)


def _added(index, pair, role, output, gamma=2.0):
    from vllm import SamplingParams

    extra = {"cfg_pair": pair, "cfg_role": role, "gamma": gamma}
    return (index, SamplingParams(extra_args=extra), None, output)


def _update(proto, size, added=(), moved=(), removed=()):
    return proto.BatchUpdate(batch_size=size, removed=removed, added=added, moved=moved)


def test_the_cond_row_is_guided_and_the_uncond_row_takes_its_token(proto):
    from vllm import SamplingParams

    processor = proto.GuidancePairs(None, torch.device("cpu"), False)
    plain = (2, SamplingParams(), None, [])
    # uncond first, then a plain request, then cond: pairing is by extra_args, not position
    processor.update_state(
        _update(proto, 3, [_added(0, "a", "uncond", []), plain, _added(1, "a", "cond", [])])
    )
    logits = torch.randn(3, 50, generator=torch.Generator().manual_seed(0))
    logits[[0, 1], 7] = -torch.inf  # EOS masked by vLLM's min_tokens before this processor
    before = logits.clone()
    out = processor.apply(logits)
    logp = torch.log_softmax(before, dim=-1)
    guided = logp[0] + 2.0 * (logp[1] - logp[0])
    guided[7] = -torch.inf  # masked stays masked (the formula alone gives NaN, drawn greedily)
    assert not out.isnan().any()
    torch.testing.assert_close(out[1], guided)
    assert int(out[0].argmax()) == int(guided.argmax())
    assert torch.isinf(out[0]).sum() == 49  # only the shared token can be drawn
    torch.testing.assert_close(out[2], before[2])  # the plain request untouched


def test_rows_follow_moves_and_an_incomplete_pair_is_left_alone(proto):
    processor = proto.GuidancePairs(None, torch.device("cpu"), False)
    cond_out, uncond_out = [5], [5]
    processor.update_state(
        _update(proto, 2, [_added(0, "a", "cond", cond_out), _added(1, "a", "uncond", uncond_out)])
    )
    swap = proto.MoveDirectionality.SWAP
    processor.update_state(_update(proto, 2, moved=[(0, 1, swap)]))  # now uncond 0, cond 1
    logits = torch.randn(2, 20, generator=torch.Generator().manual_seed(1))
    logp = torch.log_softmax(logits.clone(), dim=-1)
    out = processor.apply(logits)
    torch.testing.assert_close(out[1], logp[0] + 2.0 * (logp[1] - logp[0]))
    # the uncond row preempted (removed): the cond row is left as the model gave it, counted
    processor.update_state(_update(proto, 1, removed=[0]))
    before = proto.STATS["incomplete"]
    logits = torch.randn(2, 20)
    kept = logits.clone()
    out = processor.apply(logits)
    torch.testing.assert_close(out, kept)
    assert proto.STATS["incomplete"] == before + 1
    # back, but one token behind: not the same position, left alone too
    processor.update_state(_update(proto, 2, [_added(0, "a", "uncond", [])]))
    out = processor.apply(kept.clone())
    torch.testing.assert_close(out, kept)
    assert proto.STATS["incomplete"] == before + 2
