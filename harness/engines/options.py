"""The `make_engine` options of a generation config: the run's engines, the engine pool's and
the judges' (a judge without its own engine runs on the run's, with all its options); and the
model a config's name stands for (a hosted chat model has no folder)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from harness.config.endpoint import endpoint_of, server_url
from harness.config.run import ChatOptions, GenerationConfig
from harness.engines.pricing import Budget
from harness.models import ResolvedModel, resolve_model


def engine_options(
    gen: GenerationConfig, model: str | None = None, cache_dir: Path | None = None
) -> dict:
    """`make_engine(gen.engine, path, **engine_options(gen, name))` for this generation config
    (`model`: the config's name of the model, which a chat endpoint is asked for; `cache_dir`:
    where a chat engine keeps the answers it was paid for, the run's request cache)."""
    if gen.engine == "vllm":
        return {
            "max_model_len": gen.max_model_len,
            "tensor_parallel_size": gen.tensor_parallel_size,
            "pipeline_parallel_size": gen.pipeline_parallel_size,
        }
    if gen.engine == "openai":
        return {**endpoint_of(gen).options(), "max_model_len": gen.max_model_len}
    if gen.engine == "chat":
        return {
            "model": gen.served_model or model,
            "base_url": gen.base_url,
            "api_key_env": gen.api_key_env,
            "max_model_len": gen.max_model_len,
            "cache_dir": cache_dir,
            **(gen.chat or ChatOptions()).model_dump(),
        }
    return {"max_model_len": gen.max_model_len, "dtype": gen.dtype}


def model_of(name: str, gen: GenerationConfig) -> ResolvedModel:
    """The model `name` stands for: on the chat engine a hosted model, known by its endpoint
    and name (no folder, nothing to load); else the zoo's (`resolve_model`)."""
    if gen.engine != "chat":
        return resolve_model(name)
    served = gen.served_model or name
    identity = f"chat\n{server_url(gen.base_url, gen.protocol) or ''}\n{served}"
    key = hashlib.sha256(identity.encode()).hexdigest()[:16]
    return ResolvedModel(name=name, source="hosted", path=Path("."), content_key=key)


def run_budget(config, model: str):
    """The chat engine's spending guard for `model` under `config.budget` (None elsewhere)."""
    if config.generation.engine != "chat":
        return None
    return Budget(config.budget, (config.pricing or {}).get(model))
