"""The probe against plain transformers forwards: hook indexing, padding, chunking, next-token."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from harness.errors import UserError
from harness.probes.divergence import pair_divergence
from harness.probes.pairs import encode_text, generate_continuation

pytestmark = pytest.mark.integration


def _ids(seed: int, n: int) -> list[int]:
    return torch.randint(10, 5000, (n,), generator=torch.Generator().manual_seed(seed)).tolist()


def _reference(model, a, b, c):
    """Each sequence alone (no padding, no cache), with output_hidden_states."""
    with torch.no_grad():
        oa = model(torch.tensor([a + c]), output_hidden_states=True)
        ob = model(torch.tensor([b + c]), output_hidden_states=True)
    ha = torch.stack([h[0, len(a) :] for h in oa.hidden_states]).double()  # (L+1, T, d)
    hb = torch.stack([h[0, len(b) :] for h in ob.hidden_states]).double()
    la = torch.log_softmax(oa.logits[0, len(a) - 1 : -1].double(), -1)  # (T, V): predicts c_t
    lb = torch.log_softmax(ob.logits[0, len(b) - 1 : -1].double(), -1)
    return ha, hb, la, lb


def test_hook_states_match_output_hidden_states(hf_tiny_model):
    """Different prompt lengths (left padding), chunks that do not divide T."""
    model, _ = hf_tiny_model
    a, b, c = _ids(0, 7), _ids(1, 12), _ids(2, 45)
    res = pair_divergence(model, a, b, c, chunk=16)
    ha, hb, la, lb = _reference(model, a, b, c)
    assert res.layers == list(range(len(ha)))  # L + 1 = 5 hidden-state indices
    l2 = (ha - hb).norm(dim=-1).numpy()
    np.testing.assert_allclose(res.l2, l2, rtol=1e-4, atol=1e-5)
    rel = l2 / ((ha.norm(dim=-1) + hb.norm(dim=-1)) / 2).numpy()
    np.testing.assert_allclose(res.rel_l2[1:], rel[1:], rtol=1e-4, atol=1e-6)
    cos = 1 - torch.nn.functional.cosine_similarity(ha, hb, dim=-1).numpy()
    np.testing.assert_allclose(res.cos_dist, cos, atol=1e-5)
    assert np.all(res.l2[0] == 0)  # embeddings of the shared continuation
    idx = torch.arange(len(c))
    target = torch.tensor(c)
    delta = (la[idx, target] - lb[idx, target]).numpy()
    np.testing.assert_allclose(res.delta_logp, delta, atol=1e-4)
    kl = (la.exp() * (la - lb)).sum(-1).numpy()
    np.testing.assert_allclose(res.kl, kl, atol=1e-6)
    assert not res.identical_prompts


def test_chunk_size_does_not_change_results(hf_tiny_model):
    model, _ = hf_tiny_model
    for len_b in (9, 13):  # equal prompts (no mask, causal kernel) and left padding
        a, b, c = _ids(3, 9), _ids(4, len_b), _ids(5, 40)
        whole = pair_divergence(model, a, b, c)  # one forward, no KV cache
        small = pair_divergence(model, a, b, c, chunk=7, layers=[1, 4])
        np.testing.assert_allclose(small.l2, whole.l2[[1, 4]], rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(small.kl, whole.kl, rtol=1e-3, atol=1e-7)
        np.testing.assert_allclose(small.delta_logp, whole.delta_logp, atol=1e-5)
    # the attention bias reads query positions, so it must agree between the two paths too
    whole = pair_divergence(model, a, b, c, lam=1.0)
    small = pair_divergence(model, a, b, c, chunk=7, lam=1.0)
    np.testing.assert_allclose(small.l2, whole.l2, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(small.kl, whole.kl, rtol=1e-3, atol=1e-7)


def test_identical_prompts_give_zero_and_hooks_are_removed(hf_tiny_model):
    model, _ = hf_tiny_model
    a, c = _ids(6, 8), _ids(7, 20)

    def hook_count() -> int:  # transformers keeps hooks of its own: compare before and after
        return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())

    before = hook_count()
    res = pair_divergence(model, a, list(a), c)
    assert res.identical_prompts and np.all(res.l2 == 0) and np.all(res.delta_logp == 0)
    assert hook_count() == before
    with pytest.raises(UserError, match="token id 10000000, outside this model's vocabulary"):
        pair_divergence(model, a, a, [10**7] * 4)

    def fail(*_args):
        raise RuntimeError("boom inside the forward")

    trap = model.model.layers[1].register_forward_pre_hook(fail)
    try:  # a failure inside the forward must not leave the probe's hooks behind
        with pytest.raises(RuntimeError, match="boom"):
            pair_divergence(model, a, list(a), c)
    finally:
        trap.remove()
    assert hook_count() == before


def test_context_and_empty_prompt_are_user_errors(hf_tiny_model):
    model, _ = hf_tiny_model
    with pytest.raises(UserError, match="exceeds the model's context of 4096"):
        pair_divergence(model, [5] * 100, [6] * 10, [7] * 4000)
    with pytest.raises(UserError, match="empty prompt"):
        pair_divergence(model, [], [6], [7] * 20)
    with pytest.raises(UserError, match="out of range"):
        pair_divergence(model, [5], [6], [7] * 20, layers=[9])


def test_generated_continuation_has_requested_length(hf_tiny_model):
    model, tokenizer = hf_tiny_model
    prompt = encode_text(tokenizer, "Once upon a time")
    first = generate_continuation(model, prompt, 24, seed=3)
    assert len(first) == 24 and first == generate_continuation(model, prompt, 24, seed=3)
