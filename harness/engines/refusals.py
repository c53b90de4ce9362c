"""The one place that refuses a run whose parts need what its engine cannot do.

Every part of a run config that needs an engine capability (`harness.capabilities`) says so:
a policy by its spec (`PolicySpecBase.needs`), and the run's forks, probe and theory below.
The engine kind declares what it can do under the config's settings (`EngineKind.can`). Before
anything is loaded or sent, the planner refuses the first need the engine lacks, in one line
naming the engine (or endpoint), the capability, the part that needs it, and what to use
instead: the engines (or settings) that have it. Nothing is approximated.
"""

from __future__ import annotations

from urllib.parse import urlparse

from harness.capabilities import Capability
from harness.config.endpoint import server_url
from harness.config.run import RunConfig
from harness.engines.kinds import EngineKind, engine_kind
from harness.errors import UserError
from harness.registry import ENGINES

# what a run can change instead of its engine, per capability a part of it needs
_INSTEAD = {
    Capability.PREFILL: "a reminder policy at placement user or system",
    Capability.LATER_SYSTEM_MESSAGES: "placement user (between turns) or inline (within a reply)",
}


def provider(base_url: str | None, protocol: str = "openai") -> str:
    """The endpoint as a line names it: its host (and port)."""
    url = server_url(base_url, protocol) or ""
    return urlparse(url).netloc or url or "the chat endpoint"


def run_needs(config: RunConfig) -> list[tuple[Capability, str, str]]:
    """(capability, the part of `config` that needs it, what else the part could use) for
    every capability the config's parts need, in config order."""
    out: list[tuple[Capability, str, str]] = []
    for spec in [*config.policies, *(config.conversation_policies or [])]:
        out += [(cap, part, _INSTEAD.get(cap, "")) for cap, part in spec.needs().items()]
    if config.forks is not None and config.forks.at is not None:
        out.append((
            Capability.PREFILL,
            "token-level forks: forks.at continues a reply mid-message",
            "forks.at_turns (forks at turn boundaries)",
        ))  # fmt: skip
    if config.probe.enabled:
        out.append((
            Capability.LOCAL_WEIGHTS,
            "the probe: hidden states and prompt log-probs of a local copy of the model",
            "probe.enabled: false",
        ))  # fmt: skip
    if config.theory.bias_lams:
        out.append((
            Capability.LOCAL_WEIGHTS,
            "theory.bias_lams: attention bias on a local copy of the model",
            "theory.bias_lams: []",
        ))  # fmt: skip
    return out


def _having(capability: Capability) -> list[str]:
    """How a config gets `capability`: the engines that have it whatever their settings, and
    the settings of the others that give it."""
    kinds: list[EngineKind] = [ENGINES[name] for name in sorted(ENGINES)]
    engines = [kind.name for kind in kinds if capability in kind.capabilities]
    listed = " or ".join([", ".join(engines[:-1]), engines[-1]] if len(engines) > 1 else engines)
    ways = [f"generation.engine {listed}"] if engines else []
    return ways + [kind.hints[capability] for kind in kinds if capability in kind.hints]


def refusals(config: RunConfig) -> list[tuple[str, str]]:
    """(what the engine cannot do, what to use instead) for every need of `config` its engine
    lacks under its settings."""
    gen = config.generation
    can = engine_kind(gen).can(gen)
    out = []
    for capability, part, instead in run_needs(config):
        if capability not in can:
            ways = [*_having(capability), *([instead] if instead else [])]
            out.append((f"{capability.value} ({part})", ", or ".join(ways)))
    return out


def refuse_unsupported(config: RunConfig) -> None:
    """Raise the first refusal of `config` as one UserError line naming the engine."""
    found = refusals(config)
    if found:
        feature, alternative = found[0]
        gen = config.generation
        kind = f"engine {gen.engine}"
        if gen.chat is not None and gen.protocol != "openai":
            kind += f", protocol {gen.protocol}"
        if Capability.LOCAL_WEIGHTS not in engine_kind(gen).can(gen):  # a hosted endpoint
            kind = f"{provider(gen.base_url, gen.protocol)} ({kind})"
        raise UserError(f"{kind} cannot do {feature}; use {alternative}")
