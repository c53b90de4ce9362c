"""Restatement and re-injection policies that drive an Engine in segments: the running policy
of a config spec (`harness.config.policy_specs`, re-exported here) is `policy_run(spec, ...)`."""

from __future__ import annotations

from harness.config.policy_specs import (
    AdaptivePolicy,
    AttentionBiasPolicy,
    NonePolicy,
    PeriodicPolicy,
    RestatePolicy,
    policy_label,
)
from harness.policies.base import Policy, SampleSpec, SampleState
from harness.policies.driver import run_policies, run_policy
from harness.policies.library import (
    AdaptiveRun,
    AttentionBiasRun,
    NoneRun,
    PeriodicRun,
    RestateRun,
    ViolationHook,
    policy_run,
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
    "RestatePolicy",
    "RestateRun",
    "SampleSpec",
    "SampleState",
    "ViolationHook",
    "policy_label",
    "policy_run",
    "run_policies",
    "run_policy",
]
