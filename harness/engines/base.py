"""The Engine protocol: a whole batch of token-id prompts in, token ids + text out."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from pydantic import BaseModel, Field


class SamplingSettings(BaseModel):
    temperature: float = Field(0.7, ge=0)
    top_p: float = Field(1.0, gt=0, le=1)
    max_tokens: int = Field(gt=0)
    seed: int | None = None
    stop: list[str] = Field(default_factory=list)


class GenerationRequest(BaseModel):
    prompt_ids: list[int] = Field(min_length=1)
    sampling: SamplingSettings
    # tokens of the system-prompt prefix; engines that bias attention toward it read this
    prompt_prefix_len: int | None = None


class GenerationResult(BaseModel):
    token_ids: list[int]
    text: str
    finish_reason: str  # "stop" (EOS / stop string) or "length"
    prompt_tokens: int
    cached_prompt_tokens: int | None = None  # prefix-cache hits, where the engine reports them
    seconds: float = 0.0  # wall time of the batch this request was part of


@runtime_checkable
class Engine(Protocol):
    """Generates for a whole batch at once; engines never loop one prompt at a time."""

    name: str
    max_model_len: int

    def generate(self, requests: list[GenerationRequest]) -> list[GenerationResult]: ...

    def close(self) -> None: ...
