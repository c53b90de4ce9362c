"""The one extension idiom (harness.registry): a policy registered from outside the built-in
module validates in configs, is refused by the one refusal place on an engine that lacks the
capability it declares, and puts the items' checks in its cache key only when it says it reads
them; engines and check types come from the same registry."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import ClassVar, Literal

import pytest
from pydantic import ValidationError

from harness.capabilities import Capability
from harness.checks.text import RegexCheck
from harness.config.policy_specs import PolicySpecBase
from harness.config.run import RunConfig
from harness.engines.refusals import refusals, refuse_unsupported
from harness.errors import UserError
from harness.models import ResolvedModel
from harness.policies import Policy, register_policy
from harness.registry import CHECKS, ENGINES, POLICIES
from harness.units.run_units import generation_key


@pytest.fixture
def hooked_policy():
    """A policy defined here, as a plugin defines one: its spec needs attention hooks."""
    restore = POLICIES.swap({})

    class HookedPolicy(PolicySpecBase):
        name: Literal["hooked"] = "hooked"
        strength: float = 1.0
        requires: ClassVar[frozenset[Capability]] = frozenset({Capability.ATTENTION_HOOKS})

    @register_policy(HookedPolicy)
    class HookedRun(Policy):
        pass

    yield HookedPolicy
    restore()


def _config(policies, engine="vllm", **changes) -> RunConfig:
    data = {"name": "t", "models": ["m"], "suites": ["s.yaml"], "policies": policies,
            "generation": {"engine": engine}, **changes}  # fmt: skip
    return RunConfig.model_validate(data)


def test_a_registered_policy_validates_and_a_typo_gets_the_nearest_name(hooked_policy):
    config = _config(["none", {"name": "hooked", "strength": 2}], engine="hf")
    assert isinstance(config.policies[1], hooked_policy)
    assert config.policies[1].label == "hooked-2"
    assert config.model_dump()["policies"][1] == {"name": "hooked", "strength": 2.0}
    with pytest.raises(ValidationError, match="unknown policy: 'hoked'.*did you mean 'hooked'"):
        _config([{"name": "hoked"}])
    with pytest.raises(ValidationError, match=r"policies\.0\.hooked\.strength"):
        _config([{"name": "hooked", "strength": "x"}])


def test_the_one_refusal_names_the_engine_the_capability_and_the_part(hooked_policy):
    refuse_unsupported(_config([{"name": "hooked"}], engine="hf"))  # hf has attention hooks
    with pytest.raises(UserError) as info:
        refuse_unsupported(_config(["none", {"name": "hooked"}]))
    assert str(info.value) == (
        "engine vllm cannot do attention hooks (policy hooked); use generation.engine hf"
    )
    biased = _config([{"name": "attention_bias", "lam": 1}], engine="openai")
    assert refusals(biased) == [("attention hooks (policy attention_bias)", "generation.engine hf")]


def test_checks_enter_the_cache_key_only_of_a_policy_that_reads_them(hooked_policy):
    model = ResolvedModel(name="m", source="tiny", path=Path("."), content_key="k")

    def key(policy: str | dict, pattern: str) -> str:
        config = _config([policy], engine="hf")
        items = [
            SimpleNamespace(
                item=SimpleNamespace(checks=[RegexCheck(type="regex_must", pattern=pattern)])
            )
        ]
        return generation_key(config, model, config.policies[0], [], items)  # fmt: skip

    assert key({"name": "hooked"}, "a") == key({"name": "hooked"}, "b")
    adaptive = {"name": "adaptive", "every": 8}
    assert key(adaptive, "a") != key(adaptive, "b")


def test_every_extension_point_lists_its_built_in_entries():
    assert {"none", "restate", "periodic", "adaptive", "attention_bias"} <= set(POLICIES)
    assert {"vllm", "hf", "openai", "chat"} <= set(ENGINES)
    assert {"regex_must", "language", "judge"} <= set(CHECKS)
    assert Capability.ATTENTION_HOOKS in ENGINES["hf"].capabilities
    assert Capability.ATTENTION_HOOKS not in ENGINES["vllm"].capabilities
