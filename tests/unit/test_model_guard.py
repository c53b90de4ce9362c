"""The unit tier starts no model: while a test without `integration` or `e2e` runs,
tests/conftest.py's guard refuses vLLM, transformers models and model builds (tests/README.md).
These tests are that tier: each tries one and expects the refusal."""

from __future__ import annotations

import pytest

REFUSED = "without the `integration` or `e2e` marker"


def test_vllm_cannot_start():
    with pytest.raises(Exception, match=REFUSED) as refusal:
        import vllm  # a session that already loaded vLLM gets the refusal at LLM() instead

        vllm.LLM(model="any")
    assert not isinstance(refusal.value, ImportError)  # not "vLLM is not installed"


def test_a_transformers_model_cannot_be_instantiated():
    from transformers import LlamaConfig, LlamaForCausalLM

    tiny = LlamaConfig(
        hidden_size=64, intermediate_size=64, num_attention_heads=1, num_hidden_layers=1,
        vocab_size=32,
    )  # fmt: skip
    with pytest.raises(Exception, match=f"loads a model {REFUSED}"):
        LlamaForCausalLM(tiny)


@pytest.mark.parametrize("builder", ["convert_gguf", "tiny_random", "random_init"])
def test_no_model_folder_is_built(builder, tmp_path):
    from harness.models import build

    with pytest.raises(Exception, match=f"builds a model folder \\({builder}\\) {REFUSED}"):
        getattr(build, builder)(tmp_path, tmp_path)
