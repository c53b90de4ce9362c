"""The prompt's attention share measured in the probe's forward equals the eager attention
weights (`output_attentions=True`) on a 1024-token pair of the tiny and the embedded model; it
follows the attention bias; and the model is left as it was."""

from __future__ import annotations

import pytest
import torch

from harness.engines.attention_bias import prompt_bias
from harness.probes.attention import SHARE_NAME
from harness.probes.divergence import pair_divergence

pytestmark = pytest.mark.integration

TOTAL = 1024  # prompt A + continuation


def _pair(seed: int = 0, len_a: int = 40, len_b: int = 25, total: int = TOTAL):
    g = torch.Generator().manual_seed(seed)
    a = torch.randint(10, 5000, (len_a,), generator=g).tolist()
    b = torch.randint(10, 5000, (len_b,), generator=g).tolist()
    c = torch.randint(10, 5000, (total - len_a,), generator=g).tolist()
    return a, b, c


def _eager_shares(model, ids: list[int], prompt_len: int, mask=None) -> dict[str, torch.Tensor]:
    """The four share curves (layers, T) from eager `output_attentions=True` weights of row A
    alone (row A of the pair is unpadded: A is the longer prompt)."""
    previous = model.config._attn_implementation
    model.set_attn_implementation("eager")
    try:
        with torch.no_grad():
            out = model(torch.tensor([ids]), attention_mask=mask, output_attentions=True)
    finally:
        model.set_attn_implementation(previous)
    curves: dict[str, list] = {k: [] for k in ("prompt", "sink")}
    for weights in out.attentions:  # (1, H, S, S) per decoder layer
        w = weights[0, :, prompt_len:, :].double()  # queries t = 1..T
        curves["prompt"].append(w[..., 1:prompt_len].sum(-1))  # (H, T)
        curves["sink"].append(w[..., 0])
    return {
        f"share_{name}_{red}": torch.stack([fn(x) for x in curves[name]])
        for name in curves
        for red, fn in (("mean", lambda x: x.mean(0)), ("max_head", lambda x: x.amax(0)))
    }


def _max_gap(measured: dict, reference: dict) -> float:
    return max(float((torch.as_tensor(measured[k]) - reference[k]).abs().max()) for k in reference)


@pytest.mark.parametrize("fixture", ["hf_tiny_model", "hf_embedded_model"])
def test_share_matches_eager_attention_weights(fixture, request):
    model, _ = request.getfixturevalue(fixture)
    a, b, c = _pair()
    implementation = model.config._attn_implementation
    res = pair_divergence(model, a, b, c)
    depth = model.config.num_hidden_layers
    assert res.attention["attn_layers"].tolist() == list(range(1, depth + 1))
    reference = _eager_shares(model, a + c, len(a))
    assert _max_gap(res.attention, reference) <= 1e-5
    # the model is left as it was: implementation restored, no recorder attached
    assert model.config._attn_implementation == implementation != SHARE_NAME
    assert not any(hasattr(m, "_harness_share_recorder") for m in model.modules())
    # a trained model's sink holds far more than its share of the keys
    if fixture == "hf_embedded_model":
        assert res.attention["share_sink_mean"][1:, -1].mean() > 10 / TOTAL


def test_share_with_chunks_padding_and_chosen_layers(hf_tiny_model):
    """Chunks over a KV cache, row A padded (the shorter prompt) and a layer subset give the
    same shares as eager attention of row A alone."""
    model, _ = hf_tiny_model
    a, b, c = _pair(seed=1, len_a=20, len_b=33, total=400)
    res = pair_divergence(model, a, b, c, layers=[0, 2, 4], chunk=300)
    assert res.attention["attn_layers"].tolist() == [2, 4]  # index 0 has no attention
    reference = {k: v[[1, 3]] for k, v in _eager_shares(model, a + c, len(a)).items()}
    assert _max_gap(res.attention, reference) <= 1e-5


def test_share_under_attention_bias_matches_eager_with_the_bias(hf_tiny_model):
    """lam = 1: the shares equal eager weights whose mask carries the same bias, and the
    prompt's share decays less than without the bias."""
    model, _ = hf_tiny_model
    a, b, c = _pair(seed=2, total=400)
    biased = pair_divergence(model, a, b, c, lam=1.0)
    plain = pair_divergence(model, a, b, c)
    seq = len(a) + len(c)
    positions = torch.arange(seq).view(1, -1)
    bias = prompt_bias(positions, seq, torch.tensor([len(a)]), 1.0)  # (1, S, S)
    causal = torch.ones(seq, seq, dtype=torch.bool).tril()
    mask = torch.where(causal, bias, torch.finfo(torch.float32).min).unsqueeze(1)  # (1,1,S,S)
    reference = _eager_shares(model, a + c, len(a), mask=mask)
    assert _max_gap(biased.attention, reference) <= 1e-5
    end = slice(-64, None)
    held = biased.attention["share_prompt_mean"][:, end].mean()
    assert held > 1.5 * plain.attention["share_prompt_mean"][:, end].mean()
