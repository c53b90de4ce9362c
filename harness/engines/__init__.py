"""Text generation engines behind one protocol: `vllm` (default), `hf`, `openai`
(completions with token ids), `chat` (any chat-completions endpoint, or Anthropic's Messages
API for assistant prefill, by text), and any a plugin registers (`harness.engines.kinds`).

The engine modules import their heavy libraries (vllm, torch, transformers, httpx) inside the
functions that need them, so importing this package stays light: vLLM's own processes import
it too, through the top-p plugin (`vllm_plugin`)."""

from __future__ import annotations

from pathlib import Path

from harness.engines.base import Engine, GenerationRequest, GenerationResult, SamplingSettings
from harness.engines.kinds import (
    EngineKind,
    engine_can,
    engine_folder,
    engine_kind,
    kind_can,
    register_engine,
)
from harness.registry import ENGINES

__all__ = [
    "ENGINES",
    "Engine",
    "EngineKind",
    "GenerationRequest",
    "GenerationResult",
    "SamplingSettings",
    "engine_can",
    "engine_folder",
    "engine_kind",
    "kind_can",
    "make_engine",
    "register_engine",
]


def make_engine(kind: str, model_path: Path, **options) -> Engine:
    """Build (or reuse, for vLLM) an engine of a registered kind; its model loads here. Every
    engine the harness starts comes from here, so a test that stands a stand-in in for every
    kind (`harness.engines.scripted.every_engine`) runs the whole harness on it."""
    engine: Engine = ENGINES.lookup(kind).build(model_path, **options)
    return engine
