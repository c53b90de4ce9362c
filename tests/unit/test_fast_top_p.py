"""Top-p from the top candidates (the vLLM plugin) keeps exactly the tokens a whole-vocabulary
sort keeps, including rows whose candidates hold too little mass (handed to the fallback)."""

from __future__ import annotations

import pytest
import torch

from harness.engines.vllm_plugin import top_p_from_candidates


def sorted_top_p(logits: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
    """Reference: sort each row, keep a token while the mass ranked above it is below p."""
    out = torch.full_like(logits, float("-inf"))
    for row in range(logits.shape[0]):
        values, order = logits[row].double().sort(descending=True)
        probs = values.softmax(-1)
        above = probs.cumsum(-1) - probs
        keep = order[above < p[row].item()]
        out[row, keep] = logits[row, keep]
    return out


@pytest.mark.parametrize("scale", [0.5, 3.0, 8.0])  # flat rows (fallback) to peaked ones
def test_mask_matches_the_whole_vocabulary_sort(scale):
    generator = torch.Generator().manual_seed(int(scale * 10))
    logits = torch.randn(12, 5000, generator=generator) * scale
    p = torch.tensor([0.95, 0.5, 0.9, 0.99] * 3)
    fallback_rows = []

    def fallback(rows, p_rows):
        fallback_rows.append(rows.shape[0])
        return sorted_top_p(rows, p_rows)

    got = top_p_from_candidates(logits.clone(), p, fallback, candidates=64)
    want = sorted_top_p(logits, p)
    assert torch.equal(torch.isinf(got), torch.isinf(want))
    assert torch.equal(got[~torch.isinf(got)], want[~torch.isinf(want)])
    if scale == 0.5:  # 64 of 5000 nearly uniform tokens hold ~2 % of the mass
        assert fallback_rows == [12]
    if scale == 8.0:
        assert fallback_rows == []


def test_the_top_token_is_always_kept():
    logits = torch.tensor([[5.0, 1.0, 0.0, -1.0]])
    out = top_p_from_candidates(logits.clone(), torch.tensor([1e-6]), sorted_top_p, candidates=2)
    assert out[0, 0] == 5.0 and torch.isinf(out[0, 1:]).all()
