"""Policy `split_softmax` (Li et al. 2024): per head, the system turn's attention mass pi
becomes pi^k (`harness.engines.share_steering`; docs/remedies.md)."""

from __future__ import annotations

from harness.config.policy_specs import SplitSoftmaxPolicy
from harness.engines.base import Engine, SplitSoftmax
from harness.policies.base import Policy, SampleState
from harness.policies.steering import check_steerable
from harness.text.chat import ChatFormat


class SplitSoftmaxRun(Policy):
    spec: SplitSoftmaxPolicy

    def prepare(self, chat: ChatFormat, engine: Engine, states: list[SampleState]) -> None:
        check_steerable(self.label, engine, states)
        for state in states:
            prefix = chat.system_prefix_len(state.spec.system or "", state.spec.user)
            state.steering = SplitSoftmax(k=self.spec.k, prefix_len=prefix, layers=self.spec.layers)
