"""Generation stage: models x items x policies x samples -> generations.jsonl.

One unit = one (model, policy) over every selected item and sample. All missing units of a
model run together in one `run_policies` call (one engine batch per round), and each unit is
stored the moment its policy's samples are all finished.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import asdict

from harness.config import GenerationConfig, RunConfig, UserSimulator, policy_label
from harness.engines import SamplingSettings, make_engine
from harness.engines.pool import EnginePool
from harness.models import ResolvedModel
from harness.plan import Selected
from harness.policies import ChatFormat, SampleSpec, make_policy, run_policies
from harness.policies.base import SimulatorSpec
from harness.policies.conversation import Simulators
from harness.records import GenerationRecord
from harness.sequential import SampleBatch, fixed_batches
from harness.store import RunStore, content_key

STAGE = "generate"


def sample_seed(base: int, item_id: str, sample: int) -> int:
    """Stable per (item, sample) and shared by every policy, so policies compare paired."""
    digest = int(hashlib.sha256(item_id.encode()).hexdigest()[:6], 16)
    return (base * 1_000_003 + digest * 101 + sample) % (2**31 - 1)


def _specs(
    config: RunConfig, model: str, items: list[Selected], run_id: str, samples: range
) -> list[SampleSpec]:
    # An item without a reminder is reminded of its system prompt, verbatim (the "repeat the
    # system prompt" baseline); one without a restatement gets "", which `restate` refuses
    # (check_generation). Items with both texts keep their specs, hence their cache keys.
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
        for sample in samples
    ]


def _simulator_spec(sim: UserSimulator | None) -> SimulatorSpec | None:
    if sim is None:
        return None
    return SimulatorSpec(sim.system, sim.turns, sim.max_tokens, simulator_key(sim))


def simulator_key(sim: UserSimulator) -> str:
    """ "" when the run's own engine plays the user, else what names the simulator's engine."""
    where = (sim.model, sim.engine, sim.base_url, sim.served_model)
    return "" if where == (None, None, None, None) else json.dumps(where)


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


def _violation_hook(config: RunConfig, items: list[Selected]):
    from harness.scoring import window_fails

    by_id = {sel.item.id: sel.item for sel in items}
    languages = config.scoring.languages

    def violates(state, text: str) -> bool:
        return window_fails(by_id[state.spec.meta["item"]], text, languages) is True

    return violates


def engine_options(config: RunConfig) -> dict:
    return generation_engine_options(config.generation)


def generation_engine_options(gen: GenerationConfig) -> dict:
    """`make_engine` options for this generation config (the judge's engines use them too)."""
    if gen.engine == "vllm":
        return {
            "max_model_len": gen.max_model_len,
            "tensor_parallel_size": gen.tensor_parallel_size,
            "pipeline_parallel_size": gen.pipeline_parallel_size,
        }
    if gen.engine == "openai":
        return {
            "base_url": gen.base_url,
            "api_key_env": gen.api_key_env,
            "served_model": gen.served_model,
            "max_model_len": gen.max_model_len,
        }
    return {"max_model_len": gen.max_model_len}


def sampling_settings(config: RunConfig) -> SamplingSettings:
    gen = config.generation
    return SamplingSettings(temperature=gen.temperature, top_p=gen.top_p, max_tokens=gen.max_tokens)


def unit_key(config: RunConfig, model: ResolvedModel, policy, specs, items) -> str:
    """One (model, policy) unit: everything its records depend on. The adaptive policy also
    depends on the items' checks (they decide when it injects), so its key holds them."""
    gen = config.generation
    sampling = sampling_settings(config)
    # Single replies keep the key they had before conversations existed.
    item_key = [
        (s.meta["item"], s.system, s.user, s.reminder, s.restatement, s.seed)
        + ((s.turns, s.simulator and asdict(s.simulator)) if s.conversation else ())
        for s in specs
    ]
    talks = any(s.conversation for s in specs)
    checks = [[c.model_dump() for c in sel.item.checks] for sel in items]
    return content_key(
        STAGE,
        model.content_key,
        policy.model_dump(),
        item_key,
        sampling.model_dump(),
        gen.engine,
        gen.continue_on_eos,
        config.scoring.languages,
        *([checks] if policy.name == "adaptive" else []),
        *([{"turn_tokens": gen.turn_tokens}] if talks else []),
    )


def generate_stage(
    store: RunStore,
    config: RunConfig,
    model: ResolvedModel,
    items: list[Selected],
    run_id: str,
    progress: Callable[[int], None] | None = None,
    engines: EnginePool | None = None,
    batches: list[SampleBatch] | None = None,
) -> list[GenerationRecord]:
    """Records of every (policy, item, sample) for one model, from cache or freshly made.
    With `engines`, the engine comes from (and stays open in) that pool for a later stage;
    without, it is closed when generation ends. `batches`: the samples of a sequential run
    (default: the config's fixed count); each batch's (model, policy) is a unit of its own."""
    gen = config.generation
    sampling = sampling_settings(config)
    units = batch_units(config, model.name, items, batches or fixed_batches(config))
    unit_specs = [_specs(config, model.name, sel, run_id, rng) for _, sel, rng in units]
    keys = [
        unit_key(config, model, spec, specs, unit_items)
        for (spec, unit_items, _), specs in zip(units, unit_specs, strict=True)
    ]
    missing = [i for i, key in enumerate(keys) if not store.has(STAGE, key)]
    if missing:
        if engines is not None:
            engine = engines.get(config, model)
        else:
            engine = make_engine(gen.engine, model.path, **engine_options(config))
        chat = ChatFormat(engine.tokenizer)
        violates = _violation_hook(config, items)
        groups = [
            (make_policy(units[i][0], gen.continue_on_eos, violates), unit_specs[i])
            for i in missing
        ]
        simulators = Simulators(_simulator_factory(config, items))

        def store_group(index: int, records: list[GenerationRecord]) -> None:
            store.put(STAGE, keys[missing[index]], [r.model_dump(mode="json") for r in records])

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
            )
        finally:
            # vLLM's CPU workers keep spinning while idle: free the cores for the probe
            simulators.close()
            if engines is None:
                engine.close()
    records = []
    for (spec, _, _), key in zip(units, keys, strict=True):
        rows = store.get(STAGE, key)
        assert rows is not None, f"generation unit {policy_label(spec)} missing after run"
        # a unit may come from an earlier run of an edited config: it is this run's now
        records.extend(GenerationRecord.model_validate({**r, "run_id": run_id}) for r in rows)
    if len(batches or ()) > 1:  # a sequential run lists them as a fixed one would
        order = {label: i for i, label in enumerate(config.policy_labels())}
        place = {sel.item.id: i for i, sel in enumerate(items)}
        records.sort(key=lambda r: (order[r.policy], place[r.item], r.sample))
    return records


def _simulator_factory(config: RunConfig, items: list[Selected]):
    """Engines for simulated users that are not the run's own model: a zoo model on the run's
    engine (or its own `engine`), or an OpenAI-compatible endpoint."""
    sims = {
        simulator_key(sel.item.user_simulator): sel.item.user_simulator
        for sel in items
        if sel.item.user_simulator is not None
    }

    def factory(key: str):
        from harness.models import resolve_model

        sim = sims[key]
        kind = sim.engine or ("openai" if sim.base_url else config.generation.engine)
        path = resolve_model(sim.model or config.models[0]).path
        options = {"max_model_len": config.generation.max_model_len}
        if kind == "openai":
            options |= {
                "base_url": sim.base_url or config.generation.base_url,
                "api_key_env": sim.api_key_env,
                "served_model": sim.served_model,
            }
        engine = make_engine(kind, path, **options)
        return engine, ChatFormat(engine.tokenizer)

    return factory


def check_generation(config: RunConfig, items: list[Selected], model: ResolvedModel) -> None:
    """Every error generation could hit, raised before the run folder exists: policies that do
    not fit the chat template, empty reminder texts, `restate` on an item without a
    restatement, prompts + budget beyond the context."""
    import json

    from transformers import AutoTokenizer

    from harness.errors import UserError
    from harness.policies.base import reminder_ids

    tokenizer = AutoTokenizer.from_pretrained(model.path)
    chat = ChatFormat(tokenizer)
    model_config = json.loads((model.path / "config.json").read_text())
    context = model_config.get("max_position_embeddings") or 2048
    if config.generation.max_model_len:
        context = min(context, config.generation.max_model_len)
    budget = config.generation.max_tokens
    for spec, unit_items in policy_units(config, items):
        policy = make_policy(spec, config.generation.continue_on_eos, violates=lambda *_: False)
        for sel in unit_items:
            where = f"item '{sel.item.id}', policy '{policy_label(spec)}'"
            if spec.name == "restate" and not sel.item.restatement:
                fix = "add one to the suite, or drop the policy"
                raise UserError(f"{where}: the item has no `restatement` ({fix})")
            sample = _specs(config, model.name, [sel], "", range(1))[0]
            if sel.item.is_conversation:
                _check_conversation(config, chat, policy, spec, sample, context, where)
                continue
            if getattr(spec, "between_turns", False):
                raise UserError(
                    f"{where}: reminders between turns need a conversation item (`turns` or "
                    "`user_simulator`); list the policy under `conversation_policies`"
                )
            try:
                prompt = chat.prompt_ids(sample.system, sample.user)
                placement = getattr(spec, "placement", None)
                if placement:
                    reminder_ids(chat, placement, spec.text or sample.reminder, None)
                extra = policy.injection_budget(chat, sample, budget)
            except UserError as exc:
                raise UserError(f"{where}: {exc}") from None
            if len(prompt) + budget + extra > context:
                raise UserError(
                    f"{where}: max_tokens {budget} (+{extra} injected, +{len(prompt)} prompt) "
                    f"exceeds the model's context of {context} tokens"
                )
    specs = [*config.policies, *(config.conversation_policies or [])]
    if any(s.name == "attention_bias" for s in specs) and config.generation.engine != "hf":
        raise UserError("policy attention_bias needs generation.engine: hf")


def _check_conversation(config, chat, policy, spec, sample, context: int, where: str) -> None:
    """A conversation item under one policy: a between-turns rhythm, turn_tokens set, the
    reminder renders at its placement, and the shortest possible conversation fits."""
    from harness.errors import UserError
    from harness.policies.conversation import conversation_floor

    if getattr(spec, "every", None) is not None:
        raise UserError(
            f"{where}: a conversation is reminded between turns, not every N tokens: use "
            "`every_turns` (periodic) or `on: turn` (adaptive), under `conversation_policies`"
        )
    if config.generation.turn_tokens is None:
        raise UserError(
            f"{where}: field 'generation.turn_tokens' is needed by conversations "
            "(max new tokens per assistant turn)"
        )
    try:
        need = conversation_floor(chat, policy, sample)
    except UserError as exc:
        raise UserError(f"{where}: {exc}") from None
    if need > context:
        raise UserError(
            f"{where}: the conversation needs at least {need} tokens (prompt, every user turn "
            f"and reminder, one token per reply) but the model's context is {context}"
        )


class GenerateStage:
    """Every model's records -> `ctx.records` and generations.jsonl."""

    name = "generate"

    def run(self, ctx) -> dict:
        config = ctx.config
        for model in ctx.models:
            units = batch_units(config, model.name, ctx.items, ctx.batches or fixed_batches(config))
            total = sum(len(unit_items) * len(rng) for _, unit_items, rng in units)
            bar = ctx.progress.bar(f"generate {model.name}", total * config.generation.max_tokens)
            with ctx.timed(f"generate {model.name}"):
                # the forks stage generates next, a sequential run's next look too: they keep
                # this engine (one start per model)
                ctx.records += generate_stage(
                    ctx.store,
                    config,
                    model,
                    ctx.items,
                    ctx.run_id,
                    progress=bar.update,
                    engines=ctx.engines if config.forks or config.sequential else None,
                    batches=ctx.batches,
                )
            bar.finish()
        return {"generations.jsonl": ctx.records}
