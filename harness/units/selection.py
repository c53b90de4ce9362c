"""What a run generates: the selected items, the (policy, items) units and each sample's spec.

The generate stage runs these units and `plan_checks.check_generation` checks them before the run
folder exists, so both read them from here.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from harness.config.run import RunConfig, TaskItem, TaskSuite, UserSimulator, policy_label
from harness.policies.base import SampleSpec, SimulatorSpec
from harness.units.sequential import SampleBatch


@dataclass(frozen=True)
class Selected:
    """One task item of the run, with the name of the suite it came from."""

    suite: str
    item: TaskItem


def select_items(config: RunConfig, suites: list[TaskSuite]) -> list[Selected]:
    """The config's items in suite order (every item when `items` is not given)."""
    wanted = set(config.items) if config.items else None
    return [
        Selected(suite=suite.suite, item=item)
        for suite in suites
        for item in suite.items
        if wanted is None or item.id in wanted
    ]


def policy_units(config: RunConfig, items: list[Selected]) -> list[tuple[object, list[Selected]]]:
    """(policy spec, the items it runs on): every policy over every item, unless the config
    has `conversation_policies`, which then take the conversation items from `policies`."""
    if config.conversation_policies is None:
        return [(spec, items) for spec in config.policies]
    single = [sel for sel in items if not sel.item.is_conversation]
    talks = [sel for sel in items if sel.item.is_conversation]
    return [(spec, single) for spec in config.policies if single] + [
        (spec, talks) for spec in config.conversation_policies if talks
    ]


def sample_seed(base: int, item_id: str, sample: int) -> int:
    """Stable per (item, sample) and shared by every policy, so policies compare paired."""
    digest = int(hashlib.sha256(item_id.encode()).hexdigest()[:6], 16)
    return (base * 1_000_003 + digest * 101 + sample) % (2**31 - 1)


def batch_units(
    config: RunConfig, model: str, items: list[Selected], batches: list[SampleBatch]
) -> list[tuple[object, list[Selected], range]]:
    """(policy spec, items, sample indices) of every generation unit: per batch, each policy
    over the items whose condition the batch covers (a fixed run: one batch, every item)."""
    units = []
    for batch in batches:
        for spec, unit_items in policy_units(config, items):
            label = policy_label(spec)
            chosen = [sel for sel in unit_items if batch.covers((model, sel.item.id, label))]
            if chosen:
                units.append((spec, chosen, range(batch.start, batch.stop)))
    return units


def sample_specs(
    config: RunConfig,
    model: str,
    items: list[Selected],
    run_id: str,
    samples: range | None = None,
) -> list[SampleSpec]:
    """Every sample of `items` for one model (`samples`, default the first
    `config.first_samples`), in item x sample order."""
    # An item without a reminder is reminded of its system prompt, verbatim (the "repeat the
    # system prompt" baseline); one without a restatement gets "", which `restate` refuses
    # (check_generation).
    return [
        SampleSpec(
            system=sel.item.system,
            user=sel.item.user,
            reminder=sel.item.reminder or sel.item.system,
            restatement=sel.item.restatement or "",
            seed=sample_seed(config.generation.seed, sel.item.id, sample),
            meta={
                "model": model,
                "task": sel.suite,
                "item": sel.item.id,
                "sample": sample,
                "run_id": run_id,
            },
            turns=[(turn.user, turn.pressure) for turn in sel.item.turns or []],
            simulator=_simulator_spec(sel.item.user_simulator),
        )
        for sel in items
        for sample in samples or range(config.first_samples)
    ]


def _simulator_spec(sim: UserSimulator | None) -> SimulatorSpec | None:
    if sim is None:
        return None
    return SimulatorSpec(sim.system, sim.turns, sim.max_tokens, simulator_key(sim))


def simulator_key(sim: UserSimulator) -> str:
    """ "" when the run's own engine plays the user, else what names the simulator's engine."""
    where = (sim.model, sim.engine, sim.base_url, sim.served_model)
    return "" if where == (None, None, None, None) else json.dumps(where)
