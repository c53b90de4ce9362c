"""Policy `spotlight` (SpotLight, arXiv 2505.12025): per head, where the system turn's attention
share is below the target, it is raised to the target (`harness.engines.share_steering`;
docs/remedies.md)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from harness.capabilities import Capability
from harness.config.policy_specs import PolicySpecBase
from harness.engines.base import Engine, Spotlight
from harness.policies.base import Policy, SampleState, register_policy
from harness.policies.steering import steer, system_turn_len
from harness.text.chat import ChatFormat


class SpotlightPolicy(PolicySpecBase):
    """target in (0, 1): the share of attention the system turn (sink left out) keeps at
    least, per head and query. layers: decoder layers 0..L-1 (None: all)."""

    name: Literal["spotlight"] = "spotlight"
    requires = frozenset({Capability.ATTENTION_HOOKS})
    target: float = Field(0.1, gt=0, lt=1)
    layers: list[int] | None = None


@register_policy(SpotlightPolicy)
class SpotlightRun(Policy):
    spec: SpotlightPolicy

    def prepare(self, chat: ChatFormat, engine: Engine, states: list[SampleState]) -> None:
        target, layers = self.spec.target, self.spec.layers
        steer(self.label, states, lambda state: Spotlight(
            target=target, prefix_len=system_turn_len(chat, state), layers=layers
        ))  # fmt: skip
