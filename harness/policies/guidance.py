"""Policy `guidance`: classifier-free guidance on the system prompt (docs/remedies.md). Every
request carries the chat without its system turn; the hf engine runs both in one batch
(`harness.engines.guidance`)."""

from __future__ import annotations

from harness.config.policy_specs import GuidancePolicy
from harness.engines.base import Engine, Guidance
from harness.policies.base import Policy, SampleState
from harness.policies.steering import check_steerable
from harness.text.chat import ChatFormat


class GuidanceRun(Policy):
    """log_softmax(uncond) + gamma * (log_softmax(cond) - log_softmax(uncond)) per token."""

    spec: GuidancePolicy

    def prepare(self, chat: ChatFormat, engine: Engine, states: list[SampleState]) -> None:
        check_steerable(self.label, engine, states)
        for state in states:
            state.steering = Guidance(
                gamma=self.spec.gamma,
                uncond_prompt_ids=chat.prompt_ids(None, state.spec.user),
                prompt_len=len(state.prompt_ids),
            )
