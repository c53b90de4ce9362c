"""An engine: `generation.engine: canned` answers every request with one canned sentence,
repeated to the request's token budget, in the tokens of the model's own tokenizer (it loads the
tokenizer from the model's folder, never the weights). A stand-in for a real backend: what it
shows is the registration, the options it takes and the capabilities it declares."""

from __future__ import annotations

import time
from pathlib import Path

from harness.capabilities import Capability
from harness.config.run import GenerationConfig
from harness.engines import GenerationRequest, GenerationResult, register_engine

REPLY = " The lighthouse keeper counted 3 storms that winter."


def canned_options(gen: GenerationConfig, model: str | None, cache_dir: Path | None) -> dict:
    """The keyword options `CannedEngine` takes from a generation config."""
    return {"max_model_len": gen.max_model_len, "reply": REPLY}


@register_engine(
    "canned",
    # token ids in and out and a model folder; it continues any prompt (prefill) and takes a
    # system message anywhere; no attention hooks, hidden states or billing
    {
        Capability.PREFILL,
        Capability.LATER_SYSTEM_MESSAGES,
        Capability.TOKEN_IDS,
        Capability.LOCAL_WEIGHTS,
    },
    canned_options,
)
class CannedEngine:
    name = "canned"

    def __init__(self, model_path: Path, *, max_model_len: int | None = None, reply: str) -> None:
        from transformers import AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(model_path)
        self.max_model_len = max_model_len or 2048
        self.reply_ids = self.tokenizer.encode(reply, add_special_tokens=False)

    def generate(self, requests: list[GenerationRequest]) -> list[GenerationResult]:
        start, out = time.perf_counter(), []
        for request in requests:
            n = request.sampling.max_tokens
            ids = (self.reply_ids * (n // len(self.reply_ids) + 1))[:n]
            text = self.tokenizer.decode(ids, skip_special_tokens=True)
            out.append(GenerationResult(token_ids=ids, text=text, finish_reason="length",
                                        prompt_tokens=len(request.prompt_ids)))  # fmt: skip
        seconds = time.perf_counter() - start
        return [r.model_copy(update={"seconds": seconds}) for r in out]

    def close(self) -> None:
        pass
