"""The probe on vLLM: every hidden state of both prompts of a pair, from the serving engine.

An engine started with the speculative method `extract_hidden_states` (vLLM >= 0.18, CPU
included) writes chosen layers' states of every prompt token into a cache-only KV layer; a KV
connector saves a finished request's states to one file: on CUDA vLLM's own
`ExampleHiddenStatesConnector` (file `hidden_states` (prompt tokens, n_ids, d), written by a
thread after a CUDA-stream copy while the request holds an exclusive flock on `<file>.lock`,
read here under a shared one), elsewhere the harness's connector (`vllm_connector.py`: file
`states` (n_ids, keep, d), renamed into place when complete), whose plain tensor copy runs on
the CPU where vLLM's CUDA streams and pinned memory cannot.
A pair is ids(A)+c and ids(B)+c as prompt tokens with max_tokens = 1, both in one batch;
each request keeps its last T + 1 positions (c and the last prompt token, whose state
predicts c_1). Then, layer by layer, the two files' rows are reduced to l2 / rel_l2 /
cos_dist with the hf backend's own reducer, and both files are deleted: disk and memory hold
O(layers x T x d) per pair in flight, never per run.

vLLM's layer id i is the input of decoder layer i (id 0 = the embeddings), i.e. transformers'
hidden-state index i for i < L; id L is the last layer's output BEFORE the final norm, so
index L and the next-token metrics (delta_logp, KL) come from the checkpoint's final norm and
output head applied here (`checkpoint.FinalHead`), as in the hf backend.

A running engine is reused by every later probe of the same model and layers that fits its
context (`get_vllm_probe`; a start costs ~40-60 s on CPU); `close` or
`vllm_engine.shutdown_all` stops it.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import torch

from harness.engines.vllm_engine import (
    config_context,
    is_running,
    llm_options,
    shutdown_llm,
    start_llm,
)
from harness.probes.checkpoint import FinalHead
from harness.probes.divergence import PairDivergence, check_inputs
from harness.probes.head import head_gaps
from harness.probes.hooks import StateReducer, resolve_layers

# a saved request's file appears one engine step after its output: wait this long at most
STATES_TIMEOUT_S = 600.0


def model_depth(model_path: Path) -> int:
    """L, the number of decoder layers, from the checkpoint's config.json."""
    config = json.loads((Path(model_path) / "config.json").read_text())
    config = config.get("text_config", config)
    return int(config["num_hidden_layers"])


class VllmProbe:
    """One probing engine: `pair_divergence` gives the hf backend's curves for a pair.

    layers: hidden-state indices to report (None = all, 0..L); the engine always extracts
    id L as well, which the next-token metrics need.
    """

    name = "vllm"

    def __init__(
        self,
        model_path: Path,
        layers: Sequence[int] | None = None,
        *,
        max_model_len: int | None = None,
        tensor_parallel_size: int = 1,
        pipeline_parallel_size: int = 1,
    ) -> None:
        from harness.probes.vllm_connector import CONNECTOR_NAME  # lazy: loads vllm

        self.model_path = Path(model_path)
        self.depth = model_depth(self.model_path)
        self.layers = resolve_layers(list(layers) if layers is not None else None, self.depth + 1)
        self.parallel = (tensor_parallel_size, pipeline_parallel_size)
        self.ids = sorted({*self.layers, self.depth})  # vLLM layer ids, = the files' rows
        self.head = FinalHead(self.model_path)
        self.states_dir = Path(tempfile.mkdtemp(prefix="harness-states-"))
        self.disk_high_water = 0  # bytes of states files present at once, largest seen
        options = llm_options(
            self.model_path,
            max_model_len=max_model_len,
            tensor_parallel_size=tensor_parallel_size,
            pipeline_parallel_size=pipeline_parallel_size,
        )
        # the extraction needs whole prefills; both rows of a pair fit in one step. Prefix
        # caching off: a cached prefix is not recomputed, so its states would not be written.
        context = max_model_len or config_context(self.model_path)
        options.update(enable_chunked_prefill=False, max_num_batched_tokens=2 * context)
        self.cuda = torch.cuda.is_available()
        self._llm = start_llm(
            **options,
            enable_prefix_caching=False,
            speculative_config={
                "method": "extract_hidden_states",
                "num_speculative_tokens": 1,
                "draft_model_config": {"hf_config": {"eagle_aux_hidden_state_layer_ids": self.ids}},
            },
            kv_transfer_config=_connector_config(self.cuda, self.states_dir, CONNECTOR_NAME),
        )
        self.max_model_len = int(self._llm.llm_engine.model_config.max_model_len)

    def is_running(self) -> bool:
        return hasattr(self, "_llm") and is_running(self._llm)

    def close(self) -> None:
        _PROBES[:] = [probe for probe in _PROBES if probe is not self]
        if hasattr(self, "_llm"):
            shutdown_llm(self._llm)
            del self._llm
        shutil.rmtree(self.states_dir, ignore_errors=True)

    @torch.no_grad()
    def pair_divergence(
        self,
        ids_a: list[int],
        ids_b: list[int],
        continuation: list[int],
        layers: Sequence[int] | None = None,
    ) -> PairDivergence:
        """The pair's curves, as `divergence.pair_divergence` gives them on transformers;
        `layers`: a subset of the engine's to report (None: all of them)."""
        kept = self.layers if layers is None else sorted(set(layers))
        if not set(kept) <= set(self.layers):
            raise ValueError(f"this engine extracts hidden states {self.layers}, not {kept}")
        # + 1: the request generates one token, which needs a slot in the context
        check_inputs(ids_a, ids_b, continuation, self.max_model_len - 1, self.head.vocab)
        total = len(continuation)
        paths = self._extract([list(ids_a) + continuation, list(ids_b) + continuation], total + 1)
        try:
            reducer = StateReducer(kept, width=0, total=total)
            last = None
            for row, layer in enumerate(self.ids):
                rows = [_read_row(p, row, total + 1, self.cuda) for p in paths]
                pair = torch.stack(rows).float()  # (2, T + 1, d)
                if layer == self.depth:  # index L is after the final norm
                    pair = last = self.head.normed(pair)
                reducer.reduce(layer, pair[:, 1:])  # positions of c_1..c_T
            assert last is not None
            # the state at c_{t-1} (the last prompt token for t = 1) predicts c_t
            targets = torch.tensor(continuation)
            delta, kl = head_gaps(self.head.head, last[:, :total], targets)
        finally:
            for path in paths:
                _remove(path)
        return PairDivergence(
            layers=kept,
            l2=reducer.l2.numpy(),
            rel_l2=reducer.rel_l2.numpy(),
            cos_dist=reducer.cos_dist.numpy(),
            delta_logp=delta.numpy(),
            kl=kl.numpy(),
            prompt_lens=(len(ids_a), len(ids_b)),
            identical_prompts=list(ids_a) == list(ids_b),
        )

    def _extract(self, sequences: list[list[int]], keep: int) -> list[Path]:
        """Run the sequences as one batch of prompts; the paths of their states files, each
        (n_ids, keep, d), once all exist."""
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        from harness.probes.vllm_connector import KEEP, MARK, PATH  # lazy: loads vllm

        # vLLM's connector saves every request (this engine runs probe requests only)
        marks = {} if self.cuda else {"kv_transfer_params": {MARK: True, KEEP: keep}}
        params = SamplingParams(max_tokens=1, temperature=0.0, detokenize=False, extra_args=marks)
        prompts = [TokensPrompt(prompt_token_ids=ids) for ids in sequences]
        outputs = self._llm.generate(prompts, params, use_tqdm=False)
        key = VLLM_PATH if self.cuda else PATH
        paths = [Path((out.kv_transfer_params or {})[key]) for out in outputs]
        # the connector writes each file one engine step after the request finished
        deadline = time.monotonic() + STATES_TIMEOUT_S
        while not all(p.exists() for p in paths):
            if time.monotonic() > deadline or not self.is_running():
                for path in paths:
                    _remove(path)
                raise RuntimeError(f"vLLM wrote no hidden states to {self.states_dir}")
            time.sleep(0.005)
        if self.cuda:  # the file exists before its writer thread is done: wait on its lock
            for path in paths:
                _wait_written(path)
        self.disk_high_water = max(self.disk_high_water, sum(p.stat().st_size for p in paths))
        return paths


# vLLM's ExampleHiddenStatesConnector: the file's path in a request output's kv_transfer_params
VLLM_PATH = "hidden_states_path"


def _connector_config(cuda: bool, states_dir: Path, harness_connector: str) -> dict:
    """The engine's kv_transfer_config: vLLM's own hidden-state connector on CUDA, the
    harness's elsewhere."""
    if cuda:
        return {
            "kv_connector": "ExampleHiddenStatesConnector",
            "kv_role": "kv_producer",
            "kv_connector_extra_config": {"shared_storage_path": str(states_dir)},
        }
    return {
        "kv_connector": harness_connector,
        "kv_connector_module_path": "harness.probes.vllm_connector",
        "kv_role": "kv_producer",
        "kv_connector_extra_config": {"states_dir": str(states_dir)},
    }


def _wait_written(path: Path) -> None:
    """Block until vLLM's writer thread has released `<path>.lock` (it holds an exclusive
    flock from the request's first step until the file is written; gone: already done)."""
    import fcntl

    try:
        with open(f"{path}.lock") as lock:
            fcntl.flock(lock, fcntl.LOCK_SH)
    except FileNotFoundError:
        return


def _remove(path: Path) -> None:
    path.unlink(missing_ok=True)
    Path(f"{path}.lock").unlink(missing_ok=True)  # vLLM's connector leaves its lock file


def _read_row(path: Path, row: int, keep: int, vllm_layout: bool = False) -> torch.Tensor:
    """One layer's states (keep, d) of a states file, read without loading the others: the
    harness's `states` (n_ids, keep, d), or vLLM's `hidden_states` (prompt tokens, n_ids, d),
    whose last `keep` positions are taken."""
    from safetensors import safe_open

    with safe_open(path, framework="pt") as handle:
        if not vllm_layout:
            return handle.get_slice("states")[row]
        states = handle.get_slice("hidden_states")
        tokens = states.get_shape()[0]
        return states[tokens - keep : tokens, row]


_PROBES: list[VllmProbe] = []


def get_vllm_probe(
    model_path: Path,
    layers: Sequence[int] | None = None,
    *,
    max_model_len: int,
    tensor_parallel_size: int = 1,
    pipeline_parallel_size: int = 1,
) -> tuple[VllmProbe, bool]:
    """A probing engine for this model that extracts at least these layers and holds
    `max_model_len` tokens: a running one of this process when there is one (an engine start
    costs ~40-60 s on CPU), else a new one. Returns (engine, started here): close only what
    you started, and pass your layers to `pair_divergence`."""
    wanted = resolve_layers(list(layers) if layers is not None else None,
                            model_depth(model_path) + 1)  # fmt: skip
    parallel = (tensor_parallel_size, pipeline_parallel_size)
    for probe in _PROBES:
        if (probe.model_path == Path(model_path) and set(wanted) <= set(probe.layers)
                and probe.parallel == parallel and probe.max_model_len >= max_model_len
                and probe.is_running()):  # fmt: skip
            return probe, False
    probe = VllmProbe(
        model_path,
        wanted,
        max_model_len=max_model_len,
        tensor_parallel_size=tensor_parallel_size,
        pipeline_parallel_size=pipeline_parallel_size,
    )
    _PROBES.append(probe)
    return probe, True


def vllm_support(model_path: Path) -> str:
    """Why the vllm backend cannot probe this model here ("" when it can)."""
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        return "vLLM is not installed"
    config = json.loads((Path(model_path) / "config.json").read_text())
    architectures = config.get("architectures") or []
    try:
        from vllm.model_executor.models import ModelRegistry
        from vllm.model_executor.models.interfaces import supports_eagle3

        classes = [ModelRegistry._try_load_model_cls(arch) for arch in architectures]
    except Exception as exc:  # an import error of vLLM itself: the backend cannot run
        return f"vLLM cannot be imported ({type(exc).__name__}: {exc})"
    usable = [cls for cls in classes if cls is not None]
    if not usable:
        return f"vLLM has no model class for {architectures or 'this config'}"
    if not any(supports_eagle3(cls) for cls in usable):
        return f"vLLM's {usable[0].__name__} cannot hand out intermediate hidden states"
    return ""
