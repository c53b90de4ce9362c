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
from harness.policies import ChatFormat, SampleSpec, run_policies
from harness.policies.base import SimulatorSpec
from harness.policies.conversation import Simulators
from harness.records import GenerationRecord
from harness.store import RunStore, unit_key

STAGE = "generate"


def sample_seed(base: int, item_id: str, sample: int) -> int:
    """Stable per (item, sample) and shared by every policy, so policies compare paired."""
    digest = int(hashlib.sha256(item_id.encode()).hexdigest()[:6], 16)
    return (base * 1_000_003 + digest * 101 + sample) % (2**31 - 1)


def _specs(config: RunConfig, model: str, items: list[Selected], run_id: str) -> list[SampleSpec]:
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
        for sample in range(config.samples)
    ]


def _simulator_spec(sim: UserSimulator | None) -> SimulatorSpec | None:
    if sim is None:
        return None
    return SimulatorSpec(sim.system, sim.turns, sim.max_tokens, simulator_key(sim))


def simulator_key(sim: UserSimulator) -> str:
    """ "" when the run's own engine plays the user, else what names the simulator's engine."""
    where = (sim.model, sim.engine, sim.base_url, sim.served_model)
    return "" if where == (None, None, None, None) else json.dumps(where)


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


def generation_key(config: RunConfig, model: ResolvedModel, policy, specs, items) -> str:
    """One (model, policy) unit: everything its records depend on. The adaptive policy also
    depends on the items' checks (they decide when it injects), and conversations on
    `turn_tokens`; where a part does not apply it is None, so the key keeps its shape."""
    gen = config.generation
    samples = [
        {
            "item": s.meta["item"],
            "system": s.system,
            "user": s.user,
            "reminder": s.reminder,
            "restatement": s.restatement,
            "seed": s.seed,
            "turns": s.turns,
            "simulator": s.simulator and asdict(s.simulator),
        }
        for s in specs
    ]
    talks = any(s.conversation for s in specs)
    checks = [[c.model_dump() for c in sel.item.checks] for sel in items]
    params = {
        "policy": policy.model_dump(),
        "sampling": sampling_settings(config).model_dump(),
        "engine": gen.engine,
        "continue_on_eos": gen.continue_on_eos,
        "languages": config.scoring.languages,
        "checks": checks if policy.name == "adaptive" else None,
        "turn_tokens": gen.turn_tokens if talks else None,
    }
    return unit_key(STAGE, model=model.content_key, inputs=samples, params=params)


def generate_stage(
    store: RunStore,
    config: RunConfig,
    model: ResolvedModel,
    items: list[Selected],
    run_id: str,
    progress: Callable[[int], None] | None = None,
    engines: EnginePool | None = None,
) -> list[GenerationRecord]:
    """Records of every (policy, item, sample) for one model, from cache or freshly made.
    With `engines`, the engine comes from (and stays open in) that pool for a later stage;
    without, it is closed when generation ends."""
    gen = config.generation
    sampling = sampling_settings(config)
    units = policy_units(config, items)
    unit_specs = [_specs(config, model.name, unit_items, run_id) for _, unit_items in units]
    keys = [
        generation_key(config, model, spec, specs, unit_items)
        for (spec, unit_items), specs in zip(units, unit_specs, strict=True)
    ]
    missing = [i for i, key in enumerate(keys) if not store.has(STAGE, key)]
    if missing:
        if engines is not None:
            engine = engines.get(config, model)
        else:
            engine = make_engine(gen.engine, model.path, **engine_options(config))
        chat = ChatFormat(engine.tokenizer)
        violates = _violation_hook(config, items)
        groups = [(units[i][0].bind(gen.continue_on_eos, violates), unit_specs[i]) for i in missing]
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
    for (spec, _), key in zip(units, keys, strict=True):
        rows = store.get(STAGE, key)
        assert rows is not None, f"generation unit {policy_label(spec)} missing after run"
        # a unit may come from an earlier run of an edited config: it is this run's now
        records.extend(GenerationRecord.model_validate({**r, "run_id": run_id}) for r in rows)
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

    tokenizer = AutoTokenizer.from_pretrained(model.path)
    chat = ChatFormat(tokenizer)
    model_config = json.loads((model.path / "config.json").read_text())
    context = model_config.get("max_position_embeddings") or 2048
    if config.generation.max_model_len:
        context = min(context, config.generation.max_model_len)
    budget = config.generation.max_tokens
    for spec, unit_items in policy_units(config, items):
        policy = spec.bind(config.generation.continue_on_eos, violates=lambda *_: False)
        for sel in unit_items:
            where = f"item '{sel.item.id}', policy '{policy_label(spec)}'"
            if spec.name == "restate" and not sel.item.restatement:
                fix = "add one to the suite, or drop the policy"
                raise UserError(f"{where}: the item has no `restatement` ({fix})")
            sample = _specs(config, model.name, [sel], "")[0]
            if sel.item.is_conversation:
                _check_conversation(config, chat, policy, spec, sample, context, where)
                continue
            if spec.between_turns:
                raise UserError(
                    f"{where}: reminders between turns need a conversation item (`turns` or "
                    "`user_simulator`); list the policy under `conversation_policies`"
                )
            try:
                prompt = chat.prompt_ids(sample.system, sample.user)
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
            units = policy_units(config, ctx.items)
            total = sum(len(unit_items) for _, unit_items in units) * config.samples
            bar = ctx.progress.bar(f"generate {model.name}", total * config.generation.max_tokens)
            with ctx.timed(f"generate {model.name}"):
                # the forks stage generates next: it keeps this engine (one start per model)
                ctx.records += generate_stage(
                    ctx.store,
                    config,
                    model,
                    ctx.items,
                    ctx.run_id,
                    progress=bar.update,
                    engines=ctx.engines if config.forks else None,
                )
            bar.finish()
        return {"generations.jsonl": ctx.records}
