"""What a plan reads of a model without building it: its config.json and its tokenizer.

A zoo model's folder (`harness.models.zoo`) holds float32 weights converted from the embedded
GGUF or drawn at random: building one costs tens of seconds and hundreds of MB of cache. A plan
(`harness run --dry-run`, the checks before a run or `harness score`) needs only the config (the
context, the depth, the architecture) and the tokenizer (the chat template, the token counts).
`model_files` gives a folder holding both: the model's own folder where it is built; else a
temporary folder, removed when the process exits, written from the GGUF's metadata with the
same loaders the conversion uses, so the config and tokenizer are the ones the built folder
will hold and every token count is the same. The model cache is never written.
"""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from pathlib import Path

from harness.models import build
from harness.models.zoo import (
    TINY_MODELS,
    ZOO_BUILT,
    ResolvedModel,
    locate_model,
    parse_model_name,
)


def model_files(model: ResolvedModel) -> Path:
    """A folder with `model`'s config.json and tokenizer files, building nothing: its own
    folder where that has a config (a built zoo model, a local or hub folder), else the
    zoo model's files written from the GGUF into a temporary folder (once per process)."""
    if (model.path / "config.json").is_file():
        return model.path
    if model.source not in ZOO_BUILT:
        return model.path  # hosted: no folder to read; a caller reads what it can
    return _unbuilt_files(model.name)


@functools.cache
def _unbuilt_files(name: str) -> Path:
    parsed = parse_model_name(name)
    if parsed.kind == "untrained":
        # a random init keeps its base's config and tokenizer (`build.random_init`)
        return model_files(locate_model(parsed.base or ""))
    folder = Path(tempfile.mkdtemp(prefix="harness-model-files-"))
    atexit.register(shutil.rmtree, folder, True)
    tokenizer, config = _embedded_tokenizer_and_config()
    if parsed.kind == "tiny":
        config = build.tiny_config(TINY_MODELS[parsed.name], tokenizer)
    _name_architecture(config)
    config.dtype = "float32"  # the zoo's weights: every builder writes float32
    config.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _embedded_tokenizer_and_config():
    """The embedded GGUF's tokenizer and config as `build.convert_gguf` loads them (its
    quantisation settings dropped, as there)."""
    from transformers import AutoConfig, AutoTokenizer

    gguf = build.embedded_gguf_path()
    with build.gguf_parsed_once():
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        config = AutoConfig.from_pretrained(gguf.parent, gguf_file=gguf.name)
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    return tokenizer, config


def _name_architecture(config) -> None:
    """`architectures` as saving the model would set it (vLLM's support check reads it)."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    if not config.architectures:
        config.architectures = [MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[config.model_type]]
