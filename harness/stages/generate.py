"""Generation stage: models x items x policies x samples -> generations.jsonl.

One unit = one (model, policy) over every selected item and sample. All missing units of a
model run together in one `run_policies` call (one engine batch per round), and each unit is
stored the moment its policy's samples are all finished.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from harness.capabilities import Capability
from harness.config.endpoint import endpoint_of
from harness.config.run import PolicySpec, RunConfig
from harness.engines import engine_can, engine_folder, kind_can, make_engine
from harness.engines.options import engine_options, run_budget
from harness.engines.pool import EnginePool
from harness.models import ResolvedModel, locate_model
from harness.policies import policy_run, run_policies
from harness.policies.conversation import Simulators
from harness.scoring import reply_fails, window_fails
from harness.stages.base import Hosted, Records, artifact_name
from harness.stages.context import RunContext
from harness.store import RunStore, unit_key
from harness.text.chat import ChatFormat
from harness.text.records import GenerationRecord
from harness.units.replay import logged_records
from harness.units.run_units import Unit, sampling_settings
from harness.units.selection import Selected, simulator_key
from harness.units.sequential import SampleBatch

STAGE = "generate"


def _violation_hook(config: RunConfig, items: list[Selected]) -> Callable[[Any, str], bool]:
    by_id = {sel.item.id: sel.item for sel in items}
    languages = config.scoring.languages

    def violates(state: Any, text: str) -> bool:
        item = by_id[state.spec.meta["item"]]
        if state.spec.conversation and state.reply_over:
            # a conversation's reply has ended (adaptive `on: turn`): every code-checkable
            # rule judges it, whole-reply ones (sign-off, word limit) included
            cut_off = state.finish_reason == "length"
            return reply_fails(item, text, languages, cut_off) is True
        return window_fails(item, text, languages) is True

    return violates


def keep_engine(config: RunConfig) -> bool:
    """Does a stage after generation generate on its engine (single-turn twins, forks, the next
    look of a sequential run)?"""
    twins = config.conversations is not None and config.conversations.twin
    return bool(config.forks or config.sequential or twins)


def generate_stage(
    store: RunStore,
    config: RunConfig,
    model: ResolvedModel,
    items: list[Selected],
    run_id: str,
    units: list[Unit],
    progress: Callable[[int], None] | None = None,
    engines: EnginePool | None = None,
    batches: list[SampleBatch] | None = None,
    hosted: dict[str, Any] | None = None,
    budget: Any = None,  # the run's chat Budget for this model (EnginePool.budget)
) -> list[GenerationRecord]:
    """Records of every (policy, item, sample) for one model, from cache or freshly made:
    `units`, the plan's generation units of this model (`harness.units.run_units`; a sequential
    run's batches each make units of their own, listed by `batches`). With `engines`, the engine
    comes from (and stays open in) that pool for a later stage; without, it is closed when
    generation ends. `hosted`: where a chat engine's usage and the served model's identity go,
    by model. `budget`: the run's spending guard for this model (a metered engine; default: one
    of its own)."""
    gen = config.generation
    sampling = sampling_settings(config)
    missing = [i for i, unit in enumerate(units) if not store.has(STAGE, _key(unit))]
    if missing:
        if engines is not None:
            engine = engines.get(config, model)
        else:
            options = engine_options(gen, model.name, request_cache(store))
            if engine_can(gen, Capability.METERED):
                options["budget"] = budget or run_budget(config, model.name)
            engine = make_engine(gen.engine, model.path, **options)
        chat = ChatFormat(engine.tokenizer)
        violates = _violation_hook(config, items)
        groups = [
            (policy_run(_spec(units[i]), gen.continue_on_eos, violates), units[i].specs)
            for i in missing
        ]
        budget = getattr(engine, "budget", None)  # simulated users spend from the same budget
        simulators = Simulators(_simulator_factory(config, items, request_cache(store), budget))

        def store_group(index: int, records: list[GenerationRecord]) -> None:
            records = scored_replies(engine, records)
            store.put(
                STAGE, _key(units[missing[index]]), [r.model_dump(mode="json") for r in records]
            )

        try:
            run_policies(
                groups,
                engine,
                chat,
                sampling,
                on_round=(lambda _r, done: progress(done)) if progress else None,
                on_group_done=store_group,
                turn_tokens=gen.turn_tokens,
                simulators=simulators,
                single_tokens=gen.single_reply_tokens,
            )
        finally:
            # vLLM's CPU workers keep spinning while idle: free the cores for the probe
            simulators.close()
            if hosted is not None and hasattr(engine, "usage"):
                hosted[model.name] = hosted_summary(engine)
            if engines is None:
                engine.close()
    if hosted is not None:  # what the last run that sent requests recorded, on a resume
        hosted_key = unit_key("hosted", model=model.content_key, inputs=[], params={})
        if model.name in hosted:
            store.put("hosted", hosted_key, hosted[model.name])
        elif store.has("hosted", hosted_key):
            hosted[model.name] = store.get("hosted", hosted_key)
    records: list[GenerationRecord] = []
    for unit in units:
        rows = store.get(STAGE, _key(unit))
        assert rows is not None, f"generation unit {unit.policy} missing after run"
        # a unit may come from an earlier run of an edited config: it is this run's now
        records.extend(GenerationRecord.model_validate({**r, "run_id": run_id}) for r in rows)
    if len(batches or ()) > 1:  # a sequential run lists them as a fixed one would
        order = {label: i for i, label in enumerate(config.policy_labels())}
        place = {sel.item.id: i for i, sel in enumerate(items)}
        records.sort(key=lambda r: (order[r.policy], place[r.item], r.sample))
    return records


def scored_replies(engine: Any, records: list[GenerationRecord]) -> list[GenerationRecord]:
    """The records with their replies' perplexity under the unsteered model, where the engine
    holds the model (hf: the remedies' engine); others' records as they are. Attention hooks
    are what says the engine runs the weights in this process, so its model can score."""
    model = getattr(engine, "model", None)
    if model is None or not kind_can(engine.name, Capability.ATTENTION_HOOKS):
        return records
    from harness.engines.perplexity import reply_perplexities  # lazy: loads torch

    values = reply_perplexities(model, records, engine.tokenizer.pad_token_id or 0)
    return [r.model_copy(update={"perplexity": v}) for r, v in zip(records, values, strict=True)]


def _key(unit: Unit) -> str:
    """A generation unit's key (the plan keys every generation unit; only units that depend
    on this run's records are keyed later)."""
    assert unit.key is not None, f"generation unit {unit.policy} has no key"
    return unit.key


def _spec(unit: Unit) -> PolicySpec:
    spec = unit.policy_spec
    assert spec is not None, f"generation unit {unit.policy} has no policy"
    return cast("PolicySpec", spec)


def request_cache(store: RunStore) -> Path:
    """The run's cache of chat requests answered (engine chat: never sent twice)."""
    return store.cache / "requests"


def hosted_summary(engine: Any) -> dict[str, Any]:
    """A chat engine's requests, tokens, cost (where priced) and the served model's identity
    (manifest.json)."""
    spent = engine.budget.spent_usd()
    return {
        **engine.identity,
        **engine.usage.as_dict(),
        "positions": engine.positions,
        "cost_usd": None if spent is None else round(spent, 6),
        "price_as_of": None if engine.budget.price is None else str(engine.budget.price.as_of),
    }


def _simulator_factory(
    config: RunConfig, items: list[Selected], cache: Path | None = None, budget: Any = None
) -> Callable[[str], tuple[Any, ChatFormat]]:
    """Engines for simulated users that are not the run's own model: a zoo model on the run's
    engine (or its own `engine`), or an OpenAI-compatible endpoint."""
    sims = {
        simulator_key(sel.item.user_simulator): sel.item.user_simulator
        for sel in items
        if sel.item.user_simulator is not None
    }

    def factory(key: str) -> tuple[Any, ChatFormat]:
        sim = sims[key]
        kind: str = sim.engine or ("openai" if sim.base_url else config.generation.engine)
        same_model = sim.model is None or sim.model == config.models[0]
        endpoint = endpoint_of(sim).over(endpoint_of(config.generation), same_model)
        gen = config.generation.model_copy(update={"engine": kind, **endpoint.model_dump()})
        name = sim.model or config.models[0]
        options = engine_options(gen, name, cache)
        if engine_can(gen, Capability.METERED):  # simulated users spend from the run's budget
            options["budget"] = budget
        # a hosted model has no folder: the endpoint serves it (make_engine's path is for the rest)
        hosted = not engine_can(gen, Capability.LOCAL_WEIGHTS)
        path = None if hosted else engine_folder(kind, locate_model(name))
        engine = make_engine(kind, path, **options)  # type: ignore[arg-type]
        return engine, ChatFormat(engine.tokenizer)

    return factory


class GenerateStage:
    """Every model's records -> `Records` (generations.jsonl) and, on engine chat, each
    model's usage -> `Hosted`."""

    name = "generate"
    reads = ()
    writes = (Records, Hosted)

    def run(self, ctx: RunContext) -> dict[str, object]:
        config = ctx.config
        ctx.engines.request_cache = request_cache(ctx.cache)
        records: list[GenerationRecord] = []
        hosted: dict[str, Any] = {}
        for model in ctx.models:
            units = ctx.generation_units(model)
            gen = config.generation  # a conversation may generate max_tokens, a single reply
            budget = {True: gen.max_tokens, False: gen.single_budget}  # single_reply_tokens
            total = sum(
                len(unit.sample_range) * budget[sel.item.is_conversation]
                for unit in units
                for sel in unit.selected
            )
            bar = ctx.progress.bar(f"generate {model.name}", total)
            with ctx.timed(f"generate {model.name}"):
                # the twins and forks stages generate next, a sequential run's next look too:
                # they keep this engine (one start per model)
                records += generate_stage(
                    ctx.cache,
                    config,
                    model,
                    ctx.items,
                    ctx.run_id,
                    progress=bar.update,
                    engines=ctx.engines if keep_engine(config) else None,
                    batches=ctx.batches,
                    hosted=hosted,
                    units=units,
                    budget=ctx.engines.budget(config, model.name),
                )
            bar.finish()
            replays = [sel for sel in ctx.items if sel.item.is_replay]
            if replays:  # the logged conversations themselves, scored beside their replays
                chat = ChatFormat(ctx.tokenizer(model))
                for sel in replays:
                    records += logged_records(chat, sel, model.name, ctx.run_id, "log")
        return {"generations.jsonl": records, artifact_name(Hosted): hosted}
