"""Any OpenAI-compatible completions endpoint, e.g. a deployed `vllm serve`.

Prompts go out as token ids (the `/v1/completions` API accepts a list of ints), so the
continuation the harness probes is exactly what the server saw. vLLM returns the generated
ids when asked (`return_token_ids`); other servers get their text re-tokenised locally.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from harness.capabilities import Capability
from harness.config.endpoint import DEFAULT_KEY_ENV, api_key, endpoint_of, server_url
from harness.config.run import GenerationConfig
from harness.engines.base import GenerationRequest, GenerationResult, refuse_prompt_bias
from harness.engines.kinds import register_engine
from harness.errors import UserError

# an OpenAI-protocol finish reason -> the harness's (anything else: the reply ended, `stop`)
_FINISHES = {"length": "length", "content_filter": "content_filter"}


class CompletionsApi:
    """HTTP to an OpenAI-compatible server through the official `openai` SDK's client, whose
    retries are the ones: 408, 409, 429 and 5xx and dropped connections, at most `retries`
    times, waiting what Retry-After asks (up to 60 s) or an exponential backoff with jitter.
    After the last retry, a status error is returned as the response (the caller reports its
    status) and a connection error is a UserError."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str,
        timeout_s: float,
        retries: int,
        transport: Any = None,  # an httpx transport; tests pass httpx.MockTransport
    ) -> None:
        import httpx
        import openai

        self.base_url = base_url
        http = httpx.Client(transport=transport, timeout=timeout_s) if transport else None
        self._client = openai.OpenAI(
            base_url=base_url,
            api_key=api_key,
            max_retries=retries,
            timeout=timeout_s,
            http_client=http,
        )

    def request(self, method: str, path: str, json: Any = None) -> Any:
        """The server's `httpx.Response` to `method path` (a body for POST)."""
        import httpx
        import openai

        try:
            if method == "GET":
                return self._client.get(path, cast_to=httpx.Response)
            return self._client.post(path, body=json, cast_to=httpx.Response)
        except openai.APIStatusError as exc:
            return exc.response
        except openai.APIConnectionError as exc:
            cause = type(exc.__cause__ or exc).__name__
            raise UserError(f"openai engine: cannot reach {self.base_url} ({cause})") from None

    def close(self) -> None:
        self._client.close()


def openai_options(gen: GenerationConfig, model: str | None, cache_dir: Path | None) -> dict:
    return {**endpoint_of(gen).options(), "max_model_len": gen.max_model_len}


# a completions endpoint continues any token ids; the model's folder gives its tokenizer
@register_engine(
    "openai",
    {
        Capability.PREFILL,
        Capability.LATER_SYSTEM_MESSAGES,
        Capability.TOKEN_IDS,
        Capability.LOCAL_WEIGHTS,
    },
    openai_options,
)
class OpenAIEngine:
    name = "openai"

    def __init__(
        self,
        model_path: Path,
        *,
        base_url: str | None = None,
        served_model: str | None = None,
        api_key_env: str = DEFAULT_KEY_ENV,
        max_model_len: int | None = None,
        retries: int = 4,
        timeout_s: float = 600.0,
        concurrency: int = 32,
        transport: Any = None,
    ) -> None:
        from transformers import AutoTokenizer

        url = server_url(base_url)
        if not url:
            raise UserError(
                "openai engine: no base URL (set generation.base_url or OPENAI_BASE_URL)"
            )
        self.base_url = url
        self._api = CompletionsApi(
            self.base_url,
            api_key=api_key(api_key_env),
            timeout_s=timeout_s,
            retries=retries,
            transport=transport,
        )
        self._concurrency = concurrency
        self.tokenizer = AutoTokenizer.from_pretrained(model_path)
        served = self._served_models()
        self.model = served_model or (served[0]["id"] if len(served) == 1 else None)
        ids = [m["id"] for m in served]
        if self.model not in ids:
            raise UserError(
                f"openai engine: model '{served_model}' is not served at {self.base_url} "
                f"(served: {', '.join(ids) or 'none'})"
            )
        served_len = next((m.get("max_model_len") for m in served if m["id"] == self.model), None)
        self.max_model_len = int(max_model_len or served_len or 2048)

    def _served_models(self) -> list[dict]:
        response = self._api.request("GET", "/models")
        if response.status_code != 200:
            raise UserError(
                f"openai engine: GET {self.base_url}/models answered {response.status_code}"
            )
        return response.json().get("data", [])

    def _complete(self, request: GenerationRequest) -> GenerationResult:
        s = request.sampling
        body = {
            "model": self.model,
            "prompt": list(request.prompt_ids),
            "max_tokens": s.max_tokens,
            "temperature": s.temperature,
            "top_p": s.top_p,
            "return_token_ids": True,
            "skip_special_tokens": False,
        }
        if s.min_tokens:  # a vLLM server extension of the completions API
            body["min_tokens"] = s.min_tokens
        if s.seed is not None:
            body["seed"] = s.seed
        if s.stop:
            body["stop"] = s.stop
        start = time.perf_counter()
        response = self._api.request("POST", "/completions", json=body)
        if response.status_code != 200:
            detail = response.text[:200].replace("\n", " ")
            raise UserError(f"openai engine: completion failed ({response.status_code}): {detail}")
        choice = response.json()["choices"][0]
        token_ids = choice.get("token_ids")
        if token_ids is None:  # not a vLLM server: re-tokenise its text
            token_ids = self.tokenizer(choice["text"], add_special_tokens=False)["input_ids"]
        usage = response.json().get("usage") or {}
        cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
        return GenerationResult(
            token_ids=list(token_ids),
            text=self.tokenizer.decode(token_ids, skip_special_tokens=True),
            finish_reason=_FINISHES.get(choice.get("finish_reason"), "stop"),
            prompt_tokens=len(request.prompt_ids),
            cached_prompt_tokens=cached,
            seconds=time.perf_counter() - start,
        )

    def generate(self, requests: list[GenerationRequest]) -> list[GenerationResult]:
        refuse_prompt_bias(self.name, requests)
        # The server batches concurrent requests itself; send the whole batch at once.
        with ThreadPoolExecutor(max_workers=min(self._concurrency, len(requests))) as pool:
            return list(pool.map(self._complete, requests))

    def close(self) -> None:
        self._api.close()
