"""Policies drive an Engine in segments: all samples of a batch advance together, round by
round, and every span of the continuation is recorded as a segment with token offsets."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Self

from pydantic import PrivateAttr

from harness.chat import ChatFormat
from harness.engines.base import (
    Engine,
    GenerationRequest,
    PromptBias,
    SamplingSettings,
    continuous,
)
from harness.errors import UserError
from harness.records import GenerationRecord, Segment, TokenCounts
from harness.schema import Strict

CONTINUE_TEXT = "Continue."


@dataclass(frozen=True)
class SimulatorSpec:
    """A simulated user (harness.config.UserSimulator): its system prompt, how many turns it
    plays, its budget per turn, and `key` naming the engine that plays it ("" = the run's)."""

    system: str
    turns: int
    max_tokens: int = 64
    key: str = ""


@dataclass
class SampleSpec:
    """One sample to generate: a chat prompt plus the item's reminder/restatement texts, and
    for a conversation its scripted user turns 2..K (text, pressure) and simulated user."""

    system: str | None
    user: str
    reminder: str = ""
    restatement: str = ""
    seed: int = 0
    meta: dict = field(default_factory=dict)  # model, task, item, sample... copied to records
    turns: list[tuple[str, bool]] = field(default_factory=list)
    simulator: SimulatorSpec | None = None

    @property
    def conversation(self) -> bool:
        return bool(self.turns) or self.simulator is not None

    @property
    def n_turns(self) -> int:
        return 1 + len(self.turns) + (self.simulator.turns if self.simulator else 0)


@dataclass
class SampleState:
    spec: SampleSpec
    prompt_ids: list[int]
    continuation: list[int] = field(default_factory=list)
    segments: list[Segment] = field(default_factory=list)
    generated: int = 0
    done: bool = False
    finish_reason: str = "length"
    counts: TokenCounts = field(default_factory=TokenCounts)
    seconds: float = 0.0
    rounds: int = 0
    bias: PromptBias | None = None  # attention bias toward the system turn (hf engine only)
    # conversations: the turn under way (its user message is in place), the tokens its reply
    # has so far, and whether that reply has ended (EOS or turn_tokens)
    turn: int = 1
    turn_generated: int = 0
    reply_over: bool = False

    def append(self, ids: Sequence[int], kind: str, source: str, text: str = "") -> None:
        start = len(self.continuation)
        self.continuation.extend(ids)
        turn = self.turn if self.spec.conversation else None
        self.segments.append(
            Segment(
                kind=kind,
                start=start,
                end=len(self.continuation),
                source=source,
                text=text,
                turn=turn,
            )
        )


class Policy(Strict):
    """Base of the policies (`harness.policies.library`), each a config spec too: generate to
    the budget in one round. Subclasses change the round length, the start of the assistant
    turn, and what is injected between rounds."""

    name: str
    _continue_on_eos: bool = PrivateAttr(False)

    def bind(self, continue_on_eos: bool = False, violates=None) -> Self:
        """This policy with the run's settings: `continue_on_eos` (a `Continue.` turn at EOS
        until the budget is spent); `violates` is the window check adaptive reminds on."""
        bound = self.model_copy()
        bound._continue_on_eos = continue_on_eos
        return bound

    @property
    def continue_on_eos(self) -> bool:
        return self._continue_on_eos

    @property
    def label(self) -> str:
        return policy_label(self)

    @property
    def between_turns(self) -> bool:
        """True when the policy reminds between the turns of a conversation."""
        return False

    def prepare(self, chat: ChatFormat, engine: Engine, states: list[SampleState]) -> None:
        """Hook run once before the first round (checks, restatement, engine set-up)."""

    def round_tokens(self, state: SampleState, remaining: int) -> int:
        return remaining

    def inject(self, chat: ChatFormat, states: list[SampleState]) -> dict[int, list[int]]:
        """Injected ids per index of `states` (active samples at a round boundary)."""
        return {}

    def injection_budget(self, chat: ChatFormat, spec: SampleSpec, max_tokens: int) -> int:
        """Upper bound of tokens this policy may add besides generated ones (context check)."""
        return 0

    def turn_reminder(self, chat: ChatFormat, state: SampleState) -> str | None:
        """Conversations: the reminder to add before user turn `state.turn + 1` (None: none),
        at the policy's `placement`. Called once per turn, after the reply to `state.turn`
        ended."""
        return None


def policy_label(policy: Policy) -> str:
    """The policy's one name in records, manifest and reports, e.g. `periodic-128-user`,
    `attention_bias-1` (numbers as `:g` writes them, so lam 1.0 and 1 label alike); between
    turns `periodic-turns2-user`, `adaptive-turn-user`."""
    data = policy.model_dump(exclude_none=True)
    name = data.pop("name")
    data.pop("text", None)
    if "every_turns" in data:
        data = {"every": f"turns{data.pop('every_turns')}", **data}
    if "on" in data:
        data = {"on": data.pop("on"), **data}
    values = (f"{v:g}" if isinstance(v, float) else str(v) for v in data.values())
    return "-".join([name, *values])


def reminder_ids(chat: ChatFormat, placement: str, text: str, last: int | None) -> list[int]:
    if placement == "inline":
        return chat.inline_ids(text)
    if placement in ("system", "user"):
        body = text if placement == "system" else f"Reminder: {text} {CONTINUE_TEXT}"
        return chat.turn_ids(placement, body, last)
    raise UserError(f"unknown placement '{placement}' (expected system, user or inline)")


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
    (`harness.policies.continuous`); each sample's requests, seeds included, are the same."""
    from harness.policies.conversation import next_user_turns, stop_at_context

    budget = sampling.max_tokens
    grouped = [
        (policy, _start_states(policy, engine, chat, specs, budget)) for policy, specs in groups
    ]
    # Each group's records are built once, when its last sample finishes: what on_group_done
    # stores and what is returned are the same records.
    finished: dict[int, list[GenerationRecord]] = {}

    def hand_over() -> None:
        for index, (policy, states) in enumerate(grouped):
            if index not in finished and all(s.done for s in states):
                finished[index] = [_record(s, chat, policy, engine) for s in states]
                if on_group_done:  # hand over each finished group at once, so it can be stored
                    on_group_done(index, finished[index])

    if continuous(engine) and not any(s.spec.simulator for _, st in grouped for s in st):
        # simulated users write their turns in batches between rounds: those runs keep rounds
        from harness.policies.continuous import run_continuous

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
            round_request(policy, state, sampling, budget, turn_tokens, engine.max_model_len)
            for policy, state in active
        ]
        results = engine.generate(requests)
        for (policy, state), request, result in zip(active, requests, results, strict=True):
            absorb_result(policy, state, chat, request, result, budget, len(active), turn_tokens)
        for policy, states in grouped:
            inject_reminders(policy, chat, [s for s in states if not s.spec.conversation])
        next_user_turns(grouped, chat, engine, simulators, sampling)
        round_index += 1
        if on_round:
            on_round(round_index, sum(s.generated for _, states in grouped for s in states))
    return [finished[index] for index in range(len(grouped))]


def inject_reminders(policy: Policy, chat: ChatFormat, states: list[SampleState]) -> None:
    """The policy's reminders at a round boundary, for the single replies still going."""
    boundary = [s for s in states if not s.done]
    for index, ids in policy.inject(chat, boundary).items():
        boundary[index].append(ids, "injected", "reminder", chat.tokenizer.decode(ids))


def _start_states(
    policy: Policy, engine: Engine, chat: ChatFormat, specs: list[SampleSpec], budget: int
) -> list[SampleState]:
    states = [SampleState(spec=s, prompt_ids=chat.prompt_ids(s.system, s.user)) for s in specs]
    for state in states:
        state.counts.prompt = len(state.prompt_ids)
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
    return states


def round_request(
    policy: Policy,
    state: SampleState,
    sampling: SamplingSettings,
    budget: int,
    turn_tokens: int | None,
    context: int,
) -> GenerationRequest:
    if state.spec.conversation:  # one round per reply, cut at the context's end
        room = context - len(state.prompt_ids) - len(state.continuation)
        per_turn = (turn_tokens or budget) - state.turn_generated
        n = min(per_turn, budget - state.generated, room)
    else:
        n = policy.round_tokens(state, budget - state.generated)
    seed = None if state.spec.seed is None else state.spec.seed * 7919 + state.rounds
    return GenerationRequest(
        prompt_ids=state.prompt_ids + state.continuation,
        sampling=sampling.model_copy(update={"max_tokens": n, "seed": seed}),
        prompt_bias=state.bias,
    )


def absorb_result(
    policy: Policy,
    state: SampleState,
    chat: ChatFormat,
    request: GenerationRequest,
    result,
    budget: int,
    batch_size: int,
    turn_tokens: int | None = None,
) -> None:
    """Append one round's output to a sample and decide whether it goes on."""
    state.rounds += 1
    state.seconds += result.seconds / batch_size
    state.counts.processed += len(request.prompt_ids) + len(result.token_ids)
    if result.cached_prompt_tokens is not None:
        uncached = len(request.prompt_ids) - result.cached_prompt_tokens + len(result.token_ids)
        state.counts.processed_uncached = (state.counts.processed_uncached or 0) + uncached
    state.append(result.token_ids, "generated", "model", result.text)
    state.generated += len(result.token_ids)
    state.turn_generated += len(result.token_ids)
    if state.spec.conversation:
        _end_of_reply(state, result.finish_reason, budget, turn_tokens or budget)
    elif budget - state.generated <= 0:
        state.done, state.finish_reason = True, "length"
    elif result.finish_reason == "stop":
        if policy.continue_on_eos:
            last = state.continuation[-1] if state.continuation else None
            ids = chat.turn_ids("user", CONTINUE_TEXT, last)
            state.append(ids, "injected", "continue", CONTINUE_TEXT)
        else:
            state.done, state.finish_reason = True, "stop"


def _end_of_reply(state: SampleState, finish: str, budget: int, turn_tokens: int) -> None:
    """A conversation's reply ends at EOS or turn_tokens; the conversation ends with its last
    turn's reply (finish reason of that reply) or at the total budget (`length`). A reply cut
    short by the context goes on next round, where `stop_at_context` ends it."""
    if state.generated >= budget:
        state.done, state.finish_reason = True, "length"
        return
    if finish == "stop" or state.turn_generated >= turn_tokens:
        state.reply_over = True
        state.finish_reason = "stop" if finish == "stop" else "length"
        if state.turn >= state.spec.n_turns:
            state.done = True


def _record(
    state: SampleState, chat: ChatFormat, policy: Policy, engine: Engine
) -> GenerationRecord:
    """The sample's record; reads `state` without changing it, and shares no mutable part
    with it, so a record handed out never changes afterwards."""
    spans = {"generated": 0, "injected": 0, "restatement": 0, "user": 0, "markup": 0}
    for seg in state.segments:
        spans[seg.kind] += seg.end - seg.start
    turn_counts = (
        {"user": spans["user"], "markup": spans["markup"]} if state.spec.conversation else {}
    )
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
        policy=policy.label,
        seed=spec.seed,
        prompt_messages=messages,
        prompt_ids=list(state.prompt_ids),
        continuation_ids=list(state.continuation),
        segments=list(state.segments),
        text=chat.tokenizer.decode(state.continuation, skip_special_tokens=False),
        finish_reason=state.finish_reason,
        engine=engine.name,
        seconds=state.seconds,
        rounds=state.rounds,
        tokens=counts,
    )
