"""What the remedies acting inside the model share (guidance, split-softmax, SpotLight): a
system prompt to steer toward; each sample carries its `Steering` on every request, which only
engines with the capability run (the planner refuses the others before the run starts,
`harness.engines.refusals`; docs/remedies.md)."""

from __future__ import annotations

from collections.abc import Callable

from harness.engines.base import Steering
from harness.errors import UserError
from harness.policies.base import SampleState
from harness.text.chat import ChatFormat


def steer(
    policy: str, states: list[SampleState], steering: Callable[[SampleState], Steering]
) -> None:
    """Give each sample its `steering(state)`, refusing before the first round a sample
    without a system prompt to steer toward."""
    for state in states:
        if not state.spec.system:
            raise UserError(f"policy {policy} needs a system prompt to steer toward")
    for state in states:
        state.steering = steering(state)


def system_turn_len(chat: ChatFormat, state: SampleState) -> int:
    """The tokens of the sample's prompt up to the end of its system turn (the steered keys)."""
    return chat.system_prefix_len(state.spec.system or "", state.spec.user)
