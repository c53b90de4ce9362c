"""The probe through a served model: next-token influence from an OpenAI-compatible endpoint
that returns prompt log-probs (vLLM's `prompt_logprobs` extension of the completions API).

A pair is two completions requests, ids(A)+c and ids(B)+c sent as token ids with
`prompt_logprobs` = k and max_tokens 1; entry j of a response's `prompt_logprobs` is the
distribution that predicts token j, so the entries of c's positions give, per t, the top-k
tokens and c_t of both arms (`topk.topk_gaps`: delta_logp exactly, KL bracketed). No hidden
state leaves a server: the curves have no layers. Requests run concurrently (the server
batches what arrives together), at most `concurrency` in flight.

`check` is the preflight: the endpoint answers, serves the model, returns prompt log-probs
of the configured k, its tokenizer gives the ids the local one (`--model`'s) gives, and the
same prompt sent again (now a prefix-cache hit on a server with prefix caching on) returns the
same log-probs to REPEAT_TOLERANCE: vLLM's prompt log-probs can depend on request order with
prefix caching on (vLLM issue #42019), and a probe server should run with
`--no-enable-prefix-caching`; otherwise a UserError before any pair is sent.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from harness.config.endpoint import DEFAULT_KEY_ENV, api_key, endpoint_of, server_url
from harness.config.run import RunConfig
from harness.engines.openai_engine import CompletionsApi
from harness.errors import UserError
from harness.probes.topk import parse_entry, topk_gaps
from harness.text.chat import ChatFormat

# the preflight's probe text: special tokens, accents, CJK and digits, where tokenizers differ
CHECK_SYSTEM = "Réponds en français. 答えは日本語で。"
CHECK_USER = "Count: 1, 22, 333 -- naïve café ✓"
# largest change of a prompt log-prob allowed when the check text is sent a second time: far
# below the gaps a probe reads (|delta_logp| ~1e-3 late in a long continuation)
REPEAT_TOLERANCE = 1e-4


class EndpointProbe:
    """Prompt log-probs of a served model for probe pairs; `tokenizer_path`: the local
    model whose tokenizer wrote the ids (it must be the server's)."""

    name = "openai"

    def __init__(
        self,
        tokenizer_path: Path,
        *,
        base_url: str | None,
        served_model: str | None = None,
        top_k: int = 20,
        concurrency: int = 8,
        api_key_env: str = DEFAULT_KEY_ENV,
        timeout_s: float = 600.0,
        retries: int = 4,
        transport: Any = None,
    ) -> None:
        from transformers import AutoTokenizer

        url = server_url(base_url)
        if not url:
            raise UserError(
                "probe backend openai: no base URL (set probe.base_url, generation.base_url "
                "or OPENAI_BASE_URL; harness probe: --base-url)"
            )
        self.base_url = url
        self.top_k, self.concurrency = top_k, concurrency
        self.tokenizer = AutoTokenizer.from_pretrained(tokenizer_path)
        self._api = CompletionsApi(
            self.base_url,
            api_key=api_key(api_key_env),
            timeout_s=timeout_s,
            retries=retries,
            transport=transport,
        )
        self._wanted = served_model
        self.model: str | None = None
        self.max_model_len: int | None = None

    # ---------------------------------------------------------------- preflight
    def check(self) -> None:
        """Every endpoint problem as one UserError, before any pair: unreachable, model not
        served, no prompt log-probs (not vLLM, or its max_logprobs below top_k), another
        tokenizer."""
        where = f"probe endpoint {self.base_url}"
        try:
            response = self._api.request("GET", "/models")
        except UserError:
            raise UserError(f"{where}: cannot be reached") from None
        if response.status_code != 200:
            raise UserError(f"{where}: GET /models answered {response.status_code}")
        served = _json(response, where).get("data") or []
        ids = [m.get("id") for m in served]
        self.model = self._wanted or (ids[0] if len(ids) == 1 else None)
        if self.model not in ids:
            raise UserError(
                f"{where}: model '{self._wanted}' is not served (served: "
                f"{', '.join(map(str, ids)) or 'none'}; set probe.served_model / --served-model)"
            )
        entry = next(m for m in served if m.get("id") == self.model)
        self.max_model_len = entry.get("max_model_len")
        self._check_tokenizer(where)

    def _check_tokenizer(self, where: str) -> None:
        if getattr(self.tokenizer, "chat_template", None):  # the template's special tokens too
            text = self.tokenizer.decode(
                ChatFormat(self.tokenizer).prompt_ids(CHECK_SYSTEM, CHECK_USER)
            )
        else:
            text = f"{CHECK_SYSTEM}\n{CHECK_USER}"
        expected = list(self.tokenizer(text)["input_ids"])
        choice = self._post({"prompt": text}, where)
        entries = choice.get("prompt_logprobs")
        if not entries or all(e is None for e in entries):
            raise UserError(
                f"{where}: returns no prompt log-probs (the probe needs vLLM's `prompt_logprobs` "
                "extension of /completions)"
            )
        echoed = choice.get("prompt_token_ids")
        if echoed is None:  # no echo: each entry lists the actual prompt token
            pairs = zip(entries[1:], expected[1:], strict=False)  # unequal lengths differ below
            echoed = [None, *(_actual(e, want) for e, want in pairs)]
            echoed += [None] * (len(entries) - len(echoed))
            expected = [None, *expected[1:]]
        if list(echoed) != expected:
            first = next(
                (i for i, (x, y) in enumerate(zip(echoed, expected, strict=False)) if x != y),
                min(len(echoed), len(expected)),
            )
            raise UserError(
                f"{where}: the served model '{self.model}' tokenises differently from the local "
                f"tokenizer (first difference at token {first} of a probe text): serve the model "
                "given as --model / models"
            )
        self._check_repeatable(text, entries, where)
        short = [len(e) for e in entries[1:] if e is not None and len(e) < self.top_k]
        if short:
            raise UserError(
                f"{where}: returns {min(short)} prompt log-probs per token, fewer than top_k = "
                f"{self.top_k} (start vllm serve with --max-logprobs >= {self.top_k})"
            )

    def _check_repeatable(self, text: str, first: list, where: str) -> None:
        """The check text again: the same log-probs, or a UserError naming prefix caching."""
        again = self._post({"prompt": text}, where).get("prompt_logprobs") or []
        worst = 0.0
        for one, two in zip(first, again, strict=False):
            for token in set(one or {}) & set(two or {}):
                worst = max(worst, abs(one[token]["logprob"] - two[token]["logprob"]))
        if len(again) != len(first) or worst > REPEAT_TOLERANCE:
            raise UserError(
                f"{where}: the same prompt sent twice returns prompt log-probs that differ by "
                f"{worst:.2g} (> {REPEAT_TOLERANCE:g}): with prefix caching on, vLLM's prompt "
                "log-probs depend on request order (vLLM issue #42019); serve the probed model "
                "with --no-enable-prefix-caching"
            )

    def _post(self, body: dict, where: str) -> dict:
        body = {
            "model": self.model,
            "max_tokens": 1,
            "temperature": 0.0,
            "prompt_logprobs": self.top_k,
            "return_token_ids": True,
            **body,
        }
        response = self._api.request("POST", "/completions", json=body)
        if response.status_code != 200:
            detail = response.text[:300].replace("\n", " ")
            hint = ""
            if "logprobs" in detail:
                hint = f" (start vllm serve with --max-logprobs >= {self.top_k}, or lower top_k)"
            raise UserError(
                f"{where}: a prompt_logprobs = {self.top_k} request was refused "
                f"({response.status_code}: {detail}){hint}"
            )
        choices = _json(response, where).get("choices") or [{}]
        return choices[0]

    # ---------------------------------------------------------------- pairs
    def fits(self, length: int) -> bool:
        """Whether a sequence of `length` prompt tokens plus the one generated fits."""
        return self.max_model_len is None or length + 1 <= int(self.max_model_len)

    def arm(self, ids: list[int], total: int) -> list:
        """The `TopK` lists of the last `total` prompt positions of one request."""
        if self.model is None:
            self.check()
        where = f"probe endpoint {self.base_url}"
        entries = self._post({"prompt": list(ids)}, where).get("prompt_logprobs") or []
        tail = entries[len(ids) - total :]
        if len(entries) != len(ids) or any(e is None for e in tail):
            raise UserError(f"{where}: prompt log-probs missing for some of the {total} tokens")
        return [parse_entry(entry, self.top_k) for entry in tail]

    def pair_divergence(self, ids_a: list[int], ids_b: list[int], continuation: list[int]):
        """The pair's next-token curves (no hidden-state layers), both arms sent at once."""
        from harness.probes.divergence import PairDivergence  # lazy: loads torch

        total = len(continuation)
        for ids in (ids_a, ids_b):
            if not self.fits(len(ids) + total):
                raise UserError(
                    f"probe endpoint {self.base_url}: a pair of {len(ids) + total} tokens does "
                    f"not fit the served model's context of {self.max_model_len}"
                )
        with ThreadPoolExecutor(max_workers=2) as pool:
            lists = list(pool.map(lambda p: self.arm(p + continuation, total), [ids_a, ids_b]))
        gaps = np.array(
            [topk_gaps(a, b, tok) for a, b, tok in zip(*lists, continuation, strict=True)]
        ).reshape(total, 3)
        empty = np.zeros((0, total))
        return PairDivergence(
            layers=[], l2=empty, rel_l2=empty, cos_dist=empty,
            delta_logp=gaps[:, 0], kl=gaps[:, 1].copy(),
            prompt_lens=(len(ids_a), len(ids_b)),
            identical_prompts=list(ids_a) == list(ids_b),
            kl_low=gaps[:, 1], kl_high=gaps[:, 2],
        )  # fmt: skip

    def close(self) -> None:
        self._api.close()


def _json(response: Any, where: str) -> dict:
    try:
        body = response.json()
    except ValueError:
        raise UserError(f"{where}: answered something that is not JSON") from None
    if not isinstance(body, dict):
        raise UserError(f"{where}: answered something that is not a JSON object")
    return body


def _actual(entry: dict | None, want: int) -> int | None:
    """The entry's id that is `want` when it lists it (the actual token is always listed)."""
    return want if entry is not None and str(want) in entry else None


def endpoint_settings(config: RunConfig) -> dict:
    """EndpointProbe's settings of a run: the probe's endpoint over generation's (Endpoint.over)."""
    probe, gen = config.probe, config.generation
    endpoint = endpoint_of(probe).over(endpoint_of(gen))
    return {**endpoint.options(), "top_k": probe.top_k, "concurrency": probe.concurrency}


def check_endpoint(path: Path, settings: dict) -> None:
    """The preflight of `EndpointProbe.check` for the model at `path`, nothing kept open."""
    probe = EndpointProbe(path, **settings)
    try:
        probe.check()
    finally:
        probe.close()
