"""The probe's backends behind one interface, used by the run's probe and theory stages and by
`harness probe` alike: `curves(ids_a, ids_b, continuation, layers, lam)` gives a pair's
`PairDivergence`, computing nothing until the first uncached pair asks, and `close` frees
what was started. `cached_curves` keeps each pair's curves as one .npz unit of a store.

- `HfBackend`: transformers (`divergence.pair_divergence`), the reference numerics and the
  only backend with the attention bias;
- `VllmBackend`: the serving engine's hidden states (`vllm_backend.VllmProbe`);
- `EndpointBackend`: a served model's prompt log-probs (`endpoint.EndpointProbe`): next-token
  curves only, no hidden states; its pairs run `concurrency` at a time (`map_pairs`).

The heavy modules (torch, transformers, vLLM) are imported when a pair is first computed, so
a fully cached probe imports none of them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal

import numpy as np

from harness.engines.device import model_dtype_name, resolve_dtype
from harness.engines.vllm_engine import config_context
from harness.probes.endpoint import EndpointProbe
from harness.store import RunStore, get_arrays, put_arrays

# the vllm engine's context grows in these steps (see VllmBackend)
CONTEXT_STEP = 256
BackendName = Literal["hf", "vllm", "openai"]
# backends whose curves carry hidden states (and attention); openai gives next-token ones only
LOCAL_BACKENDS = ("hf", "vllm")


class HfBackend:
    """transformers: the model loaded on first use in `dtype` (`checkpoint.load_probe_model`:
    `auto` is float32 on the CPU and where it fits the GPUs). Below float32 each pair's curves
    carry their rounding floor, measured against a float32 copy of the model loaded beside it
    (`floor.measure_floor`). `chunk`: continuation tokens per forward over a KV cache (None:
    one whole-sequence forward)."""

    name = "hf"
    concurrency = 1

    def __init__(self, path: Path, chunk: int | None = None, dtype: str = "auto") -> None:
        self.path, self.chunk = Path(path), chunk
        self.dtype = dtype
        self._model: Any = None
        self._reference: Any = None

    def model(self) -> Any:
        if self._model is None:
            from harness.probes.checkpoint import load_probe_model  # lazy: loads torch

            self._model = load_probe_model(self.path, self.dtype)
        return self._model

    def reference(self) -> Any:
        """The float32 model a reduced-precision probe measures its floor against."""
        if self._reference is None:
            from harness.probes.checkpoint import load_probe_model  # lazy: loads torch

            self._reference = load_probe_model(self.path, "float32")
        return self._reference

    def curves(
        self,
        ids_a: list[int],
        ids_b: list[int],
        continuation: list[int],
        layers: str | Sequence[int] | None = None,
        lam: float | None = None,
    ):
        from harness.probes.divergence import pair_divergence  # lazy: loads torch
        from harness.probes.floor import measure_floor  # lazy: loads torch

        model = self.model()
        result = pair_divergence(model, ids_a, ids_b, continuation, layers, self.chunk, lam)
        result.dtype = model_dtype_name(model)
        if result.dtype != "float32":
            reference = self.reference()
            result.floor = measure_floor(model, reference, ids_a, ids_b, continuation, layers, lam)
        return result

    def close(self) -> None:
        self._model = None
        self._reference = None


class VllmBackend:
    """vLLM's `extract_hidden_states`: an engine started at the first uncached pair, or one
    of this process already running that fits (`get_vllm_probe`), stopped by `close` when it
    was started here. Its context holds the longest pair (`longest`: prompt + continuation)
    plus the one generated token, rounded up to a multiple of CONTEXT_STEP and never past the
    model's own: a later probe of the same model with slightly longer pairs (the next model
    of a run, a second `harness probe` in one process) finds the engine fits instead of
    starting another (40-60 s on CPU), and a larger context costs nothing until used (the
    KV cache is sized by its own setting). Parallel sizes are the run's
    (`generation.tensor_parallel_size` / `pipeline_parallel_size`) or the command's flags."""

    name = "vllm"
    concurrency = 1

    def __init__(
        self,
        path: Path,
        longest: int,
        tensor_parallel_size: int = 1,
        pipeline_parallel_size: int = 1,
    ) -> None:
        self.path = Path(path)
        # never past the model's context: a pair that does not fit fails in check_inputs
        rounded = -(-(longest + 1) // CONTEXT_STEP) * CONTEXT_STEP
        self.max_model_len = min(rounded, config_context(self.path))
        self.parallel = {
            "tensor_parallel_size": tensor_parallel_size,
            "pipeline_parallel_size": pipeline_parallel_size,
        }
        self._probe: Any = None
        self._started = False

    def curves(
        self,
        ids_a: list[int],
        ids_b: list[int],
        continuation: list[int],
        layers: str | Sequence[int] | None = None,
        lam: float | None = None,
    ):
        from harness.probes.hooks import resolve_layers  # lazy: loads torch
        from harness.probes.vllm_backend import get_vllm_probe, model_depth  # lazy: loads torch

        if lam is not None:
            raise ValueError("the attention bias runs on the hf backend (a transformers hook)")
        wanted = resolve_layers(layers, model_depth(self.path) + 1)
        if self._probe is None:
            self._probe, self._started = get_vllm_probe(
                self.path, wanted, max_model_len=self.max_model_len, **self.parallel
            )
        return self._probe.pair_divergence(ids_a, ids_b, continuation, wanted)

    def close(self) -> None:
        # vLLM's idle CPU workers keep spinning: free the cores for what runs next
        if self._probe is not None and self._started:  # an engine found running stays
            self._probe.close()
        self._probe = None


class EndpointBackend:
    """A served model behind an OpenAI-compatible URL (`endpoint.EndpointProbe`, checked at
    the first pair if nobody checked it before); `path`: the local model whose tokenizer wrote
    the ids. `endpoint`: the settings of EndpointProbe (base_url, served_model, top_k,
    concurrency, api_key_env)."""

    name = "openai"

    def __init__(self, path: Path, endpoint: dict) -> None:
        self.path, self.endpoint = Path(path), dict(endpoint)
        self.concurrency = int(self.endpoint.get("concurrency", 8))
        self._probe: EndpointProbe | None = None
        self._opening = threading.Lock()  # the first pairs of map_pairs' threads come together

    def probe(self) -> EndpointProbe:
        with self._opening:
            if self._probe is None:
                probe = EndpointProbe(self.path, **self.endpoint)
                probe.check()
                self._probe = probe
        return self._probe

    def curves(
        self,
        ids_a: list[int],
        ids_b: list[int],
        continuation: list[int],
        layers: str | Sequence[int] | None = None,
        lam: float | None = None,
    ):
        if lam is not None:
            raise ValueError("the attention bias runs on the hf backend (a transformers hook)")
        return self.probe().pair_divergence(ids_a, ids_b, continuation)

    def close(self) -> None:
        if self._probe is not None:
            self._probe.close()
        self._probe = None


Backend = HfBackend | VllmBackend | EndpointBackend


def map_pairs(backend: Backend, fn: Callable[[Any], Any], items: Iterable[Any]) -> list[Any]:
    """`fn` over the items in order: one at a time on a local backend, `concurrency` pairs
    in flight on an endpoint (each pair's two requests go together, so half as many pairs)."""
    items = list(items)
    workers = max(1, backend.concurrency // 2)
    if workers == 1 or len(items) < 2:
        return [fn(item) for item in items]
    with ThreadPoolExecutor(max_workers=min(workers, len(items))) as pool:
        return list(pool.map(fn, items))


def open_backend(
    name: BackendName,
    path: Path,
    longest: int,
    chunk: int | None = None,
    tensor_parallel_size: int = 1,
    pipeline_parallel_size: int = 1,
    endpoint: dict | None = None,
    dtype: str = "auto",
) -> Backend:
    """The backend `name` for the model at `path`; `longest` sizes the vllm engine, `chunk`
    and `dtype` the hf forwards, `endpoint` the openai backend (EndpointBackend)."""
    if name == "openai":
        return EndpointBackend(path, endpoint or {})
    if name == "vllm":
        return VllmBackend(path, longest, tensor_parallel_size, pipeline_parallel_size)
    return HfBackend(path, chunk, dtype)


def backend_dtype(backend: str, dtype: str, path: Path) -> str:
    """The precision a backend computes in, as cache keys and the manifest record it: the hf
    backend's `dtype` resolved for the model at `path` on this machine; "float32" for the
    engines and endpoints, whose units key as they did before the dtype was a setting."""
    if backend != "hf":
        return "float32"
    return resolve_dtype(dtype, path)


def cached_curves(
    store: RunStore | None,
    stage: str,
    key: str,
    compute: Callable[[], Any],
    hidden_dtype: Any = np.float64,
) -> dict[str, np.ndarray]:
    """A pair's curves as arrays: from the store's unit `key`, else `compute()`d (a
    PairDivergence) and stored as one .npz unit (without a store: computed, kept nowhere).
    `hidden_dtype` float32 halves a unit where exact re-assembly is not needed."""
    arrays = None if store is None else get_arrays(store, stage, key)
    if arrays is None:
        arrays = compute().to_arrays(hidden_dtype=hidden_dtype)
        if store is not None:
            put_arrays(store, stage, key, arrays)
    return arrays
