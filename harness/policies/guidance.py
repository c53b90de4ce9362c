"""Policy `guidance`: classifier-free guidance on the system prompt (docs/remedies.md). Every
request carries the chat without its system turn; the engine runs both rows in one batch
(`harness.engines.guidance`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from harness.capabilities import Capability
from harness.config.policy_specs import PolicySpecBase
from harness.engines.base import Engine, Guidance
from harness.policies.base import Policy, SampleState, register_policy
from harness.policies.steering import steer
from harness.text.chat import ChatFormat


class GuidancePolicy(PolicySpecBase):
    """Next-token log-probs uncond + gamma * (cond - uncond), uncond = the same continuation
    without the system turn. gamma 1 is the plain model; 1.5 is the strength Sanchez et al.
    2023 found best across their tasks."""

    name: Literal["guidance"] = "guidance"
    requires = frozenset({Capability.PAIRED_ROWS})
    gamma: float = Field(1.5, ge=0)


@register_policy(GuidancePolicy)
class GuidanceRun(Policy):
    spec: GuidancePolicy

    def prepare(self, chat: ChatFormat, engine: Engine, states: list[SampleState]) -> None:
        gamma = self.spec.gamma
        steer(self.label, states, lambda state: Guidance(
            gamma=gamma,
            uncond_prompt_ids=chat.prompt_ids(None, state.spec.user),
            prompt_len=len(state.prompt_ids),
        ))  # fmt: skip
