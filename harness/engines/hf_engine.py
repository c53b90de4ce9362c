"""transformers `generate`, batched with left padding: the fallback engine and the one the
remedies that act inside the model need (attention bias, split-softmax, SpotLight through a
custom attention function; guidance through one forward over cond and uncond rows,
`harness.engines.guidance`): vLLM's kernels take none of them. The model
loads in `dtype` (`generation.dtype`) over the GPUs or on the CPU (`harness.engines.device`);
each batch is built on the device of the model's input embeddings."""

from __future__ import annotations

import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from harness.capabilities import Capability
from harness.config.run import GenerationConfig
from harness.engines.base import (
    GenerationRequest,
    GenerationResult,
    SamplingSettings,
    steering_key,
)
from harness.engines.device import input_device, load_causal_lm
from harness.engines.kinds import register_engine


def hf_options(gen: GenerationConfig, model: str | None, cache_dir: Path | None) -> dict:
    return {"max_model_len": gen.max_model_len, "dtype": gen.dtype}


@register_engine(
    "hf",
    {
        Capability.PREFILL,
        Capability.LATER_SYSTEM_MESSAGES,
        Capability.TOKEN_IDS,
        Capability.HIDDEN_STATES,
        Capability.PROMPT_LOGPROBS,
        Capability.ATTENTION_HOOKS,
        Capability.LOGITS_PROCESSORS,
        Capability.PAIRED_ROWS,
        Capability.LOCAL_WEIGHTS,
    },
    hf_options,
)
class HfEngine:
    name = "hf"

    def __init__(
        self, model_path: Path, *, max_model_len: int | None = None, dtype: str = "auto"
    ) -> None:
        from transformers import AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(model_path)
        self.model = load_causal_lm(model_path, dtype)
        self.device = input_device(self.model)
        context = getattr(self.model.config, "max_position_embeddings", None) or 2048
        self.max_model_len = min(max_model_len or context, context)
        self._pad_id = self.tokenizer.pad_token_id
        if self._pad_id is None:
            self._pad_id = self.tokenizer.eos_token_id

    def generate(self, requests: list[GenerationRequest]) -> list[GenerationResult]:
        """Groups requests with identical sampling settings into one batched call.

        transformers draws a whole batch from one RNG, so a sampled request's tokens would
        depend on its batch-mates; sampled requests with different seeds therefore run in
        separate batches, which keeps every request reproducible from its own seed (greedy
        requests, where the seed plays no part, share one batch).
        """
        groups: dict[str, list[int]] = {}
        for index, request in enumerate(requests):
            greedy = request.sampling.temperature == 0
            key = request.sampling.model_dump_json(exclude={"seed"} if greedy else None)
            if request.steering is not None:  # one remedy and strength per batch
                key += "|" + steering_key(request.steering)
            groups.setdefault(key, []).append(index)
        results: list[GenerationResult | None] = [None] * len(requests)
        for indices in groups.values():
            batch = [requests[i] for i in indices]
            for i, result in zip(indices, self._generate_batch(batch), strict=True):
                results[i] = result
        return [r for r in results if r is not None]

    def _generate_batch(self, requests: list[GenerationRequest]) -> list[GenerationResult]:
        import torch

        from harness.engines.guidance import guided_generate, left_padded  # lazy: loads torch

        settings = requests[0].sampling
        steering = requests[0].steering
        # one RNG for the batch: every request of a sampled batch carries this same seed
        if settings.seed is not None:
            torch.manual_seed(settings.seed)
        start = time.perf_counter()
        if steering is not None and steering.kind == "guidance":
            rows = [r.prompt_ids for r in requests]
            uncond = [
                r.steering.uncond_prompt_ids + r.prompt_ids[r.steering.prompt_len :]
                for r in requests
                if r.steering is not None and r.steering.kind == "guidance"
            ]
            new_rows = guided_generate(
                self.model, rows, uncond, steering.gamma, settings, self._pad_id,
                self.tokenizer.eos_token_id,
            )  # fmt: skip
        else:
            input_ids, attention, _ = left_padded(
                [r.prompt_ids for r in requests], self._pad_id, self.device
            )
            with torch.inference_mode(), self._attention_steering(requests):
                output = self.model.generate(
                    input_ids=input_ids,
                    attention_mask=attention,
                    **self._generate_options() | self._sampling_options(settings),
                )
            new_rows = [output[row, input_ids.shape[1] :].tolist() for row in range(len(requests))]
        seconds = time.perf_counter() - start
        return [self._result(r, new, seconds) for r, new in zip(requests, new_rows, strict=True)]

    def _generate_options(self) -> dict[str, Any]:
        return dict(pad_token_id=self._pad_id, eos_token_id=self.tokenizer.eos_token_id)

    @staticmethod
    def _sampling_options(settings: SamplingSettings) -> dict[str, Any]:
        greedy = settings.temperature == 0
        kwargs: dict[str, Any] = dict(
            max_new_tokens=settings.max_tokens,
            min_new_tokens=settings.min_tokens or None,
            do_sample=not greedy,
        )
        if not greedy:
            kwargs.update(temperature=settings.temperature, top_p=settings.top_p, top_k=0)
        return kwargs

    def _attention_steering(self, requests: list[GenerationRequest]) -> Any:
        """The attention function of the batch's steering (bias, split-softmax, SpotLight)."""
        steering = requests[0].steering
        if steering is None:
            return nullcontext()
        import torch

        from harness.engines.attention_bias import BiasSpec, steered  # lazy: loads torch

        lens = torch.tensor([r.steering.prefix_len for r in requests])  # type: ignore[union-attr]
        if steering.kind == "bias":
            spec = BiasSpec(lam=steering.lam, prompt_len=lens, schedule=steering.schedule)
        elif steering.kind == "split_softmax":
            spec = BiasSpec(0.0, lens, kind="split_softmax", strength=steering.k)
        else:
            spec = BiasSpec(0.0, lens, kind="spotlight", strength=steering.target)
        return steered(self.model, spec, steering.layers)

    def _result(self, request: GenerationRequest, new: list[int], seconds: float):
        eos = self.tokenizer.eos_token_id
        finish = "length"
        if eos in new:  # keep the EOS token, as vLLM does, and drop the padding after it
            new = new[: new.index(eos) + 1]
            finish = "stop"
        return GenerationResult(
            token_ids=new,
            text=self.tokenizer.decode(new, skip_special_tokens=True),
            finish_reason=finish,
            prompt_tokens=len(request.prompt_ids),
            seconds=seconds,
        )

    def close(self) -> None:
        del self.model
