"""The policy specs of a run config (`policies:` and `conversation_policies:`): each policy's
settings, validated here and only here, and `label`, the one name of a policy everywhere
(records, manifest, reports). `harness.policies.run_policy_of(spec, ...)` builds the running
policy (`harness.policies.library`), which reads its settings from the spec; `harness.config.run`
re-exports these models."""

from __future__ import annotations

import hashlib
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from harness.checks.base import NonEmptyText
from harness.config.schema import Strict

Placement = Literal["system", "user", "inline"]


class _Spec(Strict):
    name: str

    @property
    def label(self) -> str:
        return policy_label(self)

    @property
    def between_turns(self) -> bool:
        """True when the policy reminds between the turns of a conversation."""
        return False


class NonePolicy(_Spec):
    name: Literal["none"] = "none"


class RestatePolicy(_Spec):
    name: Literal["restate"] = "restate"


class _Reminding(_Spec):
    every: int | None = Field(None, gt=0)
    placement: Placement = "user"
    text: NonEmptyText | None = None  # None: the task item's reminder

    def _check_rhythm(self, turn_rhythm: Any, what: str) -> None:
        if (self.every is None) == (turn_rhythm is None):
            raise ValueError(f"{self.name} needs exactly one of every (tokens) or {what}")
        if turn_rhythm is not None and self.placement == "inline":
            raise ValueError(f"{what} reminds between turns: placement system or user")


class PeriodicPolicy(_Reminding):
    """Within one reply: a reminder every `every` generated tokens. In a conversation: before
    every `every_turns`-th user turn (turns 2..K; turn 1 is the prompt)."""

    name: Literal["periodic"] = "periodic"
    every_turns: int | None = Field(None, gt=0)

    @model_validator(mode="after")
    def _one_rhythm(self) -> PeriodicPolicy:
        self._check_rhythm(self.every_turns, "every_turns")
        return self

    @property
    def between_turns(self) -> bool:
        return self.every_turns is not None


class AdaptivePolicy(_Reminding):
    """Within one reply: every `every` tokens, remind when the last `every` tokens fail. In a
    conversation (`on: turn`): remind before the user turn that follows a failing reply."""

    name: Literal["adaptive"] = "adaptive"
    on: Literal["turn"] | None = None

    @model_validator(mode="before")
    @classmethod
    def _yaml_on(cls, data: Any) -> Any:
        # YAML 1.1 reads the bare key `on` as the boolean true
        if isinstance(data, dict) and True in data:
            data = {("on" if k is True else k): v for k, v in data.items()}
        return data

    @model_validator(mode="after")
    def _one_rhythm(self) -> AdaptivePolicy:
        self._check_rhythm(self.on, "on: turn")
        return self

    @property
    def between_turns(self) -> bool:
        return self.on is not None


class AttentionBiasPolicy(_Spec):
    """lam * log((P + t) / P) on the system turn's attention logits (schedule log, dilution
    compensation), or lam at every t (constant, InstABoost)."""

    name: Literal["attention_bias"] = "attention_bias"
    lam: float = Field(ge=0)
    schedule: Literal["log", "constant"] = "log"


class GuidancePolicy(_Spec):
    """Classifier-free guidance on the system prompt: uncond + gamma * (cond - uncond).
    gamma 1.5: the strength Sanchez et al. 2023 found best across their tasks."""

    name: Literal["guidance"] = "guidance"
    gamma: float = Field(1.5, ge=0)


class SplitSoftmaxPolicy(_Spec):
    """Split-softmax (Li et al. 2024): the system turn's attention mass pi becomes pi^k in
    every head of `layers` (None: all)."""

    name: Literal["split_softmax"] = "split_softmax"
    k: float = Field(0.5, gt=0, le=1)
    layers: list[int] | None = None


class SpotlightPolicy(_Spec):
    """SpotLight (2025): where the system turn's attention share is below `target`, raise it
    to `target`, in every head of `layers` (None: all)."""

    name: Literal["spotlight"] = "spotlight"
    target: float = Field(0.1, gt=0, lt=1)
    layers: list[int] | None = None


PolicySpec = Annotated[
    NonePolicy
    | RestatePolicy
    | PeriodicPolicy
    | AdaptivePolicy
    | AttentionBiasPolicy
    | GuidancePolicy
    | SplitSoftmaxPolicy
    | SpotlightPolicy,
    Field(discriminator="name"),
]
POLICY_NAMES = (
    "none", "restate", "periodic", "adaptive", "attention_bias", "guidance", "split_softmax",
    "spotlight",
)  # fmt: skip


def policy_label(policy: _Spec) -> str:
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


def _label_value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list):  # layers [3, 4] -> L3.4
        return "L" + ".".join(str(v) for v in value)
    return str(value)


# the label of NonePolicy: the baseline every comparison is made against, in the result files
BASELINE = policy_label(NonePolicy())


def repeated_policy(specs: list[_Spec], field: str) -> str | None:
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
