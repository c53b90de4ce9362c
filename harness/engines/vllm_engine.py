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
import itertools
import os
import time
from pathlib import Path
from typing import Any

from harness.capabilities import Capability
from harness.config.run import GenerationConfig
from harness.engines.base import (
    FollowUp,
    GenerationRequest,
    GenerationResult,
    refuse_prompt_bias,
)
from harness.engines.cpu_runtime import configure_cpu_runtime
from harness.engines.kinds import register_engine
from harness.engines.lifetime import engine_children_bound
from harness.engines.memory import check_engine_memory
from harness.errors import raise_if_stopped
from harness.logs import is_verbose

_ENGINES: dict[tuple, VllmEngine] = {}
_RUNNING: list[Any] = []  # every vllm.LLM started and not yet shut down
# what the CPU engine processes of this run started with (harness.engines.cpu_runtime), for
# manifest.json; empty where no vLLM engine started on CPU
RUNTIME: dict[str, Any] = {}
_REQUEST_IDS = itertools.count()  # ids of continuous-batching requests, unique per process
# A prefix-cache hit covers whole KV blocks, so every round of a reminder policy or turn of a
# conversation recomputes its last partial block. On CPU, 32 tokens (the smallest block its
# attention accepts) instead of vLLM's 128: periodic(every=128) vs none at 8 x 1024 tokens
# cost 1.15x instead of 1.24x, plain decoding no slower (bench/generation.py).
CPU_PREFIX_BLOCK = 32


def start_llm(**options) -> Any:
    """`vllm.LLM(**options)`, registered so that `shutdown_all` stops it. Quiet unless the run
    is verbose: no weight-loading bar (the harness draws its own progress)."""
    from vllm import LLM

    options.setdefault("use_tqdm_on_load", is_verbose())
    saved = os.environ.get("LD_PRELOAD")
    if _on_cpu():
        check_engine_memory(Path(options["model"]))  # one line, not the engine's traceback
        RUNTIME.update(configure_cpu_runtime())
    try:
        with engine_children_bound():  # its processes die with this one, even on SIGKILL
            llm = LLM(**options)
    finally:
        # the engine process has started with the preloads; the harness's own later
        # subprocesses (browsers, servers) must not inherit them
        if saved is None:
            os.environ.pop("LD_PRELOAD", None)
        else:
            os.environ["LD_PRELOAD"] = saved
    if not _RUNNING:
        # Registered after weakref's exit hook (set up by the first weakref.finalize of the
        # process, vLLM's own for the LLM above at the latest), so it runs before vLLM's
        # finaliser (atexit is last in, first out), while the streams are still open.
        atexit.unregister(shutdown_all)
        atexit.register(shutdown_all)
    _RUNNING.append(llm)
    # a SIGTERM or SIGINT during the start was swallowed by vLLM: stop now (the engine is
    # registered, so `shutdown_all` stops it on the way out)
    raise_if_stopped()
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


def llm_options(
    model_path: Path,
    *,
    max_model_len: int | None = None,
    tensor_parallel_size: int = 1,
    pipeline_parallel_size: int = 1,
    enforce_eager: bool | None = None,
) -> dict[str, Any]:
    """`vllm.LLM` options every engine of the harness shares (generation and probe)."""
    # The worker allocates the whole CPU KV cache at start, ~4 s per GiB on 2 cores (start
    # 45 s with 1 GiB, 58 s with 4). 2 GiB hold 46k tokens of the embedded model, more than the
    # quickstart's 60 concurrent samples reach (~39k); larger runs set the variable themselves.
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
    cpu = _on_cpu()
    options: dict[str, Any] = {}
    if cpu:
        # vLLM's default binding leaves one core to the engine process; on 2 cores that
        # halves the model's threads (measured: 112 -> 171 tok/s at 48 x 128 with both).
        os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", _all_cores())
        # vllm-cpu 0.32 crashes ("CPU Generator does not use offset") when a seeded
        # request's prefill is split across steps; whole prefills avoid that path.
        context = max_model_len or config_context(model_path)
        options = {"enable_chunked_prefill": False, "max_num_batched_tokens": context}
    # float32 on CPU: bf16 without hardware bf16 units is ~3x slower. On GPU, the
    # checkpoint's dtype. Eager on CPU skips a multi-minute torch.compile at start-up.
    return {
        "model": str(model_path),
        "dtype": "float32" if cpu else "auto",
        "max_model_len": max_model_len,
        "tensor_parallel_size": tensor_parallel_size,
        "pipeline_parallel_size": pipeline_parallel_size,
        "enforce_eager": cpu if enforce_eager is None else enforce_eager,
        **options,
    }


class VllmEngine:
    name = "vllm"

    def __init__(
        self,
        model_path: Path,
        *,
        max_model_len: int | None = None,
        tensor_parallel_size: int = 1,
        pipeline_parallel_size: int = 1,
        enable_prefix_caching: bool = True,
        enforce_eager: bool | None = None,
        seed: int = 0,
        block_size: int | None = None,
    ) -> None:
        options = llm_options(
            model_path,
            max_model_len=max_model_len,
            tensor_parallel_size=tensor_parallel_size,
            pipeline_parallel_size=pipeline_parallel_size,
            enforce_eager=enforce_eager,
        )
        if block_size is None and enable_prefix_caching and _on_cpu():
            block_size = CPU_PREFIX_BLOCK
        if block_size:
            options["block_size"] = block_size
        self._llm = start_llm(**options, enable_prefix_caching=enable_prefix_caching, seed=seed)
        # prefix-cache hits come in whole KV blocks (128 tokens by default on CPU)
        self.prefix_caching = enable_prefix_caching
        self.block_size = int(self._llm.llm_engine.vllm_config.cache_config.block_size)
        self.max_model_len = int(self._llm.llm_engine.model_config.max_model_len)
        self.tokenizer = self._llm.get_tokenizer()

    def generate(self, requests: list[GenerationRequest]) -> list[GenerationResult]:
        refuse_prompt_bias(self.name, requests)
        prompts = [_tokens_prompt(r) for r in requests]
        params = [_sampling_params(r) for r in requests]
        start = time.perf_counter()
        outputs = self._llm.generate(prompts, params, use_tqdm=False)
        seconds = time.perf_counter() - start
        return [
            _result(request, output, seconds)
            for request, output in zip(requests, outputs, strict=True)
        ]

    def generate_continuous(self, first: list[tuple], follow: FollowUp) -> None:
        """Continuous batching across rounds: each `(key, request)` of `first` is queued; when
        one finishes, `follow(key, result)` returns the `(key, request)` pairs that come after
        it, and those join the running batch at once, while the others keep decoding. A round
        of one sample never waits for the slowest sample of a batch.

        A result's `seconds` is its share of the engine's time: each step's wall time split
        evenly among the requests that step ran."""
        core = self._llm.llm_engine
        running: dict[str, list] = {}  # vLLM request id -> [key, request, seconds]

        def add(pairs: list[tuple]) -> None:
            from vllm.sampling_params import RequestOutputKind

            for key, request in pairs:
                refuse_prompt_bias(self.name, [request])  # before the engine sees it
                params = _sampling_params(request)
                params.output_kind = RequestOutputKind.FINAL_ONLY  # one output, when it ends
                request_id = f"harness-{next(_REQUEST_IDS)}"
                core.add_request(request_id, _tokens_prompt(request), params)
                running[request_id] = [key, request, 0.0]

        try:
            add(first)
            while running:
                start = time.perf_counter()
                outputs = core.step()
                share = (time.perf_counter() - start) / len(running)
                for entry in running.values():
                    entry[2] += share
                for output in outputs:
                    if output.finished and output.request_id in running:
                        key, request, seconds = running.pop(output.request_id)
                        add(follow(key, _result(request, output, seconds)))
        except BaseException:
            # leave the engine clean for its next caller (a judge, the forks stage)
            if running:
                core.abort_request(list(running))
            raise

    @property
    def closed(self) -> bool:
        """Closed by whoever shared it (a judge on the generation model closes it after the
        score stage): an engine pool then starts a new one."""
        return "_llm" not in self.__dict__

    def close(self) -> None:
        for key, engine in list(_ENGINES.items()):
            if engine is self:
                del _ENGINES[key]
        llm = self.__dict__.pop("_llm", None)  # idempotent: a judge may share this engine
        if llm is not None:
            shutdown_llm(llm)


def _tokens_prompt(request: GenerationRequest):
    from vllm.inputs import TokensPrompt

    return TokensPrompt(prompt_token_ids=list(request.prompt_ids))


def _sampling_params(request: GenerationRequest):
    from vllm import SamplingParams

    sampling = request.sampling
    return SamplingParams(
        temperature=sampling.temperature,
        top_p=sampling.top_p,
        max_tokens=sampling.max_tokens,
        seed=sampling.seed,
        stop=sampling.stop or None,
        min_tokens=sampling.min_tokens,
    )


def _result(request: GenerationRequest, output, seconds: float) -> GenerationResult:
    completion = output.outputs[0]
    return GenerationResult(
        token_ids=list(completion.token_ids),
        text=completion.text,
        finish_reason="length" if completion.finish_reason == "length" else "stop",
        prompt_tokens=len(request.prompt_ids),
        cached_prompt_tokens=getattr(output, "num_cached_tokens", None),
        seconds=seconds,
    )


def _all_cores() -> str:
    cores = sorted(os.sched_getaffinity(0))
    if cores == list(range(cores[0], cores[-1] + 1)):
        return f"{cores[0]}-{cores[-1]}"
    return ",".join(str(c) for c in cores)


def config_context(model_path: Path) -> int:
    import json

    config = json.loads((Path(model_path) / "config.json").read_text())
    return int(config.get("max_position_embeddings") or 2048)


def vllm_options(gen: GenerationConfig, model: str | None, cache_dir: Path | None) -> dict:
    return {
        "max_model_len": gen.max_model_len,
        "tensor_parallel_size": gen.tensor_parallel_size,
        "pipeline_parallel_size": gen.pipeline_parallel_size,
    }


@register_engine(
    "vllm",
    {
        Capability.PREFILL,
        Capability.LATER_SYSTEM_MESSAGES,
        Capability.TOKEN_IDS,
        Capability.HIDDEN_STATES,
        Capability.PROMPT_LOGPROBS,
        Capability.LOGITS_PROCESSORS,
        Capability.LOCAL_WEIGHTS,
        Capability.PREFIX_CACHE,
    },
    vllm_options,
)
def get_vllm_engine(model_path: Path, **options) -> VllmEngine:
    """The process-wide engine for these options (created on first use)."""
    key = (str(model_path), tuple(sorted(options.items())))
    if key not in _ENGINES:
        _ENGINES[key] = VllmEngine(model_path, **options)
    return _ENGINES[key]
