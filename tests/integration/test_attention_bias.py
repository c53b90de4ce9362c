"""Attention bias: lam = 0 is the plain model; on a uniform-attention toy the prompt's share
follows the closed form; generate() with a KV cache sees the same bias as a full forward."""

from __future__ import annotations

import math

import pytest
import torch

from harness.engines.attention_bias import ATTENTION_NAME, attention_bias

pytestmark = pytest.mark.integration


def _left_padded(seed: int, lens: tuple[int, int], width: int):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(10, 5000, (2, width), generator=g)
    mask = torch.ones(2, width, dtype=torch.long)
    for row, n in enumerate(lens):
        mask[row, : width - n] = 0
    positions = (mask.cumsum(-1) - 1).clamp_min(0)
    return ids, mask, positions


@pytest.mark.parametrize("fixture", ["hf_tiny_model", "hf_embedded_model"])
def test_lam_zero_reproduces_plain_model(fixture, request):
    model, _ = request.getfixturevalue(fixture)
    ids, mask, positions = _left_padded(0, (40, 33), 40)
    with torch.no_grad():
        plain = model(ids, attention_mask=mask, position_ids=positions).logits
        with attention_bias(model, prompt_len=[12, 5], lam=0.0):
            assert model.config._attn_implementation == ATTENTION_NAME
            biased = model(ids, attention_mask=mask, position_ids=positions).logits
    assert model.config._attn_implementation != ATTENTION_NAME  # restored
    assert (plain[0] - biased[0]).abs().max() <= 1e-5
    assert (plain[1, 7:] - biased[1, 7:]).abs().max() <= 1e-5  # real tokens of the padded row


def test_bias_changes_only_continuation_queries_and_chosen_layers(hf_tiny_model):
    model, _ = hf_tiny_model
    ids = torch.randint(10, 5000, (1, 30), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        plain = model(ids).logits
        with attention_bias(model, prompt_len=10, lam=1.0):
            full = model(ids).logits
        with attention_bias(model, prompt_len=10, lam=1.0, layers=[3]):
            last = model(ids).logits
    gap = (plain - full).abs().amax(-1)[0]  # (30,)
    assert gap[:10].max() == 0  # queries inside the prompt are untouched (t <= 0)
    assert gap[10:].min() > 1e-4
    assert 0 < (plain - last).abs().max() < (plain - full).abs().max()
    with (
        pytest.raises(ValueError, match="out of range"),
        attention_bias(model, prompt_len=10, lam=1.0, layers=[4]),
    ):
        pass


def _uniform_toy(d: int = 64):
    """One layer, one head, zero q/k weights: every visible key gets the same logit. Token 0
    embeds to e_0, token 1 to e_1; v and o are identities, so output dim 0 after attention is
    sqrt(d) * (attention share of token-0 keys)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=2, hidden_size=d, intermediate_size=4, num_hidden_layers=1,
        num_attention_heads=1, num_key_value_heads=1, head_dim=d, max_position_embeddings=4096,
        tie_word_embeddings=False, rms_norm_eps=1e-12, bos_token_id=None, eos_token_id=None,
        pad_token_id=None,
    )  # fmt: skip
    model = LlamaForCausalLM(config).eval()
    attn = model.model.layers[0].self_attn
    with torch.no_grad():
        attn.q_proj.weight.zero_()
        attn.k_proj.weight.zero_()
        attn.v_proj.weight.copy_(torch.eye(d))
        attn.o_proj.weight.copy_(torch.eye(d))
        model.model.embed_tokens.weight.zero_()
        model.model.embed_tokens.weight[0, 0] = 1.0
        model.model.embed_tokens.weight[1, 1] = 1.0
    return model, attn


def _prompt_share(model, attn, prompt_len: int, total: int, lam: float | None) -> torch.Tensor:
    captured = {}
    handle = attn.register_forward_hook(lambda _m, _a, out: captured.update(out=out[0]))
    ids = torch.tensor([[0] * prompt_len + [1] * total])
    try:
        with torch.no_grad():
            if lam is None:
                model(ids)
            else:
                with attention_bias(model, prompt_len=prompt_len, lam=lam):
                    model(ids)
    finally:
        handle.remove()
    d = model.config.hidden_size
    return captured["out"][0, prompt_len:, 0] / math.sqrt(d)  # (T,): share at t = 1..T


def test_uniform_toy_prompt_share():
    """Plain: the prompt's share P/(P+t) decays to 0. lam = 1 multiplies each prompt key by
    (P+t)/P, so the prompt's total weight equals the unbiased key count P+t and the share is
    (P+t)/(P+2t): it no longer decays with t but settles at the constant 1/2."""
    model, attn = _uniform_toy()
    p, total = 8, 2000
    t = torch.arange(1, total + 1, dtype=torch.float64)
    plain = _prompt_share(model, attn, p, total, None).double()
    torch.testing.assert_close(plain, p / (p + t), atol=1e-5, rtol=0)
    zero = _prompt_share(model, attn, p, total, 0.0).double()
    torch.testing.assert_close(zero, plain, atol=1e-6, rtol=0)
    one = _prompt_share(model, attn, p, total, 1.0).double()
    torch.testing.assert_close(one, (p + t) / (p + 2 * t), atol=1e-5, rtol=0)
    assert one.min() >= 0.5 - 1e-6  # the decay stops: never below 1/2
    assert one[total // 2 :].max() - one[total // 2 :].min() < 2e-3  # flat over the second half
    assert plain[-1] < 0.01 and one[-1] == pytest.approx(0.5, abs=2e-3)


def test_generate_with_cache_matches_full_forward(hf_tiny_model):
    """Queries arrive one at a time in generate(); t must come from their absolute position."""
    model, _ = hf_tiny_model
    ids, mask, positions = _left_padded(2, (16, 11), 16)
    with torch.no_grad(), attention_bias(model, prompt_len=[16, 11], lam=1.0):
        out = model.generate(
            ids, attention_mask=mask, max_new_tokens=12, do_sample=False,
            output_logits=True, return_dict_in_generate=True,
        )  # fmt: skip
        seq = out.sequences  # (2, 28)
        full_mask = torch.cat([mask, torch.ones(2, 12, dtype=torch.long)], dim=1)
        full_pos = (full_mask.cumsum(-1) - 1).clamp_min(0)
        full = model(seq, attention_mask=full_mask, position_ids=full_pos).logits
    stepwise = torch.stack(out.logits, dim=1)  # (2, 12, V): logits that chose tokens 16..27
    torch.testing.assert_close(stepwise, full[:, 15:27], atol=1e-4, rtol=1e-4)
    with torch.no_grad():
        plain = model(seq, attention_mask=full_mask, position_ids=full_pos).logits
    assert (plain[:, 15:27] - full[:, 15:27]).abs().max() > 1e-3  # the bias did act
