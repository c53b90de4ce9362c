"""What the remedies acting inside the model share (guidance, split-softmax, SpotLight, the
attention bias): they need the hf engine and a system prompt, and each sample carries its
`Steering` on every request (docs/remedies.md)."""

from __future__ import annotations

from harness.engines.base import Engine
from harness.errors import UserError
from harness.policies.base import SampleState


def check_steerable(policy: str, engine: Engine, states: list[SampleState]) -> None:
    """Refuse before the first round: another engine than hf, or a sample without a system
    prompt to steer toward."""
    if engine.name != "hf":
        raise UserError(
            f"policy {policy} needs generation.engine: hf ({engine.name} cannot change the "
            "attention or combine two forwards per token)"
        )
    for state in states:
        if not state.spec.system:
            raise UserError(f"policy {policy} needs a system prompt to steer toward")
