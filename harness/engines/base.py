"""The Engine protocol: a whole batch of token-id prompts in, token ids + text out."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Annotated, Any, Literal, Protocol, runtime_checkable

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
    """Add b(t) to the attention logits of the first P prompt keys (the system turn) for the
    query at continuation position t: schedule `log`, b = lam * log((P + t) / P) (dilution
    compensation); `constant`, b = lam (InstABoost's fixed boost). Only the hf engine can."""

    kind: Literal["bias"] = "bias"
    lam: float = Field(ge=0)
    schedule: Literal["log", "constant"] = "log"
    prefix_len: int = Field(gt=0)
    layers: list[int] | None = None  # decoder layers 0..L-1; None = all


class SplitSoftmax(BaseModel):
    """Split-softmax (Li et al. 2024): per head and query, the attention mass pi on the system
    turn's keys (its first key, the attention sink, left out) becomes pi^k, the other keys'
    mass 1 - pi^k, each set keeping its own proportions. Only the hf engine can."""

    kind: Literal["split_softmax"] = "split_softmax"
    k: float = Field(gt=0, le=1)
    prefix_len: int = Field(gt=0)
    layers: list[int] | None = None


class Spotlight(BaseModel):
    """SpotLight (2025), closed loop: per head and query, where the system turn's share p (sink
    left out) is below `target`, its keys' logits rise until the share is exactly `target`;
    elsewhere nothing changes. Only the hf engine can."""

    kind: Literal["spotlight"] = "spotlight"
    target: float = Field(gt=0, lt=1)
    prefix_len: int = Field(gt=0)
    layers: list[int] | None = None


class Guidance(BaseModel):
    """Classifier-free guidance on the system prompt: next-token log-probs uncond + gamma *
    (cond - uncond), where cond is the request and uncond the same continuation after
    `uncond_prompt_ids` (the chat without its system turn) instead of the first `prompt_len`
    ids. Both rows run in one batched forward and take the same token. Only the hf engine can."""

    kind: Literal["guidance"] = "guidance"
    gamma: float = Field(ge=0)
    uncond_prompt_ids: list[int] = Field(min_length=1)
    prompt_len: int = Field(gt=0)


# what a request may ask of the model besides sampling: one remedy at a time
Steering = Annotated[PromptBias | SplitSoftmax | Spotlight | Guidance, Field(discriminator="kind")]
STEERING_NAMES = {
    "bias": "attention bias",
    "split_softmax": "split-softmax",
    "spotlight": "SpotLight attention steering",
    "guidance": "classifier-free guidance",
}


def steering_key(steering: PromptBias | SplitSoftmax | Spotlight | Guidance) -> str:
    """What must match for two requests to share one batch: the kind and its strength (not
    the per-row prompt lengths)."""
    return steering.model_dump_json(exclude={"prefix_len", "prompt_len", "uncond_prompt_ids"})


class GenerationRequest(BaseModel):
    prompt_ids: list[int] = Field(min_length=1)
    sampling: SamplingSettings
    steering: Steering | None = None


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
    """Refuse requests that steer the model (attention bias, split-softmax, SpotLight,
    guidance): only the hf engine runs them."""
    for request in requests:
        if request.steering is not None:
            what = STEERING_NAMES[request.steering.kind]
            raise UserError(
                f"{what} needs generation.engine: hf ({engine} cannot change the attention "
                "or combine two forwards per token)"
            )
