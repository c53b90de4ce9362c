"""Shared fixtures. Models are built once per machine (cached under HARNESS_CACHE or the user
cache dir) and loaded once per test session; tests treat them as read-only."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing may come from a hub at test time
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")


def _has_cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:
        return False


def pytest_collection_modifyitems(config, items):
    if _has_cuda():
        return
    skip_gpu = pytest.mark.skip(reason="no CUDA GPU on this machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


@pytest.fixture(scope="session", autouse=True)
def _vllm_engines_stop_before_capture_closes():
    """Stop the vLLM engines that tests leave running (cached engines, the probe fast path)
    while pytest still captures output: shut down after the session, their log lines would go
    to the closed capture stream as "Logging error" tracebacks after the summary."""
    yield
    from harness.engines.vllm_engine import shutdown_all

    shutdown_all()


@pytest.fixture(scope="session")
def tiny_model_path() -> Path:
    """tiny-random-llama: 4 layers, hidden 128, head_dim 64, the embedded model's tokenizer."""
    from harness.models import resolve_model

    return resolve_model("tiny-random-llama").path


@pytest.fixture(scope="session")
def embedded_model_path() -> Path:
    """smollm2-135m-instruct converted to float32 safetensors (built once, then cached)."""
    from harness.models import resolve_model

    return resolve_model("smollm2-135m-instruct").path


@pytest.fixture(scope="session")
def untrained_model_path() -> Path:
    from harness.models import resolve_model

    return resolve_model("untrained:smollm2-135m-instruct").path


@pytest.fixture(scope="session")
def hf_tiny_model(tiny_model_path):
    """(model, tokenizer) of tiny-random-llama in float32, eval mode, shared by the session."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(tiny_model_path, dtype=torch.float32).eval()
    return model, AutoTokenizer.from_pretrained(tiny_model_path)


@pytest.fixture(scope="session")
def hf_embedded_model(embedded_model_path):
    """(model, tokenizer) of the embedded model in float32, eval mode, shared by the session."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(embedded_model_path, dtype=torch.float32).eval()
    return model, AutoTokenizer.from_pretrained(embedded_model_path)


@pytest.fixture(scope="session")
def vllm_engine(embedded_model_path):
    """The one vLLM engine of the test session (embedded model, float32, prefix caching on).

    vLLM starts in ~40-60 s on CPU, so every test that needs it shares this one.
    """
    pytest.importorskip("vllm")
    from harness.engines import make_engine

    engine = make_engine("vllm", embedded_model_path, max_model_len=4096)
    yield engine
    engine.close()


@pytest.fixture(scope="session")
def vllm_probe(embedded_model_path):
    """The one probing engine of the test session (embedded model, every layer, 2048 tokens).

    A speculative-config engine is not the generation engine: started only by the tests that
    probe on vLLM, and every probe of the session that fits reuses it (`get_vllm_probe`).
    """
    pytest.importorskip("vllm")
    from harness.probes.vllm_backend import get_vllm_probe

    probe, _ = get_vllm_probe(embedded_model_path, None, max_model_len=2048)
    yield probe
    probe.close()


@pytest.fixture(scope="session")
def hf_engine(embedded_model_path):
    from harness.engines import make_engine

    return make_engine("hf", embedded_model_path)


@pytest.fixture
def run_cli(capsys):
    """Run `harness ARGV...` in-process through the real entry point (its UserError
    handling included); returns (exit code, stdout, stderr)."""
    import sys

    from harness.cli import main

    def run(argv: list[str]) -> tuple[int, str, str]:
        old = sys.argv
        sys.argv = ["harness", *argv]
        try:
            with pytest.raises(SystemExit) as exit_info:
                main()
        finally:
            sys.argv = old
        captured = capsys.readouterr()
        return exit_info.value.code, captured.out, captured.err

    return run
