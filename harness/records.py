"""Persisted records shared by the stages (DESIGN.md "Data flow and records")."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

RECORD_VERSION = 1


class Segment(BaseModel):
    """A span of the continuation, [start, end) in continuation token positions (0-based)."""

    kind: Literal["generated", "injected", "restatement"]
    start: int
    end: int
    source: Literal["model", "reminder", "continue", "restatement"] = "model"
    text: str = ""


class TokenCounts(BaseModel):
    prompt: int = 0
    generated: int = 0
    injected: int = 0
    restated: int = 0
    processed: int = 0  # every token the engine ran through (prompts of every round + outputs)
    processed_uncached: int | None = None  # minus prefix-cache hits, where the engine says


class GenerationRecord(BaseModel):
    version: int = RECORD_VERSION
    run_id: str = ""
    model: str
    task: str = ""  # suite name
    item: str = ""
    policy: str
    seed: int
    sample: int = 0
    prompt_messages: list[dict[str, str]] = Field(default_factory=list)
    prompt_ids: list[int]
    continuation_ids: list[int]
    segments: list[Segment]
    text: str
    finish_reason: str
    engine: str
    seconds: float = 0.0
    rounds: int = 0
    tokens: TokenCounts = Field(default_factory=TokenCounts)
