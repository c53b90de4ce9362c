"""A policy: the assistant's reply starts with the config's `text` (`{name: preface, text: ...}`
in a config's `policies:`), which the model continues. It writes into the assistant's own
message, so it needs an engine that can prefill."""

from __future__ import annotations

from typing import ClassVar, Literal

from harness.capabilities import Capability
from harness.checks.base import NonEmptyText
from harness.config.policy_specs import PolicySpecBase
from harness.engines.base import Engine
from harness.policies import Policy, SampleSpec, SampleState, register_policy
from harness.text.chat import ChatFormat


class PrefacePolicy(PolicySpecBase):
    """Start every reply with `text`."""

    name: Literal["preface"] = "preface"
    text: NonEmptyText
    # the engine must continue an assistant message the harness started
    requires: ClassVar[frozenset[Capability]] = frozenset({Capability.PREFILL})


@register_policy(PrefacePolicy)
class PrefaceRun(Policy):
    spec: PrefacePolicy

    def prepare(self, chat: ChatFormat, engine: Engine, states: list[SampleState]) -> None:
        for state in states:
            # recorded as a restatement is: text the harness put at the start of the reply
            state.append(chat.encode(self.spec.text), "restatement", "restatement", self.spec.text)

    def opening_tokens(self, chat: ChatFormat, spec: SampleSpec) -> int:
        return len(chat.encode(self.spec.text))

    def injection_budget(self, chat: ChatFormat, spec: SampleSpec, max_tokens: int) -> int:
        return self.opening_tokens(chat, spec)
