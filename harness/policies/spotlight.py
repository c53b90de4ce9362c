"""Policy `spotlight` (SpotLight, 2025): per head, where the system turn's attention share is
below the target, it is raised to the target (`harness.engines.share_steering`;
docs/remedies.md)."""

from __future__ import annotations

from harness.config.policy_specs import SpotlightPolicy
from harness.engines.base import Engine, Spotlight
from harness.policies.base import Policy, SampleState
from harness.policies.steering import check_steerable
from harness.text.chat import ChatFormat


class SpotlightRun(Policy):
    spec: SpotlightPolicy

    def prepare(self, chat: ChatFormat, engine: Engine, states: list[SampleState]) -> None:
        check_steerable(self.label, engine, states)
        for state in states:
            prefix = chat.system_prefix_len(state.spec.system or "", state.spec.user)
            state.steering = Spotlight(
                target=self.spec.target, prefix_len=prefix, layers=self.spec.layers
            )
