"""An engine without a model, whose samples comply with a known probability: for benchmarks
and tests of what runs around generation (bench/sequential.py, tests of the sampling loop).

No config can name it (`make_engine` does not know it); a caller puts it in place of every
engine the harness makes (`every_engine`, through the engine registry: the one seam of the
benchmarks and of the tests that run stages on it, tests/conftest.py's `scripted_engine`).
Each request is answered with one word repeated up to its max_tokens: the compliant word when a
uniform number drawn from the request's seed falls below the pass rate of the first marker
found in the decoded prompt, else the violating word. A policy that sends one request per
sample (`none`, no continue_on_eos) thus gets samples that comply in every window or in none,
as the embedded model does, with a per-sample pass rate the caller knows.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from harness.engines.base import GenerationRequest, GenerationResult
from harness.registry import ENGINES


def replace_every_engine(engine: Any) -> Callable[[], None]:
    """From now on every engine the harness makes, whatever the kind and model, is `engine`
    (a ScriptedEngine or another stand-in); each kind keeps its capabilities and options.
    Returns what puts the real engines back."""
    return ENGINES.swap(
        {
            # a stand-in loads no weights: no model folder is built for it
            name: dataclasses.replace(
                kind, build=lambda model_path, **options: engine, folder=lambda model: model.path
            )
            for name, kind in ENGINES.items()
        }
    )


@contextmanager
def every_engine(engine: Any) -> Iterator[Any]:
    """`engine` as every engine the harness makes inside the block (`replace_every_engine`)."""
    restore = replace_every_engine(engine)
    try:
        yield engine
    finally:
        restore()


class CharTokenizer:
    """One token per character (EOS is chr(0)); a chat is '<role>content' turns, then
    '<assistant>' as the generation prompt: a tokenizer that needs no model folder."""

    chat_template = "characters"
    eos_token_id = 0
    bos_token = None

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=False):
        text = "".join(f"<{m['role']}>{m['content']}" for m in messages)
        return text + ("<assistant>" if add_generation_prompt else "")

    def __call__(self, text, add_special_tokens=False, return_offsets_mapping=False):
        out = {"input_ids": [ord(c) for c in text]}
        if return_offsets_mapping:
            out["offset_mapping"] = [(i, i + 1) for i in range(len(text))]
        return out

    def decode(self, ids, skip_special_tokens=False):
        return "".join(chr(i) for i in ids if not (skip_special_tokens and i == 0))

    def batch_decode(self, batch, skip_special_tokens=False):
        return [self.decode(ids, skip_special_tokens) for ids in batch]


def seeded_uniform(seed: int | None) -> float:
    """A number in [0, 1) fixed by the seed (the same on every machine and run)."""
    digest = hashlib.sha256(str(seed).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


class ScriptedEngine:
    name = "scripted"

    def __init__(
        self, rates: dict[str, float], tokenizer=None, good: str = " yes", bad: str = " no"
    ) -> None:
        self.tokenizer = tokenizer or CharTokenizer()
        self.max_model_len = 100_000
        self.rates = rates  # marker in the prompt -> probability that a request complies
        self.words = {w: self.tokenizer(w)["input_ids"] for w in (good, bad)}
        self.good, self.bad = good, bad
        self.generated = 0  # tokens generated over the engine's life
        self.requests = 0

    def _rate(self, prompt: str) -> float:
        for marker, rate in self.rates.items():
            if marker in prompt:
                return rate
        raise ValueError("no pass rate for this prompt (none of the markers occurs in it)")

    def generate(self, requests: list[GenerationRequest]) -> list[GenerationResult]:
        out = []
        for request in requests:
            prompt = self.tokenizer.decode(request.prompt_ids)
            complies = seeded_uniform(request.sampling.seed) < self._rate(prompt)
            word = self.good if complies else self.bad
            ids = self.words[word]
            n = request.sampling.max_tokens
            token_ids = (ids * (n // len(ids) + 1))[:n]
            self.generated += len(token_ids)
            out.append(
                GenerationResult(
                    token_ids=token_ids,
                    text=self.tokenizer.decode(token_ids),
                    finish_reason="length",
                    prompt_tokens=len(request.prompt_ids),
                )
            )
        self.requests += len(requests)
        return out

    def close(self) -> None:
        pass
