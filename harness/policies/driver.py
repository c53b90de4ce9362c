"""The policy driver: (policy, samples) groups advanced round by round on one engine until every
sample is done, then one `GenerationRecord` per sample (the steps of a round: `base`)."""

from __future__ import annotations

from collections.abc import Callable

from harness.engines.base import Engine, SamplingSettings, continuous
from harness.errors import UserError
from harness.policies.base import (
    Policy,
    SampleSpec,
    SampleState,
    absorb_result,
    inject_reminders,
    round_request,
)
from harness.policies.continuous import run_continuous
from harness.policies.conversation import next_user_turns, prefill_history, stop_at_context
from harness.text.chat import ChatFormat
from harness.text.records import GenerationRecord


def run_policy(
    policy: Policy,
    engine: Engine,
    chat: ChatFormat,
    specs: list[SampleSpec],
    sampling: SamplingSettings,
    on_round: Callable[[int, int], None] | None = None,
) -> list[GenerationRecord]:
    """Generate `sampling.max_tokens` model tokens for every spec under `policy`."""
    return run_policies([(policy, specs)], engine, chat, sampling, on_round)[0]


def run_policies(
    groups: list[tuple[Policy, list[SampleSpec]]],
    engine: Engine,
    chat: ChatFormat,
    sampling: SamplingSettings,
    on_round: Callable[[int, int], None] | None = None,
    on_group_done: Callable[[int, list[GenerationRecord]], None] | None = None,
    turn_tokens: int | None = None,
    simulators=None,
    single_tokens: int | None = None,
) -> list[list[GenerationRecord]]:
    """Several (policy, samples) groups advanced together: each round is ONE engine batch
    with every unfinished sample of every group, so short rounds of one policy overlap with
    long rounds of another. Seeds depend on (sample seed, the sample's own round), never on
    the batch, so a group gives the same tokens alone or merged.

    Conversations (specs with user turns) take one round per assistant turn, of at most
    `turn_tokens` tokens; after the round every conversation whose reply ended gets its next
    user turn (`harness.policies.conversation.next_user_turns`; simulated users as one more
    batch per round, through `simulators`).

    On an engine that batches continuously (vLLM), the rounds do not wait for each other: a
    sample's next round joins the running batch as soon as its last one ends
    (`harness.policies.continuous`); each sample's requests, seeds included, are the same.

    A conversation may generate `sampling.max_tokens` in all, a single reply `single_tokens`
    (None: `sampling.max_tokens` too)."""
    budgets = (sampling.max_tokens, single_tokens or sampling.max_tokens)
    grouped = [
        (policy, _start_states(policy, engine, chat, specs, budgets)) for policy, specs in groups
    ]
    # Each group's records are built once, when its last sample finishes: what on_group_done
    # stores and what is returned are the same records.
    finished: dict[int, list[GenerationRecord]] = {}

    def hand_over() -> None:
        for index, (policy, states) in enumerate(grouped):
            if index not in finished and all(s.done for s in states):
                finished[index] = [state_record(s, chat, policy, engine.name) for s in states]
                if on_group_done:  # hand over each finished group at once, so it can be stored
                    on_group_done(index, finished[index])

    if continuous(engine) and not any(s.spec.simulator for _, st in grouped for s in st):
        # simulated users write their turns in batches between rounds: those runs keep rounds
        run_continuous(grouped, engine, chat, sampling, turn_tokens, on_round, hand_over)
        return [finished[index] for index in range(len(grouped))]
    round_index = 0
    while True:
        hand_over()
        active = [(p, s) for p, states in grouped for s in states if not s.done]
        if not active:
            break
        stop_at_context([s for _, s in active], engine.max_model_len)
        active = [(p, s) for p, s in active if not s.done]
        if not active:
            continue  # groups whose last samples just hit the context are handed over above
        requests = [
            round_request(policy, state, sampling, state.budget, turn_tokens, engine.max_model_len)
            for policy, state in active
        ]
        results = engine.generate(requests)
        for (policy, state), request, result in zip(active, requests, results, strict=True):
            absorb_result(
                policy, state, chat, request, result, state.budget, len(active), turn_tokens
            )
        for policy, states in grouped:
            inject_reminders(policy, chat, [s for s in states if not s.spec.conversation])
        next_user_turns(grouped, chat, engine, simulators, sampling)
        round_index += 1
        if on_round:
            on_round(round_index, sum(s.generated for _, states in grouped for s in states))
    return [finished[index] for index in range(len(grouped))]


def _start_states(
    policy: Policy,
    engine: Engine,
    chat: ChatFormat,
    specs: list[SampleSpec],
    budgets: tuple[int, int],
) -> list[SampleState]:
    """The samples' states; `budgets`: (a conversation's total, a single reply's)."""
    states = [SampleState(spec=s, prompt_ids=chat.prompt_ids(s.system, s.user)) for s in specs]
    for state in states:
        state.counts.prompt = len(state.prompt_ids)
        state.budget = budgets[0] if state.spec.conversation else budgets[1]
        budget = state.budget
        if state.spec.conversation:  # may stop at the context mid-run (finish reason context)
            if len(state.prompt_ids) >= engine.max_model_len:
                raise UserError(
                    f"the prompt ({len(state.prompt_ids)} tokens) fills the context of "
                    f"{engine.max_model_len} tokens"
                )
            continue
        extra = policy.injection_budget(chat, state.spec, budget)
        needed = len(state.prompt_ids) + budget + extra
        if needed > engine.max_model_len:
            raise UserError(
                f"max_tokens {budget} (+{extra} injected, +{len(state.prompt_ids)} prompt) "
                f"exceeds the context of {engine.max_model_len} tokens"
            )
        state.counts.prompt = len(state.prompt_ids)
    policy.prepare(chat, engine, states)
    for state in states:
        if state.spec.logged:
            prefill_history(state, chat, policy, engine.max_model_len)
    return states


def state_record(
    state: SampleState, chat: ChatFormat, policy: Policy, engine: str
) -> GenerationRecord:
    """The sample's record; reads `state` without changing it, and shares no mutable part
    with it, so a record handed out never changes afterwards."""
    spans = {"generated": 0, "injected": 0, "restatement": 0, "user": 0, "markup": 0}
    spans["logged"] = 0
    for seg in state.segments:
        spans[seg.kind] += seg.end - seg.start
    turn_counts = (
        {"user": spans["user"], "markup": spans["markup"]} if state.spec.conversation else {}
    )
    if spans["logged"]:
        turn_counts["logged"] = spans["logged"]
    counts = state.counts.model_copy(
        update={
            "generated": spans["generated"],
            "injected": spans["injected"],
            "restated": spans["restatement"],
            **turn_counts,
        }
    )
    spec = state.spec
    messages = ([{"role": "system", "content": spec.system}] if spec.system else []) + [
        {"role": "user", "content": spec.user}
    ]
    return GenerationRecord(
        model=spec.meta.get("model", ""),
        task=spec.meta.get("task", ""),
        item=spec.meta.get("item", ""),
        run_id=spec.meta.get("run_id", ""),
        sample=spec.meta.get("sample", 0),
        history=spec.history,
        conversation_id=spec.meta.get("conversation_id"),
        policy=policy.label,
        seed=spec.seed,
        prompt_messages=messages,
        prompt_ids=list(state.prompt_ids),
        continuation_ids=list(state.continuation),
        segments=list(state.segments),
        text=chat.tokenizer.decode(state.continuation, skip_special_tokens=False),
        finish_reason=state.finish_reason,
        engine=engine,
        seconds=state.seconds,
        rounds=state.rounds,
        tokens=counts,
    )
