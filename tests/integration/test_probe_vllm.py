"""vLLM fast path vs the transformers probe on the embedded model: last layer and delta_logp.

Slow: starts two vLLM engines (pooling + generation, ~40 s each on CPU).
"""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]

MODEL = "smollm2-135m-instruct"


def test_vllm_last_layer_and_delta_logp_match_transformers(hf_embedded_model):
    pytest.importorskip("vllm")
    from harness.chat import ChatFormat
    from harness.probes.divergence import pair_divergence
    from harness.probes.pairs import encode_text
    from harness.probes.vllm_fastpath import vllm_pair_divergence

    model, tokenizer = hf_embedded_model
    user = "Tell me about the sea."
    chat = ChatFormat(tokenizer)
    a = chat.prompt_ids("Always answer in French.", user)
    b = chat.prompt_ids(None, user)
    cont = encode_text(tokenizer, "The sea is wide and deep, and its waves never rest. " * 12)[:96]
    hf = pair_divergence(model, a, b, cont, layers=[30])
    fast = vllm_pair_divergence(MODEL, a, b, cont)
    assert fast.layers == [30] and fast.l2.shape == (1, len(cont))
    np.testing.assert_allclose(fast.l2, hf.l2, rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(fast.rel_l2, hf.rel_l2, rtol=1e-3, atol=1e-5)
    np.testing.assert_allclose(fast.cos_dist, hf.cos_dist, rtol=1e-2, atol=1e-6)
    np.testing.assert_allclose(fast.delta_logp, hf.delta_logp, atol=1e-3)
    assert np.isnan(fast.kl).all()  # vLLM gives no full next-token distribution here
