"""A run's preflight checks (`harness.units.plan.plan_config` runs them before the run folder
exists): conversations' turn budget, single-turn twins, every generation unit against the
chat template and the context, judges, probe layers and each probe model's backend. Each
raises `UserError` with one line naming the item, policy or field.
"""

from __future__ import annotations

import json

from harness.config.run import ChatOptions, RunConfig, policy_label
from harness.engines.chat_engine import HOSTED_CONTEXT
from harness.engines.positions import PositionUnits
from harness.errors import UserError
from harness.models import ResolvedModel, model_files
from harness.policies import policy_run
from harness.policies.conversation import conversation_floor
from harness.probes.endpoint import check_endpoint
from harness.scoring.judge import JudgeDefaults, check_judges, judge_checks_of
from harness.text.chat import ChatFormat
from harness.units.replay import check_replays
from harness.units.run_units import Unit
from harness.units.selection import Selected


def check_turn_budget(config: RunConfig, items: list[Selected]) -> None:
    """Every reply of every conversation can get `turn_tokens` within `max_tokens`, the
    conversation's total budget: a config that cannot is refused rather than run with its last
    replies cut short or never written (docs/architecture.md, "Conversations")."""
    per_reply, budget = config.generation.turn_tokens, config.generation.max_tokens
    if per_reply is None:
        return  # check_generation names the missing field, with the policy
    for sel in items:
        replies = sel.item.n_turns
        if sel.item.is_conversation and replies * per_reply > budget:
            need = replies * per_reply
            fix = f"raise max_tokens to {need}"
            if budget >= replies:  # a turn_tokens that fits exists
                fix += f" or lower turn_tokens to {budget // replies}"
            raise UserError(
                f"item '{sel.item.id}': {replies} replies x generation.turn_tokens {per_reply} "
                f"= {need} tokens exceed generation.max_tokens {budget}, so its last replies "
                f"would be cut short or never run: {fix}"
            )


def check_twin(config: RunConfig, items: list[Selected]) -> None:
    """`conversations.twin` needs a scripted conversation and the policy `none` among the
    conversations' policies (a twin flattens a conversation without reminders)."""
    if config.conversations is None or not config.conversations.twin:
        return
    if not any(sel.item.turns and not sel.item.is_replay for sel in items):
        raise UserError(
            "conversations.twin: no scripted conversation (an item with `turns`) among the "
            "items, so there is no conversation to send as one message"
        )
    specs = config.conversation_policies or config.policies
    if "none" not in {policy_label(spec) for spec in specs}:
        raise UserError(
            "conversations.twin flattens the conversations run without reminders: add `none` "
            "to conversation_policies"
        )


def _single_name(config: RunConfig) -> str:
    """The field that sets a single reply's budget, for messages."""
    single = config.generation.single_reply_tokens is not None
    return "single_reply_tokens" if single else "max_tokens"


def check_generation(
    config: RunConfig, items: list[Selected], model: ResolvedModel, units: list[Unit]
) -> ChatFormat:
    """Every error generation could hit in the model's generation `units`, raised before the
    run folder exists: policies that do not fit the chat template, empty reminder texts,
    `restate` on an item without a restatement, prompts + budget beyond the context. Returns
    the model's chat format."""
    if model.source == "hosted":  # positions in the chat engine's unit, no model folder
        options = config.generation.chat or ChatOptions()
        chat = ChatFormat(PositionUnits(options.positions, options.tokenizer))
        context = config.generation.max_model_len or HOSTED_CONTEXT
    else:
        from transformers import AutoTokenizer

        files = model_files(model)  # a plan builds no model
        chat = ChatFormat(AutoTokenizer.from_pretrained(files))
        model_config = json.loads((files / "config.json").read_text())
        context = model_config.get("max_position_embeddings") or 2048
    if config.generation.max_model_len:
        context = min(context, config.generation.max_model_len)
    budget = config.generation.single_budget  # a single reply's
    for unit in units:
        spec = unit.policy_spec
        policy = policy_run(spec, config.generation.continue_on_eos, violates=lambda *_: False)
        first = {s.meta["item"]: s for s in reversed(unit.specs)}  # each item's first sample
        for sel in unit.selected:
            where = f"item '{sel.item.id}', policy '{spec.label}'"
            problem = policy.item_problem(sel.item)
            if problem:
                raise UserError(f"{where}: {problem}")
            if sel.item.is_replay:  # its conversations: check_replays, below
                _check_rhythm(config, spec, where)
                continue
            sample = first[sel.item.id]
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
                    f"{where}: {_single_name(config)} {budget} (+{extra} injected, "
                    f"+{len(prompt)} prompt) "
                    f"exceeds the model's context of {context} tokens"
                )
    check_replays(config, chat, items, context)
    return chat


def _check_rhythm(config, spec, where: str) -> None:
    """A conversation is reminded between turns, and needs turn_tokens."""
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


def _check_conversation(config, chat, policy, spec, sample, context: int, where: str) -> None:
    """A conversation item under one policy: a between-turns rhythm, turn_tokens set, the
    reminder renders at its placement, and the shortest possible conversation fits."""
    _check_rhythm(config, spec, where)
    try:
        need = conversation_floor(chat, policy, sample)
    except UserError as exc:
        raise UserError(f"{where}: {exc}") from None
    if need > context:
        raise UserError(
            f"{where}: the conversation needs at least {need} tokens (prompt, every user turn "
            f"and reminder, one token per reply) but the model's context is {context}"
        )


def check_run_judges(config: RunConfig, items: list[Selected]) -> None:
    """Judge checks' models resolve and have a chat template; openai judges answer."""
    checks = judge_checks_of(sel.item for sel in items)
    if checks:
        check_judges(JudgeDefaults(config.models[0], config.generation), checks)


def check_probe_layers(config: RunConfig, model: ResolvedModel) -> None:
    """probe.layers against the model's depth, so a bad index fails before generation."""
    import json

    from harness.probes.hooks import resolve_layers  # lazy: loads torch

    if config.probe.layers == "all":
        return
    config_file = model_files(model) / "config.json"
    depth = json.loads(config_file.read_text()).get("num_hidden_layers")
    if depth is None:
        return  # an unusual config: the probe itself checks against the loaded model
    try:
        resolve_layers(list(config.probe.layers), depth + 1)
    except UserError as exc:
        raise UserError(f"field 'probe.layers': {model.name}: {exc}") from None


def probe_backends(
    backend: str, models: list[ResolvedModel], endpoint: dict | None = None
) -> dict[str, str]:
    """The probe backend of each model: `auto` becomes vllm where vLLM can hand out this
    model's hidden states on this machine, else hf; an explicit `vllm` that cannot is an
    error now, before generation; `openai`: the endpoint (`endpoint`'s settings) answers,
    serves the model with prompt log-probs and tokenises as the model does."""
    if backend == "hf":
        return {m.name: "hf" for m in models}
    if backend == "openai":
        for model in models:
            try:
                check_endpoint(model_files(model), endpoint or {})
            except UserError as exc:
                raise UserError(f"field 'probe.backend': {model.name}: {exc}") from None
        return {m.name: "openai" for m in models}
    from harness.probes.vllm_backend import vllm_support  # lazy: loads torch

    chosen = {}
    for model in models:
        why = vllm_support(model_files(model))
        if why and backend == "vllm":
            raise UserError(f"field 'probe.backend': vllm cannot probe {model.name}: {why}")
        chosen[model.name] = "hf" if why else "vllm"
    return chosen
