"""Policy `split_softmax` (Li et al. 2024, arXiv 2402.10962): per head, the system turn's
attention mass pi becomes pi^k (`harness.engines.share_steering`; docs/remedies.md)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from harness.capabilities import Capability
from harness.config.policy_specs import PolicySpecBase
from harness.engines.base import Engine, SplitSoftmax
from harness.policies.base import Policy, SampleState, register_policy
from harness.policies.steering import steer, system_turn_len
from harness.text.chat import ChatFormat


class SplitSoftmaxPolicy(PolicySpecBase):
    """k in (0, 1]: 1 is the plain model, smaller raises the prompt's share more (a share
    falling like 1/t then falls like t^-k). layers: decoder layers 0..L-1 (None: all)."""

    name: Literal["split_softmax"] = "split_softmax"
    requires = frozenset({Capability.ATTENTION_HOOKS})
    k: float = Field(0.5, gt=0, le=1)
    layers: list[int] | None = None


@register_policy(SplitSoftmaxPolicy)
class SplitSoftmaxRun(Policy):
    spec: SplitSoftmaxPolicy

    def prepare(self, chat: ChatFormat, engine: Engine, states: list[SampleState]) -> None:
        k, layers = self.spec.k, self.spec.layers
        steer(self.label, states, lambda state: SplitSoftmax(
            k=k, prefix_len=system_turn_len(chat, state), layers=layers
        ))  # fmt: skip
