"""Text generation engines behind one protocol: `vllm` (default), `hf`, `openai`
(completions with token ids), `chat` (any chat-completions endpoint, or Anthropic's Messages
API for assistant prefill, by text).

The engine modules import their heavy libraries (vllm, torch, transformers, httpx) inside the
functions that need them, so importing this package stays light: vLLM's own processes import
it too, through the top-p plugin (`vllm_plugin`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from harness.engines.base import Engine, GenerationRequest, GenerationResult, SamplingSettings
from harness.engines.chat_engine import ChatEngine
from harness.engines.hf_engine import HfEngine
from harness.engines.openai_engine import OpenAIEngine
from harness.engines.vllm_engine import get_vllm_engine
from harness.errors import UserError

__all__ = [
    "ENGINES",
    "Engine",
    "GenerationRequest",
    "GenerationResult",
    "SamplingSettings",
    "make_engine",
]

# The engine kinds a config can name -> what builds one from (model folder, **options). Every
# engine the harness starts comes from here, so a test that puts a stand-in in this table
# (tests/scripted_run.py: `every_engine`) runs the whole harness on it.
ENGINES: dict[str, Callable[..., Engine]] = {
    "vllm": get_vllm_engine,
    "hf": HfEngine,
    "openai": OpenAIEngine,
    "chat": ChatEngine,
}


def make_engine(kind: str, model_path: Path, **options) -> Engine:
    """Build (or reuse, for vLLM) an engine; its model loads here."""
    build = ENGINES.get(kind)
    if build is None:
        raise UserError(f"unknown engine '{kind}' (expected vllm, hf, openai or chat)")
    return build(model_path, **options)
