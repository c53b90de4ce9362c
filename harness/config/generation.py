"""The generation section of a run config: the engine, sampling, the endpoint of the openai
and chat engines, the chat engine's options, prices and budgets (re-exported by
`harness.config.run`, whose `RunConfig` holds them).
"""

from __future__ import annotations

from datetime import date
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from harness.config.endpoint import (
    ANTHROPIC_KEY_ENV,
    DEFAULT_KEY_ENV,
    BaseUrl,
    KeyEnv,
    ServedModel,
    parse_units,
)
from harness.config.schema import Strict
from harness.errors import UserError
from harness.registry import ENGINES, registered_name


def _is_openai(value: str) -> bool:
    return value == "openai"


class ChatOptions(Strict):
    """The chat engine's settings (harness/engines/chat_engine.py, docs/hosted.md)."""

    # the wire protocol (harness/engines/chat_protocols.py): openai = chat completions through
    # the openai SDK; anthropic = Anthropic's Messages API through the anthropic SDK, for
    # assistant prefill (restate, inline reminders, token-level forks); no logprobs there, so
    # positions default to chars. Left out of the run id's hash where openai (the default).
    protocol: Literal["openai", "anthropic"] = Field("openai", exclude_if=_is_openai)
    # the unit of t (harness/engines/units.py): logprobs | chars | tiktoken:<enc> | hf:<model>
    positions: str = "logprobs"
    # under `logprobs`: what cuts the text the harness writes (prompts, user turns, reminders)
    tokenizer: str | None = None
    extra_body: dict[str, Any] = Field(default_factory=dict)  # sent with every request
    concurrency: int = Field(8, gt=0)
    requests_per_minute: float | None = Field(None, gt=0)
    tokens_per_minute: float | None = Field(None, gt=0)
    max_retries: int = Field(4, ge=0)  # the openai SDK's (429, 5xx, Retry-After honoured)
    timeout_s: float = Field(600.0, gt=0)

    @model_validator(mode="before")
    @classmethod
    def _anthropic_positions(cls, data: Any) -> Any:
        # the Messages API returns no logprobs: characters unless a unit is named
        if isinstance(data, dict) and data.get("protocol") == "anthropic":
            if data.get("positions", "logprobs") == "logprobs" and "positions" in data:
                raise ValueError(
                    "positions: logprobs needs an endpoint that returns them; the Anthropic "
                    "Messages API returns none (use chars, tiktoken:<encoding> or hf:<model>)"
                )
            data = {**data, "positions": data.get("positions", "chars")}
        return data

    @field_validator("positions", "tokenizer")
    @classmethod
    def _unit(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                parse_units(value)
            except UserError as exc:
                raise ValueError(str(exc).split(": ", 1)[1]) from None
        return value


def is_unset(value: Any) -> bool:
    """A field left out of the dump (and the run id's hash) while unset."""
    return value is None


class ModelPrice(Strict):
    """A hosted model's price in USD per million tokens, as of a date: prices change, so none
    is taken without the day it was read (harness/engines/pricing.py)."""

    input: float = Field(ge=0)
    cached_input: float | None = Field(None, ge=0)  # None: as `input`
    output: float = Field(ge=0)
    as_of: date


class BudgetConfig(Strict):
    """Limits a run stops before crossing (engine chat); a resumed run goes on from there."""

    usd: float | None = Field(None, gt=0)  # needs `pricing` for every model
    input_tokens: int | None = Field(None, gt=0)
    output_tokens: int | None = Field(None, gt=0)


# A transformers model's precision (`harness.engines.device`): auto = float32 on CPU and where
# the weights fit the GPUs in float32, else bfloat16 (float16 without bf16 units)
Precision = Literal["auto", "float32", "bfloat16", "float16"]

# the name of a registered engine kind
EngineName = registered_name(ENGINES)


class GenerationConfig(Strict):
    # a registered engine kind (`harness.engines.kinds`)
    engine: EngineName = "vllm"
    max_tokens: int = Field(512, gt=0)
    temperature: float = Field(0.7, ge=0)
    top_p: float = Field(0.95, gt=0, le=1)
    seed: int = 0
    continue_on_eos: bool = False
    # the openai engine's endpoint (harness.config.endpoint): else $OPENAI_BASE_URL, the server's
    # only model, the key in $OPENAI_API_KEY
    base_url: BaseUrl = None
    served_model: ServedModel = None
    api_key_env: KeyEnv = DEFAULT_KEY_ENV
    # vLLM only (generation and the probe's vllm backend): GPUs per layer / layer stages
    tensor_parallel_size: int = Field(1, gt=0)
    pipeline_parallel_size: int = Field(1, gt=0)
    max_model_len: int | None = Field(None, gt=0)
    # the hf engine's precision (harness.engines.device); vLLM keeps its own dtype choice
    dtype: Precision = "auto"
    # Conversations: max new tokens per assistant turn (a turn ends at EOS or here);
    # max_tokens stays the conversation's total budget of generated tokens.
    turn_tokens: int | None = Field(None, gt=0)
    # Single replies: max new tokens per reply when it is not max_tokens (a run whose rules
    # judge whole replies gives them a reply's budget while max_tokens holds a conversation's
    # total); unset (and left out of the run id's hash) otherwise
    single_reply_tokens: int | None = Field(None, gt=0, exclude_if=is_unset)
    # engine chat only; unset (and left out of the run id's hash) otherwise
    chat: ChatOptions | None = Field(None, exclude_if=is_unset)

    @model_validator(mode="before")
    @classmethod
    def _anthropic_key(cls, data: Any) -> Any:
        # the Anthropic protocol's key is in the anthropic SDK's variable unless one is named
        chat = data.get("chat") if isinstance(data, dict) else None
        protocol = chat.get("protocol") if isinstance(chat, dict) else None
        if protocol == "anthropic" and "api_key_env" not in data:
            data = {**data, "api_key_env": ANTHROPIC_KEY_ENV}
        return data

    @property
    def protocol(self) -> str:
        """The chat engine's wire protocol (openai where no `chat` section says otherwise)."""
        return self.chat.protocol if self.chat is not None else "openai"

    @model_validator(mode="after")
    def _turn_fits(self) -> GenerationConfig:
        if self.turn_tokens is not None and self.turn_tokens > self.max_tokens:
            raise ValueError(
                f"turn_tokens ({self.turn_tokens}) is larger than max_tokens ({self.max_tokens})"
            )
        return self

    @property
    def single_budget(self) -> int:
        """The generated tokens a single reply may have."""
        return self.single_reply_tokens or self.max_tokens
