"""Restatement and re-injection policies that drive an Engine in segments. A policy is a spec
and a running class registered together (`register_policy`); `policy_run(spec, ...)` builds the
running policy of a config's spec. The built-in ones are `harness.policies.library`'s."""

from __future__ import annotations

from harness.config.policy_specs import PolicySpecBase, policy_label
from harness.policies.base import (
    Policy,
    PolicyKind,
    SampleSpec,
    SampleState,
    ViolationHook,
    policy_run,
    register_policy,
)
from harness.policies.driver import run_policies, run_policy
from harness.policies.library import (
    AdaptivePolicy,
    AdaptiveRun,
    AttentionBiasPolicy,
    AttentionBiasRun,
    NonePolicy,
    NoneRun,
    PeriodicPolicy,
    PeriodicRun,
    RestatePolicy,
    RestateRun,
)
from harness.text.chat import ChatFormat

__all__ = [
    "AdaptivePolicy",
    "AdaptiveRun",
    "AttentionBiasPolicy",
    "AttentionBiasRun",
    "ChatFormat",
    "NonePolicy",
    "NoneRun",
    "PeriodicPolicy",
    "PeriodicRun",
    "Policy",
    "PolicyKind",
    "PolicySpecBase",
    "RestatePolicy",
    "RestateRun",
    "SampleSpec",
    "SampleState",
    "ViolationHook",
    "policy_label",
    "policy_run",
    "register_policy",
    "run_policies",
    "run_policy",
]
