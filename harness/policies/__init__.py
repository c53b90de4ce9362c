"""Restatement and re-injection policies that drive an Engine in segments: each policy class
(`library`) is the config's spec and the running policy in one; `bind` gives it the run's
settings before `run_policies`."""

from __future__ import annotations

from harness.chat import ChatFormat
from harness.policies.base import (
    Policy,
    SampleSpec,
    SampleState,
    policy_label,
    run_policies,
    run_policy,
)
from harness.policies.library import (
    POLICY_NAMES,
    AdaptivePolicy,
    AttentionBiasPolicy,
    NonePolicy,
    PeriodicPolicy,
    Placement,
    PolicySpec,
    RestatePolicy,
    ViolationHook,
)

__all__ = [
    "POLICY_NAMES",
    "AdaptivePolicy",
    "AttentionBiasPolicy",
    "ChatFormat",
    "NonePolicy",
    "PeriodicPolicy",
    "Placement",
    "Policy",
    "PolicySpec",
    "RestatePolicy",
    "SampleSpec",
    "SampleState",
    "ViolationHook",
    "policy_label",
    "run_policies",
    "run_policy",
]
