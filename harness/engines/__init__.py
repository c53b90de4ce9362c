"""Text generation engines behind one protocol: `vllm` (default), `hf`, `openai`.

The engine modules import their heavy libraries (vllm, torch, transformers, httpx) inside the
functions that need them, so importing this package stays light: vLLM's own processes import
it too, through the top-p plugin (`vllm_plugin`)."""

from __future__ import annotations

from pathlib import Path

from harness.engines.base import Engine, GenerationRequest, GenerationResult, SamplingSettings
from harness.engines.hf_engine import HfEngine
from harness.engines.openai_engine import OpenAIEngine
from harness.engines.vllm_engine import get_vllm_engine
from harness.errors import UserError

__all__ = ["Engine", "GenerationRequest", "GenerationResult", "SamplingSettings", "make_engine"]


def make_engine(kind: str, model_path: Path, **options) -> Engine:
    """Build (or reuse, for vLLM) an engine; its model loads here."""
    if kind == "vllm":
        return get_vllm_engine(model_path, **options)
    if kind == "hf":
        return HfEngine(model_path, **options)
    if kind == "openai":
        return OpenAIEngine(model_path, **options)
    raise UserError(f"unknown engine '{kind}' (expected vllm, hf or openai)")
