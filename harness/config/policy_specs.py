"""What a run config's policies (`policies:` and `conversation_policies:`) are: `PolicySpec`,
any registered policy's spec (`harness.registry.POLICIES`: each policy's module defines its spec
and its running class together, `harness.policies.library` for the built-in ones), and `label`,
the one name of a policy everywhere (records, manifest, reports)."""

from __future__ import annotations

import hashlib
from typing import ClassVar, Literal

from harness.capabilities import Capability
from harness.config.schema import Strict
from harness.registry import POLICIES, registered

Placement = Literal["system", "user", "inline"]


class PolicySpecBase(Strict):
    """What every policy spec is: its `name` (a Literal of one name, the registry's key), the
    engine capabilities it needs, and what enters its cache key besides its own fields.

    A policy is one module (`harness.policies.library` for the built-in ones, or a plugin's):
    a subclass of this with its settings, and its running class decorated with
    `@register_policy(TheSpec)` (docs/architecture.md, "Adding a policy")."""

    name: str
    # the engine capabilities every instance needs (`needs` adds those its settings need)
    requires: ClassVar[frozenset[Capability]] = frozenset()
    # True when the items' checks decide what the policy does (it reminds on failing
    # windows), so they enter its generation units' cache key (`key_params`: anything else)
    reads_checks: ClassVar[bool] = False

    @property
    def label(self) -> str:
        return policy_label(self)

    @property
    def between_turns(self) -> bool:
        """True when the policy reminds between the turns of a conversation."""
        return False

    def key_params(self) -> dict[str, str]:
        """Parameters its generation units' cache key holds besides its fields (a change of
        what the policy does that its settings do not show); {}: none."""
        return {}

    def needs(self) -> dict[Capability, str]:
        """The engine capabilities this policy needs -> what needs each (for the refusal)."""
        return dict.fromkeys(self.requires, f"policy {self.name}")


# any registered policy spec, told apart by its `name`
PolicySpec = registered(POLICIES, "name", PolicySpecBase)

# the label of the `none` policy: the baseline every comparison is made against, in the
# result files
BASELINE = "none"


def policy_label(policy: PolicySpecBase) -> str:
    """Short stable label used in records and reports, derived from every field that changes
    what the policy does, e.g. `periodic-128-user`, `attention_bias-1` (numbers as `:g` writes
    them, so lam 1.0 and 1 label alike); between turns `periodic-turns2-user`,
    `adaptive-turn-user`. A reminder text of the config's own adds `text-` and the first 8 hex
    digits of its SHA-256 (`periodic-16-user-text-1f2e3d4c`), so two texts are two policies;
    a policy on the items' own reminders keeps the short label that gates and caches name."""
    data = policy.model_dump(exclude_none=True)
    name = data.pop("name")
    if data.get("schedule") == "log":  # the bias's first schedule keeps its first labels
        data.pop("schedule")
    text = data.pop("text", None)
    if "every_turns" in data:
        data = {"every": f"turns{data.pop('every_turns')}", **data}
    if "on" in data:
        data = {"on": data.pop("on"), **data}
    values = [_label_value(v) for v in data.values()]
    if text is not None:
        values += ["text", hashlib.sha256(text.encode()).hexdigest()[:8]]
    return "-".join([name, *values])


def _label_value(value: object) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list):  # layers [3, 4] -> L3.4
        return "L" + ".".join(str(v) for v in value)
    return str(value)


def repeated_policy(specs: list[PolicySpecBase], field: str) -> str | None:
    """Why `specs` (one list of a config) holds one policy twice, or None: two identical
    specs would run as one policy and merge in every table."""
    first: dict[str, int] = {}
    for index, spec in enumerate(specs):
        label = policy_label(spec)
        if label in first:
            return (
                f"{field}[{index}] is the same policy as {field}[{first[label]}] ({label}): it "
                "would run once and be counted once; change its text or rhythm, or drop it"
            )
        first[label] = index
    return None
