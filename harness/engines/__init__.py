"""Text generation engines behind one protocol: `vllm` (default), `hf`, `openai`."""

from __future__ import annotations

from pathlib import Path

from harness.engines.base import Engine, GenerationRequest, GenerationResult, SamplingSettings

__all__ = ["Engine", "GenerationRequest", "GenerationResult", "SamplingSettings", "make_engine"]


def make_engine(kind: str, model_path: Path, **options) -> Engine:
    """Build (or reuse, for vLLM) an engine. Heavy libraries load only here."""
    if kind == "vllm":
        from harness.engines.vllm_engine import get_vllm_engine

        return get_vllm_engine(model_path, **options)
    if kind == "hf":
        from harness.engines.hf_engine import HfEngine

        return HfEngine(model_path, **options)
    if kind == "openai":
        from harness.engines.openai_engine import OpenAIEngine

        return OpenAIEngine(model_path, **options)
    from harness.errors import UserError

    raise UserError(f"unknown engine '{kind}' (expected vllm, hf or openai)")
