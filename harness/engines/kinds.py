"""What an engine kind is to the rest of the harness: a name a config's `generation.engine`
gives, what builds the engine, the `make_engine` options it takes from a generation config, and
the capabilities it has (`harness.capabilities`). An engine module registers its kind with
`@register_engine(...)` on what builds it; a package installed beside the harness registers one
through a `harness.engines` entry point (docs/architecture.md, "Adding an engine")."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from harness.capabilities import Capabilities, Capability
from harness.config.run import GenerationConfig
from harness.engines.base import Engine
from harness.models import ResolvedModel, built
from harness.registry import ENGINES

# (generation config, the config's name of the model, the run's request cache folder) -> the
# keyword options `build` takes besides the model folder
Options = Callable[[GenerationConfig, str | None, Path | None], dict[str, Any]]


def context_options(gen: GenerationConfig, model: str | None, cache_dir: Path | None) -> dict:
    """The options every engine takes: its context length (None: the model's)."""
    return {"max_model_len": gen.max_model_len}


def built_folder(model: ResolvedModel) -> Path:
    """The folder an engine loads `model`'s weights from, built on first use (a plan only
    locates it: `harness.models.locate_model`)."""
    return built(model).path


@dataclass(frozen=True)
class EngineKind:
    name: str
    build: Callable[..., Engine]  # (model folder, **options) -> the engine; its model loads
    options: Options = context_options
    # what it can do whatever its settings, and what it can do under a generation config's
    # settings (a chat endpoint's protocol), when that depends on them
    capabilities: Capabilities = frozenset()
    capabilities_under: Callable[[GenerationConfig], Capabilities] | None = None
    # the settings under which it has a capability it lacks by default (for refusals' "use")
    hints: Mapping[Capability, str] = field(default_factory=dict)
    # checks a run makes before it writes anything, with the options of a generation config
    # and a model folder (an endpoint is reachable and serves the model); None: none
    preflight: Callable[[GenerationConfig, Path], None] | None = None
    # the folder `build` is given for a zoo model: its weights, built where missing (a
    # stand-in engine, `harness.engines.scripted`, loads none, so nothing is built for it)
    folder: Callable[[ResolvedModel], Path] = built_folder

    def can(self, gen: GenerationConfig) -> Capabilities:
        """The capabilities of this engine kind under `gen`'s settings."""
        extra = self.capabilities_under(gen) if self.capabilities_under else frozenset()
        return self.capabilities | extra


Build = TypeVar("Build", bound=Callable[..., Any])


def register_engine(
    name: str,
    capabilities: Capabilities | set[Capability],
    options: Options = context_options,
    capabilities_under: Callable[[GenerationConfig], Capabilities] | None = None,
    hints: Mapping[Capability, str] | None = None,
    preflight: Callable[[GenerationConfig, Path], None] | None = None,
) -> Callable[[Build], Build]:
    """Decorator on what builds an engine (its class, or a function): configs may name it as
    `generation.engine: <name>`."""

    def decorate(build: Build) -> Build:
        kind = EngineKind(
            name,
            build,
            options,
            frozenset(capabilities),
            capabilities_under,
            hints or {},
            preflight,
        )
        ENGINES.add(name, kind)
        return build

    return decorate


def engine_folder(kind: str, model: ResolvedModel) -> Path:
    """The folder an engine of `kind` is built on for `model` (`EngineKind.folder`)."""
    found: EngineKind = ENGINES.lookup(kind)
    return found.folder(model)


def engine_kind(gen: GenerationConfig) -> EngineKind:
    """The registered kind `gen.engine` names."""
    kind: EngineKind = ENGINES.lookup(gen.engine)
    return kind


def engine_can(gen: GenerationConfig, capability: Capability) -> bool:
    """Whether the engine of `gen` has `capability` under `gen`'s settings."""
    return capability in engine_kind(gen).can(gen)


def preflight(gen: GenerationConfig, model_path: Path) -> None:
    """The checks the engine of `gen` makes before a run writes anything (UserError)."""
    kind = engine_kind(gen)
    if kind.preflight is not None:
        kind.preflight(gen, model_path)


def kind_can(name: str, capability: Capability) -> bool:
    """Whether the engine kind `name` has `capability` whatever its settings."""
    kind: EngineKind = ENGINES.lookup(name)
    return capability in kind.capabilities
