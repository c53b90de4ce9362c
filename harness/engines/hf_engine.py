"""transformers `generate`, batched with left padding: the fallback engine and the one the
attention-bias policy needs (vLLM's kernels cannot take an additive prompt bias). The model
loads in `dtype` (`generation.dtype`) over the GPUs or on the CPU (`harness.engines.device`);
each batch is built on the device of the model's input embeddings."""

from __future__ import annotations

import time
from contextlib import nullcontext
from pathlib import Path

from harness.capabilities import Capability
from harness.config.run import GenerationConfig
from harness.engines.base import GenerationRequest, GenerationResult
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
            if request.prompt_bias is not None:  # one bias strength per batch
                key += f"|bias={request.prompt_bias.lam}"
            groups.setdefault(key, []).append(index)
        results: list[GenerationResult | None] = [None] * len(requests)
        for indices in groups.values():
            batch = [requests[i] for i in indices]
            for i, result in zip(indices, self._generate_batch(batch), strict=True):
                results[i] = result
        return [r for r in results if r is not None]

    def _generate_batch(self, requests: list[GenerationRequest]) -> list[GenerationResult]:
        import torch

        settings = requests[0].sampling
        width = max(len(r.prompt_ids) for r in requests)
        input_ids = torch.full((len(requests), width), self._pad_id, dtype=torch.long)
        attention = torch.zeros((len(requests), width), dtype=torch.long)
        for row, request in enumerate(requests):  # left padding: prompts end at the same column
            input_ids[row, width - len(request.prompt_ids) :] = torch.tensor(request.prompt_ids)
            attention[row, width - len(request.prompt_ids) :] = 1
        input_ids, attention = input_ids.to(self.device), attention.to(self.device)
        # one RNG for the batch: every request of a sampled batch carries this same seed
        if settings.seed is not None:
            torch.manual_seed(settings.seed)
        greedy = settings.temperature == 0
        kwargs = dict(
            max_new_tokens=settings.max_tokens,
            min_new_tokens=settings.min_tokens or None,
            do_sample=not greedy,
            pad_token_id=self._pad_id,
            eos_token_id=self.tokenizer.eos_token_id,
        )
        if not greedy:
            kwargs.update(temperature=settings.temperature, top_p=settings.top_p, top_k=0)
        bias = requests[0].prompt_bias
        context = nullcontext()
        if bias is not None:
            from harness.engines.attention_bias import attention_bias  # lazy: loads torch

            context = attention_bias(
                self.model, [r.prompt_bias.prefix_len for r in requests], bias.lam
            )
        start = time.perf_counter()
        with torch.inference_mode(), context:
            output = self.model.generate(input_ids=input_ids, attention_mask=attention, **kwargs)
        seconds = time.perf_counter() - start
        eos = self.tokenizer.eos_token_id
        results = []
        for row, request in enumerate(requests):
            new = output[row, width:].tolist()  # .tolist() copies from the GPU
            finish = "length"
            if eos in new:  # keep the EOS token, as vLLM does, and drop the padding after it
                new = new[: new.index(eos) + 1]
                finish = "stop"
            results.append(
                GenerationResult(
                    token_ids=new,
                    text=self.tokenizer.decode(new, skip_special_tokens=True),
                    finish_reason=finish,
                    prompt_tokens=len(request.prompt_ids),
                    seconds=seconds,
                )
            )
        return results

    def close(self) -> None:
        del self.model
