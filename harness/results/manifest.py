"""manifest.json of a run, typed: written by the manifest stage (`stages/report.py`) from this
model and read back through it (`harness.Run.manifest`), so its fields are declared once."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


def _unset(value: object) -> bool:
    return value is None


class ModelEntry(BaseModel):
    path: str
    content_key: str
    source: str


class RunManifest(BaseModel):
    """What ran, with which versions, seeds and timings; fields in the order written."""

    # a folder written by a later version may hold keys this one does not know
    model_config = ConfigDict(extra="allow")

    run_id: str
    name: str
    config: dict[str, Any]  # the resolved run config
    policies: list[str]
    # the level and draws of every interval written (docs/architecture.md, "Statistics")
    stats: dict[str, Any]
    versions: dict[str, str | None]
    models: dict[str, ModelEntry]
    # the backend that computed each probe model's curves (auto resolved)
    probe_backends: dict[str, str]
    # the precision each transformers model ran in (`auto` resolved on this machine)
    dtypes: dict[str, Any] = Field(default_factory=dict)
    seeds: dict[str, Any]
    # LD_PRELOAD and thread binding of the vLLM CPU engine processes (empty otherwise)
    engine_runtime: dict[str, Any]
    timings: dict[str, float]
    started: str
    finished: str
    # the files this run wrote (a reused folder may hold others, of an earlier run); []: a
    # folder from before
    files: list[str] = Field(default_factory=list)
    # the unit every position t of the run's files is counted in, by model
    t_unit: dict[str, str] = Field(default_factory=dict)
    # a metered engine's requests, tokens, failures and the served model's identity, and
    # what each condition cost; unset elsewhere
    hosted: dict[str, Any] | None = Field(None, exclude_if=_unset)
    hosted_conditions: Any = Field(None, exclude_if=_unset)
    # a sequential run's looks: the samples each condition took and why it stopped
    sequential: dict[str, Any] | None = Field(None, exclude_if=_unset)
