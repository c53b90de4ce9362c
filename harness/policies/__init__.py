"""Restatement and re-injection policies that drive an Engine in segments."""

from __future__ import annotations

from harness.chat import ChatFormat
from harness.config import policy_label
from harness.errors import UserError
from harness.policies.base import Policy, SampleSpec, SampleState
from harness.policies.driver import run_policies, run_policy
from harness.policies.library import (
    AdaptivePolicy,
    AttentionBiasPolicy,
    NonePolicy,
    PeriodicPolicy,
    RestatePolicy,
    ViolationHook,
)

__all__ = [
    "ChatFormat",
    "Policy",
    "SampleSpec",
    "SampleState",
    "make_policy",
    "run_policies",
    "run_policy",
]


def make_policy(
    spec, continue_on_eos: bool = False, violates: ViolationHook | None = None
) -> Policy:
    """Build a policy from its config model (harness.config.PolicySpec), labelled as the config
    labels it, so records, manifest and reports name a policy one way."""

    policy = _build_policy(spec, continue_on_eos, violates)
    policy.label = policy_label(spec)
    return policy


def _build_policy(spec, continue_on_eos: bool, violates: ViolationHook | None) -> Policy:
    name = spec.name
    if name == "none":
        return NonePolicy(continue_on_eos)
    if name == "restate":
        return RestatePolicy(continue_on_eos)
    if name == "periodic":
        return PeriodicPolicy(
            spec.every, spec.placement, spec.text, continue_on_eos, every_turns=spec.every_turns
        )
    if name == "adaptive":
        if violates is None:
            raise UserError("policy adaptive needs the task's checks to score windows")
        on_turn = spec.on == "turn"
        return AdaptivePolicy(
            spec.every, violates, spec.placement, spec.text, continue_on_eos, on_turn=on_turn
        )
    if name == "attention_bias":
        return AttentionBiasPolicy(spec.lam, continue_on_eos)
    raise UserError(f"unknown policy '{name}'")
