"""Policies drive an Engine in segments: all samples of a batch advance together, round by
round, and every span of the continuation is recorded as a segment with token offsets.

This module holds what a policy sees (specs, per-sample state, the `Policy` hooks) and the
steps of one round (its request, absorbing its result, reminders at its end); the loops that
run rounds are `driver.run_policies` and, on continuously batching engines, `continuous`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, get_args

from harness.config.policy_specs import PolicySpec, PolicySpecBase
from harness.engines.base import (
    Engine,
    GenerationRequest,
    SamplingSettings,
    Steering,
)
from harness.errors import UserError
from harness.registry import POLICIES
from harness.text.chat import ChatFormat
from harness.text.records import Segment, TokenCounts

CONTINUE_TEXT = "Continue."


@dataclass(frozen=True)
class SimulatorSpec:
    """A simulated user (harness.config.run.UserSimulator): its system prompt, how many turns it
    plays, its budget per turn, and `key` naming the engine that plays it ("" = the run's)."""

    system: str
    turns: int
    max_tokens: int = 64
    key: str = ""


@dataclass
class SampleSpec:
    """One sample to generate: a chat prompt plus the item's reminder/restatement texts, and
    for a conversation its scripted user turns 2..K (text, pressure) and simulated user. A
    replay's `logged` replies are the history of turns 1..len(logged), in place before the
    first round (`conversation.prefill_history`); the model answers the turns after them."""

    system: str | None
    user: str
    reminder: str = ""
    restatement: str = ""
    seed: int = 0
    meta: dict = field(default_factory=dict)  # model, task, item, sample... copied to records
    turns: list[tuple[str, bool]] = field(default_factory=list)
    simulator: SimulatorSpec | None = None
    logged: list[str] = field(default_factory=list)
    history: str | None = None  # a replay's: reference | own | logged (a conversation always)

    @property
    def conversation(self) -> bool:
        return bool(self.turns) or self.simulator is not None or self.history is not None

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
    # a remedy acting inside the model (attention bias, split-softmax, SpotLight, guidance):
    # the hf engine only
    steering: Steering | None = None
    # conversations: the turn under way (its user message is in place), the tokens its reply
    # has so far, and whether that reply has ended (EOS or turn_tokens)
    turn: int = 1
    turn_generated: int = 0
    reply_over: bool = False
    # the tokens this sample may generate: a conversation's total or a single reply's
    budget: int = 0

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


# (sample state, text of the last window) -> True when the window violates the task's checks
ViolationHook = Callable[[SampleState, str], bool]


class Policy:
    """A running policy: its `spec` (the settings, validated when the config loaded, and the
    label) with the run's `continue_on_eos` (a `Continue.` turn at EOS until the budget is
    spent) and `violates`, the items' window check (for the policies whose spec
    `reads_checks`). Base: generate to the budget in one round; the policies of
    `harness.policies.library` change the round length, the start of the assistant turn, and
    what is injected between rounds."""

    placement = "user"  # where a reminder goes; the reminding policies take their spec's

    def __init__(
        self,
        spec: PolicySpec,
        continue_on_eos: bool = False,
        violates: ViolationHook | None = None,
    ) -> None:
        self.spec, self.continue_on_eos = spec, continue_on_eos

    @property
    def label(self) -> str:
        return self.spec.label

    @property
    def between_turns(self) -> bool:
        return self.spec.between_turns

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

    def item_problem(self, item: Any) -> str | None:
        """Why this policy cannot run a task item (`harness.config.suites.TaskItem`), checked
        when the run is planned; None: it can."""
        return None

    def opening_tokens(self, chat: ChatFormat, spec: SampleSpec) -> int:
        """Tokens the policy starts the assistant turn with (a restatement)."""
        return 0

    def turn_reminder(self, chat: ChatFormat, state: SampleState) -> str | None:
        """Conversations: the reminder to add before user turn `state.turn + 1` (None: none),
        at `placement`. Called once per turn, after the reply to `state.turn` ended."""
        return None


@dataclass(frozen=True)
class PolicyKind:
    """One registered policy: the spec a config names it by, and the class that runs it."""

    spec: type[PolicySpecBase]
    run: type[Policy]


RunClass = TypeVar("RunClass", bound=type[Policy])


def register_policy(spec: type[PolicySpecBase]) -> Callable[[RunClass], RunClass]:
    """Class decorator on a running policy: configs may name `spec` (by its `name` Literal),
    and `policy_run` builds the decorated class for it."""
    names = get_args(spec.model_fields["name"].annotation)
    if len(names) != 1 or not isinstance(names[0], str):
        raise TypeError(f"{spec.__name__}.name must be a Literal of the policy's one name")

    def decorate(run: RunClass) -> RunClass:
        POLICIES.add(names[0], PolicyKind(spec, run))
        return run

    return decorate


def policy_run(
    spec: PolicySpec, continue_on_eos: bool = False, violates: ViolationHook | None = None
) -> Policy:
    """The running policy of a spec, with the run's settings: `continue_on_eos`, and
    `violates`, the items' window check (the policies whose spec `reads_checks` remind on)."""
    return POLICIES.lookup(spec.name).run(spec, continue_on_eos, violates)


def reminder_ids(chat: ChatFormat, placement: str, text: str, last: int | None) -> list[int]:
    if placement == "inline":
        return chat.inline_ids(text)
    if placement in ("system", "user"):
        body = text if placement == "system" else f"Reminder: {text} {CONTINUE_TEXT}"
        return chat.turn_ids(placement, body, last)
    raise UserError(f"unknown placement '{placement}' (expected system, user or inline)")


def inject_reminders(policy: Policy, chat: ChatFormat, states: list[SampleState]) -> None:
    """The policy's reminders at a round boundary, for the single replies still going."""
    boundary = [s for s in states if not s.done]
    for index, ids in policy.inject(chat, boundary).items():
        boundary[index].append(ids, "injected", "reminder", chat.tokenizer.decode(ids))


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
        steering=state.steering,
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
    if result.api_tokens is not None:  # engine chat: what the endpoint bills
        counts = state.counts
        counts.api_input = (counts.api_input or 0) + result.api_tokens[0]
        counts.api_cached_input = (counts.api_cached_input or 0) + result.api_tokens[1]
        counts.api_output = (counts.api_output or 0) + result.api_tokens[2]
    state.append(result.token_ids, "generated", "model", result.text)
    state.generated += len(result.token_ids)
    state.turn_generated += len(result.token_ids)
    if result.finish_reason not in ("stop", "length"):
        # a request failed for good, or the endpoint refused or filtered the reply (engine
        # chat): the sample ends here with that finish reason; asking again would not change it
        state.done, state.finish_reason = True, result.finish_reason
    elif state.spec.conversation:
        _end_of_reply(state, result.finish_reason, budget, turn_tokens or budget)
    elif budget - state.generated <= 0:
        state.done, state.finish_reason = True, "length"
    elif result.finish_reason == "content_filter":  # the provider withheld the rest
        state.done, state.finish_reason = True, "content_filter"
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
        _mark_finish(state, "length")
        return
    if finish in ("stop", "content_filter") or state.turn_generated >= turn_tokens:
        state.reply_over = True
        state.finish_reason = finish if finish in ("stop", "content_filter") else "length"
        _mark_finish(state, state.finish_reason)
        if state.turn >= state.spec.n_turns:
            state.done = True


def _mark_finish(state: SampleState, finish: str) -> None:
    """The reply's last span (the one just generated) records why the reply ended."""
    last = state.segments[-1]
    if last.kind == "generated":
        state.segments[-1] = last.model_copy(update={"finish": finish})
