"""The wire protocols of the chat engine (`generation.chat.protocol`), each through its
provider's official SDK:

- `openai`: chat completions (`/v1/chat/completions`) through the `openai` SDK, the protocol
  every hosted provider offers: logprobs where the endpoint gives them, a `seed`; no assistant
  prefill (a last assistant message is answered by a new one, not continued).
- `anthropic`: Anthropic's Messages API (`/v1/messages`) through the `anthropic` SDK, used only
  for what the compatible endpoint lacks: assistant prefill (a last assistant message the model
  continues), which `restate`, inline reminders, token-level forks and the judges' verdict
  prefill need. The system prompt goes as `system`. Not sent: logprobs (the API has none:
  positions come from the config's unit), a seed (none either: it stays in the request's cache
  key, so each sample is a request of its own), temperature and top_p (the API version the SDK
  speaks, 2026-10-21, answers them with 400 and the SDK has no such parameters: the model
  samples at its own settings; `chat.extra_body` sends them to a server that takes them).

A protocol turns (messages, prefill, sampling) into the body that is sent and that the request
cache keys on, sends it (the SDK retries 429, 5xx and dropped connections, honouring
Retry-After), and reads the answer back as a `Reply`. The chat engine does the rest (cache,
budget, rate limit, position units, counts) the same for both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.engines.base import SamplingSettings
from harness.errors import UserError

# Finish reasons as the harness records them
_OPENAI_FINISH = {"stop": "stop", "length": "length", "content_filter": "content_filter"}
# Anthropic's `refusal` is its streaming classifiers stopping the reply (a provider filter, not
# the model's words); `model_context_window_exceeded` cut the reply like `max_tokens`
_ANTHROPIC_FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
}


@dataclass(frozen=True)
class Reply:
    """One answer as the engine reads it, whatever the protocol."""

    text: str
    finish: str  # stop, length, refusal, content_filter
    logprobs: dict | None  # the chat API's `logprobs` of the reply (openai only)
    spent: tuple[int, int, int]  # input, cached input, output tokens as the endpoint counted
    served_model: str | None
    fingerprint: str | None = None
    # the reply began otherwise than with the whitespace a prefill was sent without (anthropic)
    prefill_whitespace: bool = False


class OpenAIChat:
    """Chat completions through the `openai` SDK."""

    name = "openai"
    takes_prefill = False
    has_logprobs = True

    def __init__(self, url: str, key: str, max_retries: int, timeout_s: float) -> None:
        import openai

        self.errors = (openai.APIStatusError, openai.APIConnectionError)
        self.client = openai.OpenAI(
            base_url=url, api_key=key, max_retries=max_retries, timeout=timeout_s
        )

    def body(
        self, model: str, messages: list[dict], prefill: str, s: SamplingSettings, extra: dict,
        logprobs: bool,
    ) -> dict:  # fmt: skip
        if prefill:
            raise UserError(
                "chat engine: an assistant prefill (restate, inline reminders, token-level "
                "forks) is not part of the chat-completions API; use placement user/system, "
                "chat.protocol: anthropic on an Anthropic Messages endpoint, or a local engine"
            )
        body: dict[str, Any] = {
            "model": model,
            "messages": messages,
            "max_tokens": s.max_tokens,
            "temperature": s.temperature,
            "top_p": s.top_p,
        }
        if s.seed is not None:
            body["seed"] = s.seed
        if s.stop:
            body["stop"] = s.stop
        if logprobs:
            body["logprobs"] = True
        if extra:
            body["extra_body"] = extra
        return body

    @staticmethod
    def fatal(status: int, message: str) -> bool:
        return False

    def create(self, body: dict) -> dict:
        params = {k: v for k, v in body.items() if k != "extra_body"}
        response = self.client.chat.completions.create(**params, extra_body=body.get("extra_body"))
        return response.model_dump(mode="json", exclude_unset=True)

    def reply(self, data: dict, body: dict) -> Reply:
        choice = data["choices"][0]
        message = choice.get("message") or {}
        text = message.get("content") or ""
        finish = _OPENAI_FINISH.get(choice.get("finish_reason") or "stop", "stop")
        if message.get("refusal"):
            finish, text = "refusal", text or message["refusal"]
        return Reply(
            text=text, finish=finish, logprobs=choice.get("logprobs"), spent=self.spent(data),
            served_model=data.get("model"), fingerprint=data.get("system_fingerprint"),
        )  # fmt: skip

    @staticmethod
    def spent(data: dict) -> tuple[int, int, int]:
        usage = data.get("usage") or {}
        cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
        return usage.get("prompt_tokens") or 0, cached, usage.get("completion_tokens") or 0

    def close(self) -> None:
        self.client.close()


class AnthropicMessages:
    """Anthropic's Messages API through the `anthropic` SDK, with assistant prefill."""

    name = "anthropic"
    takes_prefill = True
    has_logprobs = False

    def __init__(self, url: str, key: str, max_retries: int, timeout_s: float) -> None:
        import anthropic

        self.errors = (anthropic.APIStatusError, anthropic.APIConnectionError)
        self.client = anthropic.Anthropic(
            base_url=url, api_key=key, max_retries=max_retries, timeout=timeout_s
        )

    def body(
        self, model: str, messages: list[dict], prefill: str, s: SamplingSettings, extra: dict,
        logprobs: bool,
    ) -> dict:  # fmt: skip
        """`local` holds what the cache keys on but the API does not take: the seed, the
        sampling, and the whitespace a prefill ends with (the Messages API rejects a last
        assistant message that ends in whitespace: it is sent without it, and the reply is
        read from after it, `reply`)."""
        system = [m["content"] for m in messages if m["role"] == "system"]
        if any(m["role"] == "system" for m in messages[1:]):
            raise UserError(
                "chat engine (protocol anthropic): a system message after the first "
                "(placement system) has no place in the Messages API; use placement user or inline"
            )
        turns = [{"role": m["role"], "content": m["content"]} for m in messages[len(system) :]]
        kept = prefill.rstrip()
        if kept:
            turns.append({"role": "assistant", "content": kept})
        body: dict[str, Any] = {"model": model, "max_tokens": s.max_tokens, "messages": turns}
        if system:
            body["system"] = system[0]
        if s.stop:
            body["stop_sequences"] = s.stop
        if extra:
            body["extra_body"] = extra
        local = {
            "seed": s.seed, "temperature": s.temperature, "top_p": s.top_p,
            "prefill_whitespace": prefill[len(kept) :],
        }  # fmt: skip
        body["local"] = {k: v for k, v in local.items() if v not in (None, "")}
        if not body["local"]:
            del body["local"]
        return body

    @staticmethod
    def fatal(status: int, message: str) -> bool:
        """An answer every request of the run would get: a model that takes no prefill
        (Anthropic's 4.6 models and later: "Prefilling assistant messages is not supported")."""
        return status == 400 and "prefill" in message.lower()

    def create(self, body: dict) -> dict:
        params = {k: v for k, v in body.items() if k not in ("extra_body", "local")}
        response = self.client.messages.create(**params, extra_body=body.get("extra_body"))
        return response.model_dump(mode="json", exclude_unset=True)

    def reply(self, data: dict, body: dict) -> Reply:
        blocks = data.get("content") or []
        text = "".join(b.get("text") or "" for b in blocks if b.get("type") == "text")
        finish = _ANTHROPIC_FINISH.get(data.get("stop_reason") or "end_turn", "stop")
        whitespace = (body.get("local") or {}).get("prefill_whitespace", "")
        inexact = False
        if whitespace:  # the prompt holds it already: the reply starts after it
            inexact = not text.startswith(whitespace)
            text = text[len(whitespace) :] if not inexact else text.lstrip()
        return Reply(
            text=text, finish=finish, logprobs=None, spent=self.spent(data),
            served_model=data.get("model"), prefill_whitespace=inexact,
        )  # fmt: skip

    @staticmethod
    def spent(data: dict) -> tuple[int, int, int]:
        """Anthropic counts cache reads and writes apart from `input_tokens`: all three are
        input tokens here, cache reads the cached ones (cache writes, which cost more, are
        priced as input: the harness sends no `cache_control`)."""
        usage = data.get("usage") or {}
        read = usage.get("cache_read_input_tokens") or 0
        written = usage.get("cache_creation_input_tokens") or 0
        fresh = usage.get("input_tokens") or 0
        return fresh + read + written, read, usage.get("output_tokens") or 0

    def close(self) -> None:
        self.client.close()


ChatProtocol = OpenAIChat | AnthropicMessages
PROTOCOLS: dict[str, type[ChatProtocol]] = {"openai": OpenAIChat, "anthropic": AnthropicMessages}
