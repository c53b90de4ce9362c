"""The base of every YAML schema of the harness (run configs, task suites)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Strict(BaseModel):
    """Unknown keys are errors: a typo must not silently fall back to a default."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def _unset(value: Any) -> bool:
    return value is None


def added_field(default: Any = None, **kwargs: Any) -> Any:
    """A field added after a model's first version: left out of dumps while unset, so the
    dumps that keys and run ids hash (policy specs, items, the run config) stay as they were
    for every config that does not use it."""
    return Field(default, exclude_if=_unset, **kwargs)
