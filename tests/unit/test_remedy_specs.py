"""The remedies' specs: defaults from the papers, bounds, labels (the bias's log schedule keeps
its old label), the capabilities the planner checks, and a config naming them validates."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from harness.capabilities import Capability
from harness.policies.guidance import GuidancePolicy
from harness.policies.library import AttentionBiasPolicy
from harness.policies.split_softmax import SplitSoftmaxPolicy
from harness.policies.spotlight import SpotlightPolicy


def test_defaults_and_labels():
    assert GuidancePolicy().gamma == 1.5 and GuidancePolicy().label == "guidance-1.5"
    assert SplitSoftmaxPolicy().label == "split_softmax-0.5"
    assert SplitSoftmaxPolicy(k=0.25, layers=[3, 4]).label == "split_softmax-0.25-L3.4"
    assert SpotlightPolicy().label == "spotlight-0.1"
    assert AttentionBiasPolicy(lam=1.0).label == "attention_bias-1"  # unchanged: caches, gates
    assert AttentionBiasPolicy(lam=1.0, schedule="constant").label == "attention_bias-1-constant"


@pytest.mark.parametrize(
    ("cls", "bad"),
    [
        (GuidancePolicy, {"gamma": -1}),
        (SplitSoftmaxPolicy, {"k": 0}),
        (SplitSoftmaxPolicy, {"k": 1.5}),
        (SpotlightPolicy, {"target": 1.0}),
        (AttentionBiasPolicy, {"lam": 1, "schedule": "linear"}),
    ],
)
def test_out_of_range_settings_are_refused(cls, bad):
    with pytest.raises(ValidationError):
        cls(**bad)


def test_needs_what_only_hf_has():
    assert set(GuidancePolicy().needs()) == {Capability.PAIRED_ROWS}
    assert set(SplitSoftmaxPolicy().needs()) == {Capability.ATTENTION_HOOKS}
    assert set(SpotlightPolicy().needs()) == {Capability.ATTENTION_HOOKS}


def test_a_config_names_them_through_the_registry():
    from harness.config.run import RunConfig

    config = RunConfig.model_validate({
        "name": "r", "models": ["m"], "suites": ["s.yaml"],
        "policies": ["none", {"name": "guidance", "gamma": 2}, {"name": "split_softmax"},
                     {"name": "spotlight", "target": 0.3}],
        "generation": {"engine": "hf", "max_tokens": 128},
    })  # fmt: skip
    assert config.policy_labels() == ["none", "guidance-2", "split_softmax-0.5", "spotlight-0.3"]
