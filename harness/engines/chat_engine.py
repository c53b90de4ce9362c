"""The chat engine: any OpenAI-compatible chat-completions endpoint (OpenAI, Azure OpenAI,
`vllm serve`, Ollama, llama.cpp's server, the compatible endpoints of Anthropic, Google,
Mistral, Together, Groq, OpenRouter) through the official `openai` SDK, or Anthropic's native
Messages API through the official `anthropic` SDK where assistant prefill is needed
(`chat.protocol`, `harness.engines.chat_protocols`).

The rest of the harness speaks position ids (`harness.engines.units`): a request's ids are
read back into chat messages, the reply comes back as text and is cut into pieces of the run's
unit (the endpoint's logprobs tokens where asked and returned). Every answered request is kept
in the run's request cache under the hash of what was sent (`request_key`: endpoint, model,
messages, parameters, seed), so a resumed run sends none of them again. Retries (429 and 5xx,
honouring Retry-After; dropped connections) are the SDK's own (`max_retries`). A request that
still fails is answered with finish reason `error` and counted (`usage`), and the run goes on;
a key, a model or a URL that is wrong for every request (401, 403, 404; a 401 or 403 names the
key's variable) stops it in one line, as does a connection that cannot be made before the
endpoint has answered once (a wrong port or host).
The key is read from its variable when the client is made and goes nowhere else.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from harness.atomic import atomic_write_text
from harness.capabilities import Capabilities, Capability
from harness.config.endpoint import DEFAULT_KEY_ENV, api_key, key_source, server_url
from harness.config.run import ChatOptions, GenerationConfig
from harness.engines.base import GenerationRequest, GenerationResult, refuse_prompt_bias
from harness.engines.chat_protocols import PROTOCOLS, Reply
from harness.engines.kinds import register_engine
from harness.engines.pricing import Budget
from harness.engines.ratelimit import RateLimiter
from harness.engines.units import PositionUnits, piece_id
from harness.errors import UserError

# statuses no retry changes and every request would get: the config is wrong
_FATAL = (401, 403, 404)
# the context a hosted model is assumed to have where generation.max_model_len is not given
HOSTED_CONTEXT = 131072


def request_key(base_url: str, body: dict, protocol: str = "openai") -> str:
    """The content address of a request: the endpoint, its protocol and everything sent (model,
    messages, sampling, seed, extra parameters); the key is never part of it."""
    endpoint = base_url if protocol == "openai" else f"{protocol} {base_url}"
    text = json.dumps([endpoint, body], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


class ChatUsage:
    """What the endpoint was asked and answered, per engine (thread-safe counters)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests = 0  # sent to the endpoint (answered or failed for good)
        self.cached = 0  # answered from the run's request cache: not sent
        self.failed = 0
        self.refused = 0  # refusal or content-filter finishes
        # replies cut by the unit's tokenizer where `logprobs` was asked: the endpoint gave
        # none, or tokens that do not spell the reply
        self.positions_fallback = 0
        # protocol anthropic: replies that did not start with the whitespace their prefill
        # was sent without (the prompt keeps it: such a record differs in that whitespace)
        self.prefill_whitespace = 0
        # replies longer in positions than their budget (a unit finer than the endpoint's
        # tokens), cut at the budget
        self.cut_to_budget = 0
        self.input_tokens = 0
        self.cached_input_tokens = 0
        self.output_tokens = 0
        self.errors: list[str] = []  # one line per request failed for good (first 20)

    def add(self, **counts: int) -> None:
        with self._lock:
            for name, n in counts.items():
                setattr(self, name, getattr(self, name) + n)

    def failure(self, line: str) -> None:
        with self._lock:
            self.failed += 1
            if len(self.errors) < 20:
                self.errors.append(line)

    def as_dict(self) -> dict:
        return {k: v for k, v in vars(self).items() if not k.startswith("_")}


def chat_options(gen: GenerationConfig, model: str | None, cache_dir: Path | None) -> dict:
    return {
        "model": gen.served_model or model,
        "base_url": gen.base_url,
        "api_key_env": gen.api_key_env,
        "max_model_len": gen.max_model_len,
        "cache_dir": cache_dir,
        **(gen.chat or ChatOptions()).model_dump(),
    }


def chat_capabilities(gen: GenerationConfig) -> Capabilities:
    """Anthropic's Messages API continues an assistant message the harness started but takes
    one system prompt; chat completions take system messages anywhere but no prefill."""
    if gen.protocol == "anthropic":
        return frozenset({Capability.PREFILL})
    return frozenset({Capability.LATER_SYSTEM_MESSAGES})


# whole messages in, text out, billed per request
@register_engine("chat", {Capability.METERED}, chat_options, chat_capabilities)
class ChatEngine:
    name = "chat"

    def __init__(
        self,
        model_path: Path | None = None,
        *,
        model: str,
        protocol: str = "openai",
        base_url: str | None = None,
        api_key_env: str = DEFAULT_KEY_ENV,
        positions: str = "logprobs",
        tokenizer: str | None = None,
        extra_body: dict | str | None = None,  # a dict, or its JSON text
        concurrency: int = 8,
        requests_per_minute: float | None = None,
        tokens_per_minute: float | None = None,
        max_retries: int = 4,
        timeout_s: float = 600.0,
        max_model_len: int | None = None,
        cache_dir: Path | None = None,
        budget: Budget | None = None,
        **_ignored: Any,
    ) -> None:
        url = server_url(base_url, protocol)
        if not url:
            raise UserError("chat engine: no base URL (set generation.base_url or OPENAI_BASE_URL)")
        self.base_url = url
        self.model = model
        self.protocol = protocol
        self.tokenizer = PositionUnits(positions, tokenizer)
        self.positions = positions
        if isinstance(extra_body, str):
            extra_body = json.loads(extra_body)
        self.extra_body = dict(extra_body or {})
        self.max_model_len = int(max_model_len or HOSTED_CONTEXT)
        self._concurrency = concurrency
        self._limiter = RateLimiter(requests_per_minute, tokens_per_minute)
        self._cache = Path(cache_dir) if cache_dir else None
        self.usage = ChatUsage()
        self.budget = budget or Budget(None, None)
        self.identity: dict[str, Any] = {"model": model, "served_model": None, "fingerprints": []}
        if protocol != "openai":
            self.identity["protocol"] = protocol
        api = PROTOCOLS.get(protocol)
        if api is None:
            raise UserError(f"chat engine: unknown protocol '{protocol}' (openai or anthropic)")
        if self.tokenizer.from_logprobs and not api.has_logprobs:
            raise UserError(
                f"chat engine: protocol {protocol} returns no logprobs; set chat.positions to "
                "chars, tiktoken:<encoding> or hf:<model>"
            )
        self._key_env = api_key_env
        self._api = api(url, api_key(api_key_env), max_retries, timeout_s)
        # whether the endpoint ever answered: until it has, a failed connection is a wrong URL
        # or a server that is down, not a dropped request of a long run
        self._answered = False

    @property
    def takes_prefill(self) -> bool:
        """Whether a request may end inside an assistant message (the judges' verdict prefill,
        restate, inline reminders, token-level forks): the Anthropic protocol's alone."""
        return self._api.takes_prefill

    # -- one request
    def body(self, request: GenerationRequest) -> dict:
        """What is sent for a request: the messages its ids hold, and the sampling."""
        messages, prefill = self.tokenizer.messages_of(request.prompt_ids)
        extra = dict(self.extra_body)
        if request.sampling.min_tokens:  # a vLLM extension (a probe's fixed-length continuation)
            extra["min_tokens"] = request.sampling.min_tokens
        logprobs = self.tokenizer.from_logprobs and self._api.has_logprobs
        return self._api.body(self.model, messages, prefill, request.sampling, extra, logprobs)

    def key(self, body: dict) -> str:
        return request_key(self.base_url, body, self.protocol)

    def _send(self, body: dict) -> dict | None:
        """The response (from the cache, else the endpoint), None when it failed for good."""
        key = self.key(body)
        path = self._cache / key[:2] / f"{key}.json" if self._cache else None
        if path is not None and path.exists():
            self.usage.add(cached=1)
            data = json.loads(path.read_text(encoding="utf-8"))
            # paid by the run before: it counts
            self.budget.settle((0, 0), self._api.spent(data))
            return data
        # a bound on the input tokens: no token of a byte-level tokenizer is shorter than a
        # byte, plus each message's framing
        worst_input = sum(len(str(m["content"]).encode()) + 8 for m in body["messages"])
        worst_input += len(body.get("system", "").encode()) + 8
        reserved = (worst_input, body["max_tokens"])
        self.budget.reserve(*reserved)
        self._limiter.acquire(worst_input // 4 + body["max_tokens"])
        status_error, connection_error = self._api.errors
        try:
            data = self._api.create(body)
        except status_error as exc:
            self.budget.release(reserved)
            self._answered = True
            if exc.status_code in _FATAL or self._api.fatal(exc.status_code, exc.message):
                key = f"; {key_source(self._key_env)}" if exc.status_code in (401, 403) else ""
                raise UserError(
                    f"chat engine: {self.base_url} ({self.protocol}) answered {exc.status_code} "
                    f"for model '{self.model}' ({_short(exc.message)}{key})"
                ) from None
            self.usage.add(requests=1)
            self.usage.failure(f"{exc.status_code}: {_short(exc.message)}")
            return None
        except connection_error as exc:
            self.budget.release(reserved)
            if not self._answered and _cannot_connect(exc):
                cause = exc.__cause__
                raise UserError(
                    f"chat engine: cannot reach {self.base_url} "
                    f"({type(cause).__name__}: {_short(str(cause))})"
                ) from None
            self.usage.add(requests=1)
            self.usage.failure(f"{type(exc).__name__}: {_short(str(exc))}")
            return None
        self._answered = True
        self.budget.settle(reserved, self._api.spent(data))
        self.usage.add(requests=1)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(path, json.dumps(data))
        return data

    def _complete(self, request: GenerationRequest, body: dict) -> GenerationResult:
        start = time.perf_counter()
        data = self._send(body)
        if data is None:
            return GenerationResult(
                token_ids=[], text="", finish_reason="error",
                prompt_tokens=len(request.prompt_ids), seconds=time.perf_counter() - start,
            )  # fmt: skip
        reply = self._api.reply(data, body)
        self._note(reply)
        text, finish = reply.text, reply.finish
        if finish in ("refusal", "content_filter"):
            self.usage.add(refused=1)
        pieces = self._pieces(text, reply.logprobs)
        if finish in ("stop", "length") and len(pieces) > request.sampling.max_tokens:
            # a unit finer than the endpoint's tokens (characters, another tokenizer): the
            # reply is cut at the budget in positions, where a local engine would have stopped
            # (the endpoint's max_tokens counts its own tokens); counted, never silent. A
            # refusal or a filtered reply is kept whole, as the provider's own words
            pieces = pieces[: request.sampling.max_tokens]
            text = b"".join(pieces).decode("utf-8", errors="replace")
            finish = "length"
            self.usage.add(cut_to_budget=1)
        ids = [piece_id(p) for p in pieces]
        if finish == "stop":  # the model closed its turn: the end mark, as a local EOS
            ids.append(self.tokenizer.eos_token_id)
        return GenerationResult(
            token_ids=ids,
            text=text,
            finish_reason=finish,
            prompt_tokens=len(request.prompt_ids),
            seconds=time.perf_counter() - start,
            api_tokens=reply.spent,
        )

    def _pieces(self, text: str, logprobs: dict | None) -> list[bytes]:
        """The reply's pieces: the endpoint's tokens where asked for and they spell the text,
        else the unit's cut of the text."""
        if not self.tokenizer.from_logprobs:
            return self.tokenizer.cut(text)
        content = (logprobs or {}).get("content") or []
        pieces = [
            bytes(lp["bytes"]) if lp.get("bytes") is not None else lp["token"].encode()
            for lp in content
        ]
        # a closing special token (an EOS some servers list) is not part of the reply's text
        while pieces and b"".join(pieces).decode("utf-8", errors="replace") != text:
            joined = b"".join(pieces[:-1]).decode("utf-8", errors="replace")
            if not text.startswith(joined) or joined == text + "\ufffd":
                break
            pieces.pop()
        if (pieces or not text) and b"".join(pieces).decode("utf-8", errors="replace") == text:
            return pieces
        self.usage.add(positions_fallback=1)
        return self.tokenizer.cut(text)

    def _note(self, reply: Reply) -> None:
        spent_in, cached, spent_out = reply.spent
        self.usage.add(
            input_tokens=spent_in, cached_input_tokens=cached, output_tokens=spent_out,
            prefill_whitespace=int(reply.prefill_whitespace),
        )  # fmt: skip
        self._limiter.spent(spent_in + spent_out)
        with self.usage._lock:
            self.identity["served_model"] = reply.served_model or self.identity["served_model"]
            fingerprint = reply.fingerprint
            if fingerprint and fingerprint not in self.identity["fingerprints"]:
                self.identity["fingerprints"].append(fingerprint)

    def generate(self, requests: list[GenerationRequest]) -> list[GenerationResult]:
        refuse_prompt_bias(self.name, requests)
        if not requests:
            return []
        bodies = [self.body(r) for r in requests]  # a prefill is refused before any request
        # identical requests of one batch (same messages, parameters and seed) are sent once
        first: dict[str, int] = {}
        for i, body in enumerate(bodies):
            first.setdefault(self.key(body), i)
        todo = sorted(first.values())
        with ThreadPoolExecutor(max_workers=min(self._concurrency, len(todo))) as pool:
            done = dict(zip(todo, pool.map(self._complete, [requests[i] for i in todo],
                                           [bodies[i] for i in todo]), strict=True))  # fmt: skip
        out = []
        for i, body in enumerate(bodies):
            j = first[self.key(body)]
            # the twin of a request sent once shares its answer, not its bill
            update = {} if i == j else {"api_tokens": (0, 0, 0)}
            out.append(done[j].model_copy(deep=True, update=update))
        return out

    def close(self) -> None:
        self._api.close()


def _cannot_connect(exc: BaseException) -> bool:
    """Whether an SDK's connection error (after its retries) is a connection never made (a
    refused port, an unknown host, a connect timeout), not one dropped mid-request. Read by
    the name of the HTTP library's exception it was raised from: the openai SDK raises from
    httpx2's, the anthropic SDK from httpx's, and both name them so."""
    return type(exc.__cause__).__name__ in ("ConnectError", "ConnectTimeout")


def _short(text: str) -> str:
    return " ".join(str(text).split())[:200]
