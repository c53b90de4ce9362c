"""The policy specs of a run config (`policies:` and `conversation_policies:`), and the label
that names each policy everywhere: records, manifest, reports. `harness.policies.make_policy`
builds the running policy from a spec; `harness.config` re-exports these models."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, model_validator

from harness.checks.base import NonEmptyText
from harness.schema import Strict, added_field

Placement = Literal["system", "user", "inline"]


class NonePolicy(Strict):
    name: Literal["none"]


class RestatePolicy(Strict):
    name: Literal["restate"]


class PeriodicPolicy(Strict):
    """Within one reply: a reminder every `every` generated tokens. In a conversation: before
    every `every_turns`-th user turn (turns 2..K; turn 1 is the prompt)."""

    name: Literal["periodic"]
    every: int | None = Field(None, gt=0)
    placement: Placement = "user"
    text: NonEmptyText | None = None  # None: the task item's reminder
    every_turns: int | None = added_field(gt=0)

    @model_validator(mode="after")
    def _one_rhythm(self) -> PeriodicPolicy:
        if (self.every is None) == (self.every_turns is None):
            raise ValueError("periodic needs exactly one of every (tokens) or every_turns")
        if self.every_turns is not None and self.placement == "inline":
            raise ValueError("every_turns reminds between turns: placement system or user")
        return self

    @property
    def between_turns(self) -> bool:
        return self.every_turns is not None


class AdaptivePolicy(Strict):
    """Within one reply: every `every` tokens, remind when the last `every` tokens fail. In a
    conversation (`on: turn`): remind before the user turn that follows a failing reply."""

    name: Literal["adaptive"]
    every: int | None = Field(None, gt=0)
    placement: Placement = "user"
    text: NonEmptyText | None = None
    on: Literal["turn"] | None = added_field()

    @model_validator(mode="before")
    @classmethod
    def _yaml_on(cls, data: Any) -> Any:
        # YAML 1.1 reads the bare key `on` as the boolean true
        if isinstance(data, dict) and True in data:
            data = {("on" if k is True else k): v for k, v in data.items()}
        return data

    @model_validator(mode="after")
    def _one_rhythm(self) -> AdaptivePolicy:
        if (self.every is None) == (self.on is None):
            raise ValueError("adaptive needs exactly one of every (tokens) or on: turn")
        if self.on is not None and self.placement == "inline":
            raise ValueError("on: turn reminds between turns: placement system or user")
        return self

    @property
    def between_turns(self) -> bool:
        return self.on is not None


class AttentionBiasPolicy(Strict):
    name: Literal["attention_bias"]
    lam: float = Field(ge=0)


PolicySpec = Annotated[
    NonePolicy | RestatePolicy | PeriodicPolicy | AdaptivePolicy | AttentionBiasPolicy,
    Field(discriminator="name"),
]
POLICY_NAMES = ("none", "restate", "periodic", "adaptive", "attention_bias")


def policy_label(policy: BaseModel) -> str:
    """Short stable label used in records and reports, e.g. `periodic-128-user`,
    `attention_bias-1` (numbers as `:g` writes them, so lam 1.0 and 1 label alike); between
    turns `periodic-turns2-user`, `adaptive-turn-user`."""
    data = policy.model_dump(exclude_none=True)
    name = data.pop("name")
    data.pop("text", None)
    if "every_turns" in data:
        data = {"every": f"turns{data.pop('every_turns')}", **data}
    if "on" in data:
        data = {"on": data.pop("on"), **data}
    values = (f"{v:g}" if isinstance(v, float) else str(v) for v in data.values())
    return "-".join([name, *values])
