"""The `make_engine` options of a generation config: the run's engines, the engine pool's and
the judges' (a judge without its own engine runs on the run's, with all its options); and the
model a config's name stands for (a hosted chat model has no folder)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from harness.capabilities import Capability
from harness.config.endpoint import server_url
from harness.config.run import GenerationConfig
from harness.engines.kinds import engine_can, engine_kind
from harness.engines.pricing import Budget
from harness.models import ResolvedModel, locate_model


def engine_options(
    gen: GenerationConfig, model: str | None = None, cache_dir: Path | None = None
) -> dict:
    """`make_engine(gen.engine, path, **engine_options(gen, name))` for this generation config
    (`model`: the config's name of the model, which a chat endpoint is asked for; `cache_dir`:
    where a chat engine keeps the answers it was paid for, the run's request cache): what the
    engine's kind takes (`EngineKind.options`)."""
    return engine_kind(gen).options(gen, model, cache_dir)


def model_of(name: str, gen: GenerationConfig) -> ResolvedModel:
    """The model `name` stands for: the zoo's on an engine that loads local weights, located
    and not built (a plan builds no model: `harness.models.built` builds it where its weights
    are needed); else a hosted model, known by its endpoint and name (no folder, nothing to
    load)."""
    if engine_can(gen, Capability.LOCAL_WEIGHTS):
        return locate_model(name)
    served = gen.served_model or name
    identity = f"{gen.engine}\n{server_url(gen.base_url, gen.protocol) or ''}\n{served}"
    key = hashlib.sha256(identity.encode()).hexdigest()[:16]
    return ResolvedModel(name=name, source="hosted", path=Path("."), content_key=key)


def run_budget(config, model: str):
    """The spending guard for `model` under `config.budget` on an engine whose requests are
    billed (None elsewhere)."""
    if not engine_can(config.generation, Capability.METERED):
        return None
    return Budget(config.budget, (config.pricing or {}).get(model))
