"""ShareRecorder on raw tensors (no model): the fused SDPA route and the formed-scores route
(soft-capped logits) both equal the explicit softmax mass, with GQA, left padding, a chunk
over a cache, a bias and a sliding window."""

from __future__ import annotations

import pytest
import torch

from harness.probes.attention import ShareRecorder

H, HKV, D = 6, 2, 64


class _Layer:
    layer_idx = 0


def _reference(q, k, prompt, pad, start, mask_add, cap=None, window=None):
    """(2, H, q) explicit prompt / sink shares of row 0."""
    groups = H // HKV
    kk = k[0].repeat_interleave(groups, dim=0)  # (H, kv, d)
    s = (q[0] @ kk.transpose(1, 2)).double() * D**-0.5  # (H, q, kv)
    if cap:
        s = torch.tanh(s / cap) * cap
    s = s + mask_add
    q_slot = torch.arange(start, start + q.shape[2]).view(-1, 1)
    k_slot = torch.arange(k.shape[2]).view(1, -1)
    visible = (k_slot <= q_slot) & (k_slot >= pad)
    if window:
        visible &= k_slot > q_slot - window
    p = torch.softmax(s.masked_fill(~visible, float("-inf")), dim=-1)
    return p[..., pad + 1 : pad + prompt].sum(-1), p[..., pad]


@pytest.mark.parametrize("cap", [None, 30.0])
@pytest.mark.parametrize("window", [None, 50])
def test_shares_equal_the_explicit_softmax(cap, window):
    g = torch.Generator().manual_seed(0)
    prompt, width, total, start = 12, 20, 100, 70  # row 0 padded by 8; a chunk from slot 70
    kv = width + total
    q = torch.randn(2, H, kv - start, D, generator=g)
    k = torch.randn(2, HKV, kv, D, generator=g)
    pad = width - prompt
    q_slot = torch.arange(start, kv).view(-1, 1)
    k_slot = torch.arange(kv).view(1, -1)
    allowed = (k_slot <= q_slot) & (k_slot >= pad)
    if window:
        allowed &= k_slot > q_slot - window
    mask = allowed.view(1, 1, *allowed.shape).expand(2, 1, -1, -1)
    recorder = ShareRecorder([1], prompt, width, total)
    kwargs = {"scaling": D**-0.5, "softcap": cap, "sliding_window": window}
    recorder.record(_Layer(), q, k, mask, kwargs)
    ref_prompt, ref_sink = _reference(q, k, prompt, pad, start, 0.0, cap, window)
    got = recorder.curves
    idx = slice(start - width, total)
    assert torch.allclose(
        torch.tensor(got["share_prompt_mean"][0, idx]), ref_prompt.mean(0), atol=1e-6
    )
    assert torch.allclose(
        torch.tensor(got["share_sink_max_head"][0, idx]), ref_sink.amax(0), atol=1e-6
    )
    assert torch.isnan(torch.tensor(got["share_sink_mean"][0, : start - width])).all()  # not run


def test_no_mask_is_causal_and_queries_in_the_prompt_are_skipped():
    g = torch.Generator().manual_seed(1)
    prompt, total = 10, 30
    q = torch.randn(2, H, prompt + total, D, generator=g)
    k = torch.randn(2, HKV, prompt + total, D, generator=g)
    for cap in (None, 50.0):
        recorder = ShareRecorder([1, 2], prompt, prompt, total)  # layer 2: decoder 1, not run
        recorder.record(_Layer(), q, k, None, {"scaling": D**-0.5, "softcap": cap})
        ref_prompt, ref_sink = _reference(q, k, prompt, 0, 0, 0.0, cap)
        got = torch.tensor(recorder.curves["share_prompt_mean"][0])
        assert torch.allclose(got, ref_prompt[:, prompt:].mean(0), atol=1e-6)
        assert torch.isnan(torch.tensor(recorder.curves["share_prompt_mean"][1])).all()
