"""The Engine protocol: a whole batch of token-id prompts in, token ids + text out."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, Field

from harness.errors import UserError


class SamplingSettings(BaseModel):
    temperature: float = Field(0.7, ge=0)
    top_p: float = Field(1.0, gt=0, le=1)
    max_tokens: int = Field(gt=0)
    seed: int | None = None
    stop: list[str] = Field(default_factory=list)
    # EOS and stop strings are ignored until this many tokens exist (a probe's continuation
    # must reach exactly T tokens)
    min_tokens: int = Field(0, ge=0)


class PromptBias(BaseModel):
    """Add lam * log((P + t) / P) to the attention logits of the first P prompt keys (the
    system turn) for the query at continuation position t. Only the hf engine can."""

    lam: float = Field(ge=0)
    prefix_len: int = Field(gt=0)


class GenerationRequest(BaseModel):
    prompt_ids: list[int] = Field(min_length=1)
    sampling: SamplingSettings
    prompt_bias: PromptBias | None = None


class GenerationResult(BaseModel):
    token_ids: list[int]
    text: str
    finish_reason: str  # "stop" (EOS / stop string), "length" or "content_filter" (withheld)
    prompt_tokens: int
    cached_prompt_tokens: int | None = None  # prefix-cache hits, where the engine reports them
    # wall time of the batch this request was part of; in continuous batching
    # (`generate_continuous`), the request's own share of the engine's time
    seconds: float = 0.0
    # engine chat: (input, cached input, output) tokens as the endpoint counted them; None
    # elsewhere (a local engine's tokens are the positions themselves)
    api_tokens: tuple[int, int, int] | None = None


# Continuous batching: (key of the request that finished, its result) -> the (key, request)
# pairs that follow it, queued while the rest of the batch keeps decoding.
FollowUp = Callable[[Hashable, GenerationResult], list[tuple[Hashable, GenerationRequest]]]


@runtime_checkable
class Engine(Protocol):
    """Generates for a whole batch at once; engines never loop one prompt at a time."""

    name: str
    max_model_len: int
    # the model's tokenizer (a transformers tokenizer, or the scripted engine's stand-in):
    # callers render chats and count tokens with it (`ChatFormat(engine.tokenizer)`)
    tokenizer: Any

    def generate(self, requests: list[GenerationRequest]) -> list[GenerationResult]: ...

    def close(self) -> None: ...

    # Optional, where the engine can add requests to a running batch (vLLM):
    # def generate_continuous(self, first: list[tuple], follow: FollowUp) -> None


def continuous(engine: Engine) -> bool:
    """Whether `engine` batches continuously across rounds (`generate_continuous`)."""
    return callable(getattr(engine, "generate_continuous", None))


def refuse_prompt_bias(engine: str, requests: list[GenerationRequest]) -> None:
    if any(r.prompt_bias is not None for r in requests):
        raise UserError(
            f"attention bias needs generation.engine: hf ({engine} kernels take no bias)"
        )
