"""The built-in policies: none, restate, periodic, adaptive, attention_bias.

Each is a spec (its settings, validated when the config loads, and its label) and the running
class that reads them, registered together by `@register_policy(Spec)`; a new policy is one
such module (docs/architecture.md, "Adding a policy"). `policy_run(spec, ...)` builds the
running policy of a spec.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from harness.capabilities import Capability
from harness.checks.base import NonEmptyText
from harness.config.policy_specs import Placement, PolicySpecBase
from harness.engines.base import Engine, PromptBias
from harness.errors import UserError
from harness.policies.base import (
    Policy,
    SampleSpec,
    SampleState,
    ViolationHook,
    register_policy,
    reminder_ids,
)
from harness.policies.conversation import reply_text
from harness.text.chat import ChatFormat


class NonePolicy(PolicySpecBase):
    name: Literal["none"] = "none"


class RestatePolicy(PolicySpecBase):
    name: Literal["restate"] = "restate"
    requires = frozenset({Capability.PREFILL})  # the assistant turn starts with its text


class _Reminding(PolicySpecBase):
    every: int | None = Field(None, gt=0)
    placement: Placement = "user"
    text: NonEmptyText | None = None  # None: the task item's reminder

    def needs(self) -> dict[Capability, str]:
        where = f"policy {self.name}, placement {self.placement}"
        if self.placement == "inline":  # a reminder inside the assistant's own message
            return {Capability.PREFILL: where}
        if self.placement == "system":
            return {Capability.LATER_SYSTEM_MESSAGES: where}
        return {}

    def _check_rhythm(self, turn_rhythm: Any, what: str) -> None:
        if (self.every is None) == (turn_rhythm is None):
            raise ValueError(f"{self.name} needs exactly one of every (tokens) or {what}")
        if turn_rhythm is not None and self.placement == "inline":
            raise ValueError(f"{what} reminds between turns: placement system or user")


class PeriodicPolicy(_Reminding):
    """Within one reply: a reminder every `every` generated tokens. In a conversation: before
    every `every_turns`-th user turn (turns 2..K; turn 1 is the prompt)."""

    name: Literal["periodic"] = "periodic"
    every_turns: int | None = Field(None, gt=0)

    @model_validator(mode="after")
    def _one_rhythm(self) -> PeriodicPolicy:
        self._check_rhythm(self.every_turns, "every_turns")
        return self

    @property
    def between_turns(self) -> bool:
        return self.every_turns is not None


class AdaptivePolicy(_Reminding):
    """Within one reply: every `every` tokens, remind when the last `every` tokens fail. In a
    conversation (`on: turn`): remind before the user turn that follows a failing reply."""

    name: Literal["adaptive"] = "adaptive"
    on: Literal["turn"] | None = None
    reads_checks = True  # the items' checks decide when it reminds

    @model_validator(mode="before")
    @classmethod
    def _yaml_on(cls, data: Any) -> Any:
        # YAML 1.1 reads the bare key `on` as the boolean true
        if isinstance(data, dict) and True in data:
            data = {("on" if k is True else k): v for k, v in data.items()}
        return data

    @model_validator(mode="after")
    def _one_rhythm(self) -> AdaptivePolicy:
        self._check_rhythm(self.on, "on: turn")
        return self

    def key_params(self) -> dict[str, str]:
        if not self.between_turns:
            return {}
        # since adaptive judged ended replies on every code-checkable rule (not only the
        # window-scope ones), its conversations differ: records made before are not reused
        return {"reminds_on": "every code-checkable rule of the ended reply"}

    @property
    def between_turns(self) -> bool:
        return self.on is not None


class AttentionBiasPolicy(PolicySpecBase):
    """lam * log((P + t) / P) on the system turn's attention logits (schedule log, dilution
    compensation), or lam at every t (schedule constant, InstABoost's fixed boost)."""

    name: Literal["attention_bias"] = "attention_bias"
    requires = frozenset({Capability.ATTENTION_HOOKS})  # vLLM kernels take no bias
    lam: float = Field(ge=0)
    schedule: Literal["log", "constant"] = "log"


@register_policy(NonePolicy)
class NoneRun(Policy):
    """One round to the budget (`Continue.` turns at EOS with continue_on_eos)."""


@register_policy(RestatePolicy)
class RestateRun(Policy):
    """The assistant turn starts with the item's restatement, which the model continues."""

    def prepare(self, chat: ChatFormat, engine: Engine, states: list[SampleState]) -> None:
        for state in states:
            text = state.spec.restatement
            if not text.strip():
                raise UserError("policy 'restate': the task item has no restatement text")
            ids = chat.encode(text)
            state.append(ids, "restatement", "restatement", text)
            state.counts.restated = 0  # counted from segments when the record is built

    def injection_budget(self, chat: ChatFormat, spec: SampleSpec, max_tokens: int) -> int:
        return self.opening_tokens(chat, spec)

    def item_problem(self, item: Any) -> str | None:
        if item.is_replay:
            return (
                "a replay's first reply is answered from the log's history, not prefilled: "
                "drop the policy"
            )
        if not item.restatement:
            return "the item has no `restatement` (add one to the suite, or drop the policy)"
        return None

    def opening_tokens(self, chat: ChatFormat, spec: SampleSpec) -> int:
        return len(chat.encode(spec.restatement))


class _RemindingRun(Policy):
    """What periodic and adaptive share: the reminder (the spec's `text`, else the item's) at
    the spec's `placement`, every `every` generated tokens within one reply, or between the
    turns of a conversation when `turn_due`."""

    spec: PeriodicPolicy | AdaptivePolicy

    @property
    def placement(self) -> str:
        return self.spec.placement

    def reminder_text(self, spec: SampleSpec) -> str:
        text = self.spec.text or spec.reminder
        if not text.strip():
            raise UserError(f"policy '{self.spec.name}': reminder text is empty")
        return text

    def turn_due(self, chat: ChatFormat, state: SampleState) -> bool:
        raise NotImplementedError

    def turn_reminder(self, chat: ChatFormat, state: SampleState) -> str | None:
        if not self.between_turns or not self.turn_due(chat, state):
            return None
        return self.reminder_text(state.spec)

    def prepare(self, chat: ChatFormat, engine: Engine, states: list[SampleState]) -> None:
        for state in states:  # fail before generating: bad placement / empty text
            reminder_ids(chat, self.placement, self.reminder_text(state.spec), None)

    def round_tokens(self, state: SampleState, remaining: int) -> int:
        every = self.spec.every
        if every is None:  # a between-turns policy never cuts a reply
            return remaining
        # next boundary at the next multiple of `every` generated tokens
        return min(every - state.generated % every, remaining)

    def due(self, state: SampleState) -> bool:
        every = self.spec.every
        return every is not None and state.generated > 0 and state.generated % every == 0

    def _reminder_ids(self, chat: ChatFormat, state: SampleState) -> list[int]:
        text = self.reminder_text(state.spec)
        return reminder_ids(chat, self.placement, text, state.continuation[-1])

    def injection_budget(self, chat: ChatFormat, spec: SampleSpec, max_tokens: int) -> int:
        if self.spec.every is None:  # conversations are checked by `conversation_floor`
            return 0
        per = len(reminder_ids(chat, self.placement, self.reminder_text(spec), None)) + 1
        return per * (max_tokens // self.spec.every)


@register_policy(PeriodicPolicy)
class PeriodicRun(_RemindingRun):
    """Every `every` generated tokens, the reminder into every unfinished sample; in a
    conversation (`every_turns`), before every `every_turns`-th user turn."""

    spec: PeriodicPolicy

    def turn_due(self, chat: ChatFormat, state: SampleState) -> bool:
        # user turns count from 1 (the prompt's): remind before turns k, 2k, 3k, ...
        return (state.turn + 1) % self.spec.every_turns == 0

    def inject(self, chat: ChatFormat, states: list[SampleState]) -> dict[int, list[int]]:
        return {i: self._reminder_ids(chat, s) for i, s in enumerate(states) if self.due(s)}


@register_policy(AdaptivePolicy)
class AdaptiveRun(_RemindingRun):
    """Every `every` tokens score the last `every` generated tokens (`violates`), and remind
    only the samples that violate; in a conversation (`on: turn`), score each reply whole and
    remind before the user turn after a failing one."""

    spec: AdaptivePolicy

    def __init__(
        self,
        spec: AdaptivePolicy,
        continue_on_eos: bool = False,
        violates: ViolationHook | None = None,
    ) -> None:
        if violates is None:
            raise UserError("policy adaptive needs the task's checks to score windows")
        super().__init__(spec, continue_on_eos, violates)
        self.check_window: ViolationHook = violates

    def turn_due(self, chat: ChatFormat, state: SampleState) -> bool:
        return self.check_window(state, reply_text(state, chat))

    def inject(self, chat: ChatFormat, states: list[SampleState]) -> dict[int, list[int]]:
        out = {}
        for i, state in enumerate(states):
            if not self.due(state):
                continue
            window = [
                tok
                for seg in state.segments
                if seg.kind == "generated"
                for tok in state.continuation[seg.start : seg.end]
            ][-self.spec.every :]
            if self.check_window(state, chat.tokenizer.decode(window, skip_special_tokens=True)):
                out[i] = self._reminder_ids(chat, state)
        return out


@register_policy(AttentionBiasPolicy)
class AttentionBiasRun(Policy):
    """Adds lam * log((P + t) / P) (schedule log) or lam (constant) to the attention logits of
    the system-prompt keys."""

    spec: AttentionBiasPolicy

    def prepare(self, chat: ChatFormat, engine: Engine, states: list[SampleState]) -> None:
        for state in states:
            if not state.spec.system:
                raise UserError("policy attention_bias needs a system prompt to bias toward")
            prefix = chat.system_prefix_len(state.spec.system, state.spec.user)
            state.steering = PromptBias(
                lam=self.spec.lam, schedule=self.spec.schedule, prefix_len=prefix
            )
