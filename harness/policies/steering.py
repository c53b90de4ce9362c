"""What the remedies acting inside the model share (guidance, split-softmax, SpotLight): a
system prompt to steer toward; each sample carries its `Steering` on every request, which only
engines with the capability run (the planner refuses the others before the run starts,
`harness.engines.refusals`; docs/remedies.md)."""

from __future__ import annotations

from harness.errors import UserError
from harness.policies.base import SampleState


def check_steerable(policy: str, states: list[SampleState]) -> None:
    """Refuse before the first round a sample without a system prompt to steer toward."""
    for state in states:
        if not state.spec.system:
            raise UserError(f"policy {policy} needs a system prompt to steer toward")
