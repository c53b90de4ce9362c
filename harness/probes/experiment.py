"""The probe experiment: models x pairs x attention-bias lam -> divergence tables and alpha fits.

Every input is checked (pairs, continuation length, context, layer indices) before the first
pair runs, so a bad input fails in seconds with one line and no files.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, Field

from harness.analysis.attention import SHARE_METRICS, uniform_share
from harness.analysis.fits import FitMember
from harness.analysis.fits import fit_table as write_fits
from harness.errors import UserError
from harness.models import ResolvedModel, resolve_model
from harness.probes.backend import (
    Backend,
    EndpointBackend,
    HfBackend,
    VllmBackend,
    cached_curves,
    map_pairs,
)
from harness.probes.divergence import PairDivergence, resolve_layers
from harness.probes.pairs import (
    PairSpec,
    file_continuation,
    generate_continuation,
    generate_continuations_vllm,
    pair_prompt_ids,
)
from harness.probes.vllm_backend import model_depth, vllm_support
from harness.store import RunStore, unit_key


class ProbeRequest(BaseModel):
    models: list[str] = Field(min_length=1)
    pairs: list[PairSpec] = Field(min_length=1)
    continuation: str  # "generate", a text file, or gens.jsonl[#row]
    tokens: int = Field(gt=0)
    layers: str | list[int] = "all"
    t_min: int = Field(16, gt=0)
    lams: list[float] | None = None  # None: plain model, no lam column
    chunk: int | None = Field(None, gt=0)  # None: one whole-sequence forward per pair
    generator: Literal["vllm", "hf"] = "vllm"  # engine of --continuation generate
    seed: int = 0
    n_boot: int = Field(1000, gt=0)
    backend: Literal["vllm", "hf", "openai"] = "hf"  # resolved: `auto` is the command's
    tensor_parallel_size: int = Field(1, gt=0)  # the vllm backend's engine
    pipeline_parallel_size: int = Field(1, gt=0)
    # the openai backend's endpoint (EndpointProbe's settings)
    base_url: str | None = None
    served_model: str | None = None
    top_k: int = Field(20, gt=0)
    concurrency: int = Field(8, gt=0)

    def endpoint(self) -> dict:
        return {
            "base_url": self.base_url,
            "served_model": self.served_model,
            "top_k": self.top_k,
            "concurrency": self.concurrency,
        }


@dataclass
class ProbeTables:
    divergence: Any  # pandas DataFrame
    nexttoken: Any
    fits: Any
    notes: list[str] = field(default_factory=list)
    continuations: dict[str, list[int]] = field(default_factory=dict)  # pair -> shared ids
    attention: Any = None  # the prompt's attention share (hf backend; no rows on vllm)


@dataclass
class _Prepared:
    ids: dict[str, tuple[list[int], list[int]]]
    continuations: dict[str, list[int]]


class UnitCache:
    """Resumable units of a probe under `<out>/cache` (a RunStore): each pair's continuation and
    each (model, lam, pair) curve set, keyed by content (`unit_key`). A killed probe re-run
    with the same --out redoes only the unit in flight, and writes the same rows as an
    uninterrupted one (every curve goes through the store, float64 exact). The folder is
    created only when the first unit is about to run, i.e. after every input check passed."""

    STAGE = "probe-cli"

    def __init__(self, root: Path | None, fresh: bool = False) -> None:
        self.root, self.fresh = root, fresh
        self._store: RunStore | None = None
        self._opening = threading.Lock()  # the openai backend's pairs run in threads

    def store(self) -> RunStore | None:
        with self._opening:
            if self._store is None and self.root is not None:
                self._store = RunStore(self.root, fresh=self.fresh).__enter__()
        return self._store

    def close(self) -> None:
        if self._store is not None:
            self._store.__exit__(None, None, None)
            self._store = None

    def key(self, model_key: str, inputs: list, params: dict) -> str:
        return unit_key(self.STAGE, model=model_key, inputs=inputs, params=params)

    def continuation(self, key: str) -> list[int] | None:
        store = self.store()
        return None if store is None else store.get(self.STAGE, key)

    def keep_continuation(self, key: str, ids: list[int]) -> None:
        store = self.store()
        if store is not None:
            store.put(self.STAGE, key, ids)

    def curves(self, key: str, compute: Callable[[], PairDivergence]) -> PairDivergence:
        return PairDivergence.from_arrays(cached_curves(self.store(), self.STAGE, key, compute))


def _model_facts(path: Path, vllm: bool) -> tuple[Any, int]:
    """(tokenizer, depth L) without loading weights; on vllm, fails when it cannot probe."""
    from transformers import AutoTokenizer

    if vllm:
        why = vllm_support(path)
        if why:
            raise UserError(f"--backend vllm cannot probe {path.name}: {why}")
    return AutoTokenizer.from_pretrained(path), model_depth(path)


def _context(path: Path) -> int | None:
    from transformers import AutoConfig

    return getattr(AutoConfig.from_pretrained(path), "max_position_embeddings", None)


def _fit_continuation(ids: list[int], request: ProbeRequest, where: str, notes: list[str]) -> list:
    if len(ids) < request.t_min:
        raise UserError(
            f"{where}: continuation has {len(ids)} tokens, fewer than t_min = {request.t_min}"
        )
    if len(ids) < request.tokens:
        notes.append(
            f"{where}: continuation has only {len(ids)} tokens (< --tokens {request.tokens})"
        )
    return ids[: request.tokens]


def prepare(
    tokenizer: Any,
    request: ProbeRequest,
    notes: list[str],
    cache: UnitCache,
    model: ResolvedModel,
    hf: HfBackend | None,
    progress: Callable[[str], None] = lambda _msg: None,
) -> _Prepared:
    """Token ids of every pair and its continuation, all checked before any probe runs;
    `hf` writes the continuations of --generator hf (its model loaded only then)."""
    ids = {spec.name: pair_prompt_ids(tokenizer, spec) for spec in request.pairs}
    context = _context(model.path)
    for name, (a, b) in ids.items():
        if context is not None and max(len(a), len(b)) + request.t_min > context:
            raise UserError(
                f"pair '{name}': prompt of {max(len(a), len(b))} tokens + t_min exceeds the "
                f"model's context of {context}"
            )
    loaded: dict[str, list[int]] = {}
    conts: dict[str, list[int]] = {}
    for spec in request.pairs:
        source = spec.continuation or request.continuation
        if source != "generate":
            if source not in loaded:
                ids_c = file_continuation(tokenizer, source)
                loaded[source] = _fit_continuation(ids_c, request, source, notes)
            conts[spec.name] = loaded[source]
    for name, (a, b) in ids.items():
        total = max(len(a), len(b)) + len(conts.get(name, [0] * request.tokens))
        if context is not None and total > context:
            raise UserError(
                f"pair '{name}': prompt + continuation = {total} tokens exceeds the model's "
                f"context of {context}"
            )
    wanted = {name: ids[name][0] for name in ids if name not in conts}
    samples = _sampled(wanted, request, cache, model, hf, progress)
    for name in wanted:
        conts[name] = _fit_continuation(samples[name], request, f"pair '{name}'", notes)
    return _Prepared(ids=ids, continuations=conts)


def _sampled(
    prompts: dict[str, list[int]],
    request: ProbeRequest,
    cache: UnitCache,
    model: ResolvedModel,
    hf: HfBackend | None,
    progress: Callable[[str], None],
) -> dict[str, list[int]]:
    """--continuation generate: each pair's sampled continuation of prompt A, from the cache
    or generated (on vLLM all in one batch; on hf pair by pair)."""
    params = {"generator": request.generator, "tokens": request.tokens, "seed": request.seed}
    keys = {name: cache.key(model.content_key, [a], params) for name, a in prompts.items()}
    samples = {name: cache.continuation(key) for name, key in keys.items()}
    todo = [name for name in prompts if samples[name] is None]
    if todo and request.generator == "vllm":
        progress(f"generating {request.tokens} tokens for {len(todo)} pair(s) on vLLM")
        batch = generate_continuations_vllm(
            model.path, [prompts[name] for name in todo], request.tokens, seed=request.seed
        )
        for name, sample in zip(todo, batch, strict=True):
            cache.keep_continuation(keys[name], sample)
            samples[name] = sample
    elif todo:
        assert hf is not None, "--generator hf runs with --backend hf"
        for name in todo:  # kept pair by pair: a killed run keeps the pairs already sampled
            progress(f"generating {request.tokens} tokens for pair {name}")
            sample = generate_continuation(hf.model(), prompts[name], request.tokens, request.seed)
            cache.keep_continuation(keys[name], sample)
            samples[name] = sample
    return samples


def run_probe(
    request: ProbeRequest,
    progress: Callable[[str], None] = lambda _msg: None,
    cache: UnitCache | None = None,
) -> ProbeTables:
    """Run every (model, lam, pair); the first model's continuations are shared by the others
    (an untrained twin cannot write a meaningful continuation of its own)."""
    cache = cache or UnitCache(None)
    notes: list[str] = []
    curves: list[tuple[str, float | None, str, PairDivergence]] = []
    prepared: _Prepared | None = None
    vllm, served = request.backend == "vllm", request.backend == "openai"
    if request.backend != "hf" and request.lams is not None:
        raise UserError("--attention-bias needs --backend hf (the bias is a transformers hook)")
    if (
        request.backend != "hf"
        and request.continuation == "generate"
        and (request.generator == "hf")
    ):
        raise UserError(
            f"--backend {request.backend} loads no transformers model: use --generator vllm"
        )
    for model_name in request.models:
        model = resolve_model(model_name)
        # an unsupported architecture or a bad layer index fails before any pair
        tokenizer, depth = _model_facts(model.path, vllm)
        resolve_layers(request.layers, depth + 1)
        hf = None if vllm or served else HfBackend(model.path, request.chunk)
        endpoint = EndpointBackend(model.path, request.endpoint()) if served else None
        if endpoint is not None:
            endpoint.probe()  # the endpoint's preflight, before any continuation or pair
        if prepared is None:
            prepared = prepare(tokenizer, request, notes, cache, model, hf, progress)
        backend = hf or endpoint or VllmBackend(
            model.path, _longest(prepared), request.tensor_parallel_size,
            request.pipeline_parallel_size,
        )  # fmt: skip
        try:
            curves += _model_curves(request, prepared, cache, model, backend, progress)
        finally:
            backend.close()
    tables = build_tables(curves, request)
    tables.notes.extend(notes)
    tables.continuations = prepared.continuations if prepared else {}
    return tables


def _longest(prepared: _Prepared) -> int:
    return max(
        max(len(a), len(b)) + len(prepared.continuations[name])
        for name, (a, b) in prepared.ids.items()
    )


def _model_curves(
    request: ProbeRequest,
    prepared: _Prepared,
    cache: UnitCache,
    model: ResolvedModel,
    backend: Backend,
    progress: Callable[[str], None],
) -> list[tuple[str, float | None, str, PairDivergence]]:
    """Every (lam, pair) curve set of one model, each from the cache or computed (on an
    endpoint, `concurrency` requests at a time)."""

    def one(unit: tuple[float | None, PairSpec]):
        lam, spec = unit
        a, b = prepared.ids[spec.name]
        cont = prepared.continuations[spec.name]
        progress(f"{model.name} {f'lam={lam} ' if lam is not None else ''}pair {spec.name}")
        compute = partial(backend.curves, a, b, cont, request.layers, lam)
        params = {"backend": request.backend, "layers": request.layers, "lam": lam}
        if request.backend == "openai":  # the KL's bracket depends on the lists' length
            params["top_k"] = request.top_k
        key = cache.key(model.content_key, [a, b, cont], params)
        return (model.name, lam, spec.name, cache.curves(key, compute))

    lams = request.lams if request.lams is not None else [None]
    return map_pairs(backend, one, [(lam, spec) for lam in lams for spec in request.pairs])


def build_tables(
    curves: list[tuple[str, float | None, str, PairDivergence]], request: ProbeRequest
) -> ProbeTables:
    import pandas as pd

    with_lam = request.lams is not None
    div_parts, next_parts = [], []
    for model_name, lam, pair, res in curves:
        n_layers, total = res.l2.shape
        t = np.arange(1, total + 1)
        head = {"model": model_name, **({"lam": lam} if with_lam else {}), "pair": pair}
        div_parts.append(
            pd.DataFrame(
                {
                    **{k: [v] * (n_layers * total) for k, v in head.items()},
                    "layer": np.repeat(res.layers, total),
                    "t": np.tile(t, n_layers),
                    "l2": res.l2.reshape(-1),
                    "rel_l2": res.rel_l2.reshape(-1),
                    "cos_dist": res.cos_dist.reshape(-1),
                }
            )
        )
        next_parts.append(
            pd.DataFrame(
                {
                    **{k: [v] * total for k, v in head.items()},
                    "t": t,
                    "delta_logp": res.delta_logp,
                    "kl": res.kl,
                    "kl_low": res.kl if res.kl_low is None else res.kl_low,
                    "kl_high": res.kl if res.kl_high is None else res.kl_high,
                    "backend": request.backend,
                }
            )
        )
    fits = fit_table(curves, request)
    tables = ProbeTables(pd.concat(div_parts), pd.concat(next_parts), fits)
    tables.attention = attention_table(curves, with_lam)
    return tables


def attention_table(curves, with_lam: bool) -> Any:
    """attention.csv of the probe command: every (model[, lam], pair, layer, t) of prompt A's
    attention share (as the run's attention.csv, without item/policy/sample/turn/role)."""
    import pandas as pd

    head_cols = ["model", *(["lam"] if with_lam else []), "pair"]
    columns = [*head_cols, "layer", "t", "prompt_len", *SHARE_METRICS, "uniform"]
    parts = []
    for model_name, lam, pair, res in curves:
        if not res.attention:
            continue
        layers = res.attention["attn_layers"]
        total = res.attention[SHARE_METRICS[0]].shape[1]
        t = np.arange(1, total + 1)
        head = {"model": model_name, **({"lam": lam} if with_lam else {}), "pair": pair}
        n = len(layers) * total
        parts.append(pd.DataFrame({
            **{k: [v] * n for k, v in head.items()},
            "layer": np.repeat(layers, total), "t": np.tile(t, len(layers)),
            "prompt_len": res.prompt_lens[0],
            **{m: res.attention[m].reshape(-1) for m in SHARE_METRICS},
            "uniform": np.tile(uniform_share(res.prompt_lens[0], t), len(layers)),
        }))  # fmt: skip
    return pd.concat(parts) if parts else pd.DataFrame(columns=columns)


def fit_table(
    curves: list[tuple[str, float | None, str, PairDivergence]], request: ProbeRequest
) -> Any:
    """fits.csv of the probe command, through the run's one fits writer: alpha per (model,
    lam, pair, layer, metric), plus a pooled pair = "all" row per (model, lam) (bootstrap over
    pairs, identical pairs left out)."""

    groups: dict[tuple[str, float | None], list[FitMember]] = {}
    for model_name, lam, pair, res in curves:
        groups.setdefault((model_name, lam), []).append(FitMember(pair, res.to_arrays()))
    with_lam = request.lams is not None
    table = [
        ({"model": model_name, **({"lam": lam} if with_lam else {})}, members)
        for (model_name, lam), members in groups.items()
    ]
    return write_fits(table, request.t_min, request.n_boot, request.n_boot)
