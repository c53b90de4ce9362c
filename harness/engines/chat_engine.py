"""Any OpenAI-compatible chat-completions endpoint (OpenAI, Azure OpenAI, `vllm serve`, Ollama,
llama.cpp's server, the compatible endpoints of Anthropic, Google, Mistral, Together, Groq,
OpenRouter) through the official `openai` SDK.

The rest of the harness speaks position ids (`harness.engines.units`): a request's ids are
read back into chat messages, the reply comes back as text and is cut into pieces of the run's
unit (the endpoint's logprobs tokens where asked and returned). Every answered request is kept
in the run's request cache under the hash of what was sent (`request_key`: endpoint, model,
messages, parameters, seed), so a resumed run sends none of them again. Retries (429 and 5xx,
honouring Retry-After; dropped connections) are the SDK's own (`max_retries`). A request that
still fails is answered with finish reason `error` and counted (`usage`), and the run goes on;
a key, a model or a URL that is wrong for every request (401, 403, 404) stops it in one line.
The key is read from its variable when the client is made and goes nowhere else.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from harness.atomic import atomic_write_text
from harness.endpoint import DEFAULT_KEY_ENV, server_url
from harness.engines.base import GenerationRequest, GenerationResult, refuse_prompt_bias
from harness.engines.pricing import Budget
from harness.engines.ratelimit import RateLimiter
from harness.engines.units import PositionUnits, piece_id
from harness.errors import UserError

# Finish reasons a chat API gives, as the harness records them
_FINISH = {"stop": "stop", "length": "length", "content_filter": "content_filter"}
# statuses no retry changes and every request would get: the config is wrong
_FATAL = (401, 403, 404)
# the context a hosted model is assumed to have where generation.max_model_len is not given
HOSTED_CONTEXT = 131072


def request_key(base_url: str, body: dict) -> str:
    """The content address of a request: the endpoint and everything sent (model, messages,
    sampling, seed, extra parameters); the key is never part of it."""
    text = json.dumps([base_url, body], sort_keys=True, separators=(",", ":"))
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


class ChatEngine:
    name = "chat"

    def __init__(
        self,
        model_path: Path | None = None,
        *,
        model: str,
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
        import openai

        url = server_url(base_url)
        if not url:
            raise UserError("chat engine: no base URL (set generation.base_url or OPENAI_BASE_URL)")
        self.base_url = url
        self.model = model
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
        self._client = openai.OpenAI(
            base_url=url,
            api_key=os.environ.get(api_key_env) or "EMPTY",
            max_retries=max_retries,
            timeout=timeout_s,
        )

    # -- one request
    def body(self, request: GenerationRequest) -> dict:
        """What is sent for a request: the messages its ids hold, and the sampling."""
        messages, prefill = self.tokenizer.messages_of(request.prompt_ids)
        if prefill:
            raise UserError(
                f"chat engine ({self.base_url}): an assistant prefill (restate, inline "
                "reminders, token-level forks) is not part of the chat-completions API; "
                "use placement user/system, or a local engine (vllm, hf)"
            )
        s = request.sampling
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "max_tokens": s.max_tokens,
            "temperature": s.temperature,
            "top_p": s.top_p,
        }
        if s.seed is not None:
            body["seed"] = s.seed
        if s.stop:
            body["stop"] = s.stop
        if self.tokenizer.from_logprobs:
            body["logprobs"] = True
        extra = dict(self.extra_body)
        if s.min_tokens:  # a vLLM extension (a probe's fixed-length continuation)
            extra["min_tokens"] = s.min_tokens
        if extra:
            body["extra_body"] = extra
        return body

    def _send(self, body: dict) -> dict | None:
        """The response (from the cache, else the endpoint), None when it failed for good."""
        import openai

        key = request_key(self.base_url, body)
        path = self._cache / key[:2] / f"{key}.json" if self._cache else None
        if path is not None and path.exists():
            self.usage.add(cached=1)
            data = json.loads(path.read_text(encoding="utf-8"))
            self.budget.settle((0, 0), _spent(data))  # paid by the run before: it counts
            return data
        # a bound on the input tokens: no token of a byte-level tokenizer is shorter than a
        # byte, plus each message's framing
        worst_input = sum(len(str(m["content"]).encode()) + 8 for m in body["messages"])
        reserved = (worst_input, body["max_tokens"])
        self.budget.reserve(*reserved)
        self._limiter.acquire(worst_input // 4 + body["max_tokens"])
        params = {k: v for k, v in body.items() if k != "extra_body"}
        try:
            response = self._client.chat.completions.create(
                **params, extra_body=body.get("extra_body")
            )
        except openai.APIStatusError as exc:
            self.budget.release(reserved)
            if exc.status_code in _FATAL:
                raise UserError(
                    f"chat engine: {self.base_url} answered {exc.status_code} for model "
                    f"'{self.model}' ({_short(exc.message)})"
                ) from None
            self.usage.add(requests=1)
            self.usage.failure(f"{exc.status_code}: {_short(exc.message)}")
            return None
        except openai.APIConnectionError as exc:
            self.budget.release(reserved)
            self.usage.add(requests=1)
            self.usage.failure(f"{type(exc).__name__}: {_short(str(exc))}")
            return None
        data = response.model_dump(mode="json", exclude_unset=True)
        self.budget.settle(reserved, _spent(data))
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
        self._note(data)
        choice = data["choices"][0]
        message = choice.get("message") or {}
        text = message.get("content") or ""
        finish = _FINISH.get(choice.get("finish_reason") or "stop", "stop")
        if message.get("refusal"):
            finish, text = "refusal", text or message["refusal"]
        if finish in ("refusal", "content_filter"):
            self.usage.add(refused=1)
        ids = [piece_id(p) for p in self._pieces(text, choice.get("logprobs"))]
        if finish == "stop":  # the model closed its turn: the end mark, as a local EOS
            ids.append(self.tokenizer.eos_token_id)
        return GenerationResult(
            token_ids=ids,
            text=text,
            finish_reason=finish,
            prompt_tokens=len(request.prompt_ids),
            seconds=time.perf_counter() - start,
            api_tokens=_spent(data),
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

    def _note(self, data: dict) -> None:
        usage = data.get("usage") or {}
        cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
        self.usage.add(
            input_tokens=usage.get("prompt_tokens") or 0,
            cached_input_tokens=cached,
            output_tokens=usage.get("completion_tokens") or 0,
        )
        self._limiter.spent(usage.get("total_tokens") or 0)
        with self.usage._lock:
            self.identity["served_model"] = data.get("model") or self.identity["served_model"]
            fingerprint = data.get("system_fingerprint")
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
            first.setdefault(request_key(self.base_url, body), i)
        todo = sorted(first.values())
        with ThreadPoolExecutor(max_workers=min(self._concurrency, len(todo))) as pool:
            done = dict(zip(todo, pool.map(self._complete, [requests[i] for i in todo],
                                           [bodies[i] for i in todo]), strict=True))  # fmt: skip
        out = []
        for i, body in enumerate(bodies):
            j = first[request_key(self.base_url, body)]
            # the twin of a request sent once shares its answer, not its bill
            update = {} if i == j else {"api_tokens": (0, 0, 0)}
            out.append(done[j].model_copy(deep=True, update=update))
        return out

    def close(self) -> None:
        self._client.close()


def _spent(data: dict) -> tuple[int, int, int]:
    """(input, cached input, output) tokens a response says it took."""
    usage = data.get("usage") or {}
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    return usage.get("prompt_tokens") or 0, cached, usage.get("completion_tokens") or 0


def _short(text: str) -> str:
    return " ".join(str(text).split())[:200]
