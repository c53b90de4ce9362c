"""The policies: none, restate, periodic, adaptive, attention_bias.

Each class is at once the config's spec (a pydantic model of `policies:` and
`conversation_policies:`, validated there and only there) and the policy that drives
generation (`harness.policies.base.Policy`). `bind` gives it the run's settings
(`continue_on_eos`, and the window check adaptive reminds on); `label` names it everywhere.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal, Self

from pydantic import Field, PrivateAttr, model_validator

from harness.chat import ChatFormat
from harness.checks.base import NonEmptyText
from harness.engines.base import Engine, PromptBias
from harness.errors import UserError
from harness.policies.base import Policy, SampleSpec, SampleState, reminder_ids
from harness.policies.conversation import reply_text

# (sample state, text of the last window) -> True when the window violates the task's checks
ViolationHook = Callable[[SampleState, str], bool]
Placement = Literal["system", "user", "inline"]


class NonePolicy(Policy):
    name: Literal["none"] = "none"


class RestatePolicy(Policy):
    """The assistant turn starts with the item's restatement, which the model continues."""

    name: Literal["restate"] = "restate"

    def prepare(self, chat: ChatFormat, engine: Engine, states: list[SampleState]) -> None:
        for state in states:
            text = state.spec.restatement
            if not text.strip():
                raise UserError("policy 'restate': the task item has no restatement text")
            ids = chat.encode(text)
            state.append(ids, "restatement", "restatement", text)
            state.counts.restated = 0  # counted from segments when the record is built

    def injection_budget(self, chat: ChatFormat, spec: SampleSpec, max_tokens: int) -> int:
        return len(chat.encode(spec.restatement))


class _Reminding(Policy):
    """What periodic and adaptive share: a reminder (`text`, else the item's) at `placement`,
    every `every` generated tokens within one reply, or between the turns of a conversation
    (`between_turns`, decided by `turn_due`)."""

    every: int | None = Field(None, gt=0)
    placement: Placement = "user"
    text: NonEmptyText | None = None  # None: the task item's reminder

    def _check_rhythm(self, turn_rhythm: Any, what: str) -> None:
        if (self.every is None) == (turn_rhythm is None):
            raise ValueError(f"{self.name} needs exactly one of every (tokens) or {what}")
        if turn_rhythm is not None and self.placement == "inline":
            raise ValueError(f"{what} reminds between turns: placement system or user")

    def reminder_text(self, spec: SampleSpec) -> str:
        text = self.text or spec.reminder
        if not text.strip():
            raise UserError(f"policy '{self.name}': reminder text is empty")
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
        if self.every is None:  # a between-turns policy never cuts a reply
            return remaining
        # next boundary at the next multiple of `every` generated tokens
        return min(self.every - state.generated % self.every, remaining)

    def due(self, state: SampleState) -> bool:
        if self.every is None:
            return False
        return state.generated > 0 and state.generated % self.every == 0

    def _reminder_ids(self, chat: ChatFormat, state: SampleState) -> list[int]:
        text = self.reminder_text(state.spec)
        return reminder_ids(chat, self.placement, text, state.continuation[-1])

    def injection_budget(self, chat: ChatFormat, spec: SampleSpec, max_tokens: int) -> int:
        if self.every is None:  # conversations are checked by `conversation_floor`
            return 0
        per = len(reminder_ids(chat, self.placement, self.reminder_text(spec), None)) + 1
        return per * (max_tokens // self.every)


class PeriodicPolicy(_Reminding):
    """Within one reply: a reminder every `every` generated tokens, into every unfinished
    sample. In a conversation: before every `every_turns`-th user turn (turns 2..K; turn 1 is
    the prompt)."""

    name: Literal["periodic"] = "periodic"
    every_turns: int | None = Field(None, gt=0)

    @model_validator(mode="after")
    def _one_rhythm(self) -> PeriodicPolicy:
        self._check_rhythm(self.every_turns, "every_turns")
        return self

    @property
    def between_turns(self) -> bool:
        return self.every_turns is not None

    def turn_due(self, chat: ChatFormat, state: SampleState) -> bool:
        # user turns count from 1 (the prompt's): remind before turns k, 2k, 3k, ...
        return (state.turn + 1) % self.every_turns == 0

    def inject(self, chat: ChatFormat, states: list[SampleState]) -> dict[int, list[int]]:
        return {i: self._reminder_ids(chat, s) for i, s in enumerate(states) if self.due(s)}


class AdaptivePolicy(_Reminding):
    """Within one reply: every `every` tokens score the last `every` generated tokens, and
    remind only the samples that violate. In a conversation (`on: turn`): score each reply
    whole, and remind before the user turn that follows a failing one."""

    name: Literal["adaptive"] = "adaptive"
    on: Literal["turn"] | None = None
    _violates: ViolationHook | None = PrivateAttr(None)

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

    @property
    def between_turns(self) -> bool:
        return self.on is not None

    def bind(self, continue_on_eos: bool = False, violates: ViolationHook | None = None) -> Self:
        if violates is None:
            raise UserError("policy adaptive needs the task's checks to score windows")
        bound = super().bind(continue_on_eos)
        bound._violates = violates
        return bound

    def _fails(self, state: SampleState, text: str) -> bool:
        assert self._violates is not None, "an adaptive policy runs bound (`bind`)"
        return self._violates(state, text)

    def turn_due(self, chat: ChatFormat, state: SampleState) -> bool:
        return self._fails(state, reply_text(state, chat))

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
            ][-self.every :]
            if self._fails(state, chat.tokenizer.decode(window, skip_special_tokens=True)):
                out[i] = self._reminder_ids(chat, state)
        return out


class AttentionBiasPolicy(Policy):
    """Adds lam * log((P + t) / P) to the attention logits of the system-prompt keys."""

    name: Literal["attention_bias"] = "attention_bias"
    lam: float = Field(ge=0)

    def prepare(self, chat: ChatFormat, engine: Engine, states: list[SampleState]) -> None:
        if engine.name != "hf":
            raise UserError(
                "policy attention_bias needs generation.engine: hf (vLLM kernels take no bias)"
            )
        for state in states:
            if not state.spec.system:
                raise UserError("policy attention_bias needs a system prompt to bias toward")
            prefix = chat.system_prefix_len(state.spec.system, state.spec.user)
            state.bias = PromptBias(lam=self.lam, prefix_len=prefix)


PolicySpec = Annotated[
    NonePolicy | RestatePolicy | PeriodicPolicy | AdaptivePolicy | AttentionBiasPolicy,
    Field(discriminator="name"),
]
POLICY_NAMES = ("none", "restate", "periodic", "adaptive", "attention_bias")
