"""The running policies: none, restate, periodic, adaptive, attention_bias.

Each runs one spec of `harness.config.policy_specs` (`NoneRun` runs a `NonePolicy`, ...) and reads
its settings from it: the spec validated them when the config loaded and names the policy
(`label`), so nothing here checks or labels again. `policy_run(spec, continue_on_eos,
violates)` builds the one for a spec.
"""

from __future__ import annotations

from collections.abc import Callable

from harness.config.policy_specs import (
    AdaptivePolicy,
    AttentionBiasPolicy,
    GuidancePolicy,
    NonePolicy,
    PeriodicPolicy,
    PolicySpec,
    RestatePolicy,
    SplitSoftmaxPolicy,
    SpotlightPolicy,
)
from harness.engines.base import Engine, PromptBias
from harness.errors import UserError
from harness.policies.base import Policy, SampleSpec, SampleState, reminder_ids
from harness.policies.conversation import reply_text
from harness.policies.guidance import GuidanceRun
from harness.policies.split_softmax import SplitSoftmaxRun
from harness.policies.spotlight import SpotlightRun
from harness.policies.steering import check_steerable
from harness.text.chat import ChatFormat

# (sample state, text of the last window) -> True when the window violates the task's checks
ViolationHook = Callable[[SampleState, str], bool]


class NoneRun(Policy):
    """One round to the budget (`Continue.` turns at EOS with continue_on_eos)."""


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


class PeriodicRun(_RemindingRun):
    """Every `every` generated tokens, the reminder into every unfinished sample; in a
    conversation (`every_turns`), before every `every_turns`-th user turn."""

    spec: PeriodicPolicy

    def turn_due(self, chat: ChatFormat, state: SampleState) -> bool:
        # user turns count from 1 (the prompt's): remind before turns k, 2k, 3k, ...
        return (state.turn + 1) % self.spec.every_turns == 0

    def inject(self, chat: ChatFormat, states: list[SampleState]) -> dict[int, list[int]]:
        return {i: self._reminder_ids(chat, s) for i, s in enumerate(states) if self.due(s)}


class AdaptiveRun(_RemindingRun):
    """Every `every` tokens score the last `every` generated tokens (`violates`), and remind
    only the samples that violate; in a conversation (`on: turn`), score each reply whole and
    remind before the user turn after a failing one."""

    spec: AdaptivePolicy

    def __init__(
        self, spec: AdaptivePolicy, continue_on_eos: bool, violates: ViolationHook
    ) -> None:
        super().__init__(spec, continue_on_eos)
        self.violates = violates

    def turn_due(self, chat: ChatFormat, state: SampleState) -> bool:
        return self.violates(state, reply_text(state, chat))

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
            if self.violates(state, chat.tokenizer.decode(window, skip_special_tokens=True)):
                out[i] = self._reminder_ids(chat, state)
        return out


class AttentionBiasRun(Policy):
    """Adds lam * log((P + t) / P) (schedule log) or lam (constant) to the attention logits of
    the system-prompt keys."""

    spec: AttentionBiasPolicy

    def prepare(self, chat: ChatFormat, engine: Engine, states: list[SampleState]) -> None:
        check_steerable("attention_bias", engine, states)
        for state in states:
            prefix = chat.system_prefix_len(state.spec.system or "", state.spec.user)
            state.steering = PromptBias(
                lam=self.spec.lam, schedule=self.spec.schedule, prefix_len=prefix
            )


_RUNS: dict[type, type[Policy]] = {
    NonePolicy: NoneRun,
    RestatePolicy: RestateRun,
    PeriodicPolicy: PeriodicRun,
    AttentionBiasPolicy: AttentionBiasRun,
    GuidancePolicy: GuidanceRun,
    SplitSoftmaxPolicy: SplitSoftmaxRun,
    SpotlightPolicy: SpotlightRun,
}


def policy_run(
    spec: PolicySpec, continue_on_eos: bool = False, violates: ViolationHook | None = None
) -> Policy:
    """The running policy of a spec, with the run's settings: `continue_on_eos`, and for
    adaptive `violates`, the items' window check it reminds on."""
    if isinstance(spec, AdaptivePolicy):
        if violates is None:
            raise UserError("policy adaptive needs the task's checks to score windows")
        return AdaptiveRun(spec, continue_on_eos, violates)
    return _RUNS[type(spec)](spec, continue_on_eos)
