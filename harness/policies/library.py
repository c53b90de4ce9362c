"""The policies: none, restate, periodic, adaptive, attention_bias."""

from __future__ import annotations

from collections.abc import Callable

from harness.chat import ChatFormat
from harness.engines.base import Engine, PromptBias
from harness.errors import UserError
from harness.policies.base import Policy, SampleSpec, SampleState, reminder_ids
from harness.policies.conversation import reply_text

# (sample state, text of the last window) -> True when the window violates the task's checks
ViolationHook = Callable[[SampleState, str], bool]


class NonePolicy(Policy):
    label = "none"

    def __init__(self, continue_on_eos: bool = False) -> None:
        self.continue_on_eos = continue_on_eos


class RestatePolicy(NonePolicy):
    """The assistant turn starts with the item's restatement, which the model continues."""

    label = "restate"

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


class PeriodicPolicy(NonePolicy):
    """Every `every` generated tokens, inject the reminder into every unfinished sample; in a
    conversation (`every_turns`), before every `every_turns`-th user turn."""

    def __init__(
        self,
        every: int | None,
        placement: str = "user",
        text: str | None = None,
        continue_on_eos: bool = False,
        every_turns: int | None = None,
    ) -> None:
        if (every is None) == (every_turns is None):
            raise UserError(f"policy {self.kind}: give exactly one rhythm (every or every_turns)")
        if (every or every_turns) <= 0:
            raise UserError(f"policy every={every or every_turns}: must be a positive number")
        if placement not in ("system", "user", "inline"):
            raise UserError(f"unknown placement '{placement}' (expected system, user or inline)")
        if text is not None and not text.strip():
            raise UserError("policy reminder text is empty")
        super().__init__(continue_on_eos)
        self.every, self.placement, self.text = every, placement, text
        self.every_turns = every_turns
        rhythm = every if every is not None else f"turns{every_turns}"
        self.label = f"{self.kind}-{rhythm}-{placement}"

    kind = "periodic"

    def _text(self, spec: SampleSpec) -> str:
        text = self.text or spec.reminder
        if not text.strip():
            raise UserError(f"policy '{self.kind}': reminder text is empty")
        return text

    def prepare(self, chat: ChatFormat, engine: Engine, states: list[SampleState]) -> None:
        for state in states:  # fail before generating: bad placement / empty text
            reminder_ids(chat, self.placement, self._text(state.spec), None)

    def round_tokens(self, state: SampleState, remaining: int) -> int:
        if self.every is None:  # a between-turns policy never cuts a reply
            return remaining
        # next boundary at the next multiple of `every` generated tokens
        return min(self.every - state.generated % self.every, remaining)

    def due(self, state: SampleState) -> bool:
        if self.every is None:
            return False
        return state.generated > 0 and state.generated % self.every == 0

    def turn_reminder(self, chat: ChatFormat, state: SampleState) -> str | None:
        # user turns count from 1 (the prompt's): remind before turns k, 2k, 3k, ...
        if self.every_turns is None or (state.turn + 1) % self.every_turns:
            return None
        return self._text(state.spec)

    def inject(self, chat: ChatFormat, states: list[SampleState]) -> dict[int, list[int]]:
        return {
            i: reminder_ids(chat, self.placement, self._text(s.spec), s.continuation[-1])
            for i, s in enumerate(states)
            if self.due(s)
        }

    def injection_budget(self, chat: ChatFormat, spec: SampleSpec, max_tokens: int) -> int:
        if self.every is None:  # conversations are checked by `conversation_floor`
            return 0
        per = len(reminder_ids(chat, self.placement, self._text(spec), None)) + 1
        return per * (max_tokens // self.every)


class AdaptivePolicy(PeriodicPolicy):
    """Every `every` tokens score the last window; remind only the samples that violate. In a
    conversation (`on_turn`): score each reply whole, and remind before the next user turn
    after a failing one."""

    kind = "adaptive"

    def __init__(
        self,
        every: int | None,
        violates: ViolationHook,
        placement: str = "user",
        text: str | None = None,
        continue_on_eos: bool = False,
        on_turn: bool = False,
    ) -> None:
        if on_turn:  # the base class wants one rhythm: a turn-by-turn one here
            super().__init__(None, placement, text, continue_on_eos, every_turns=1)
            self.label = f"{self.kind}-turn-{placement}"
        else:
            super().__init__(every, placement, text, continue_on_eos)
        self.violates = violates

    def turn_reminder(self, chat: ChatFormat, state: SampleState) -> str | None:
        if self.every_turns is None or not self.violates(state, reply_text(state, chat)):
            return None
        return self._text(state.spec)

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
            if self.violates(state, chat.tokenizer.decode(window, skip_special_tokens=True)):
                out[i] = reminder_ids(
                    chat, self.placement, self._text(state.spec), state.continuation[-1]
                )
        return out


class AttentionBiasPolicy(NonePolicy):
    """Adds lam * log((P + t) / P) to the attention logits of the system-prompt keys."""

    def __init__(self, lam: float, continue_on_eos: bool = False) -> None:
        if lam < 0:
            raise UserError(f"policy attention_bias lam={lam}: must be >= 0")
        super().__init__(continue_on_eos)
        self.lam = lam
        self.label = f"attention_bias-{lam:g}"

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
