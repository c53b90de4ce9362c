"""The probe experiment: models x pairs x attention-bias lam -> divergence tables and alpha fits.

Every input is checked (pairs, continuation length, context, layer indices) before the first
pair runs, so a bad input fails in seconds with one line and no files.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, Field

from harness.analysis.fits import FitMember
from harness.analysis.fits import fit_table as write_fits
from harness.engines.vllm_engine import config_context
from harness.errors import UserError
from harness.models import resolve_model
from harness.probes.checkpoint import load_probe_model
from harness.probes.divergence import (
    PairDivergence,
    n_hidden_states,
    pair_divergence,
    resolve_layers,
)
from harness.probes.pairs import (
    PairSpec,
    file_continuation,
    generate_continuation,
    generate_continuations_vllm,
    pair_prompt_ids,
)
from harness.probes.vllm_backend import get_vllm_probe, model_depth, vllm_support
from harness.store import RunStore, content_key, get_arrays, put_arrays


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
    backend: Literal["vllm", "hf"] = "hf"  # resolved: `auto` is the command's to decide


@dataclass
class ProbeTables:
    divergence: Any  # pandas DataFrame
    nexttoken: Any
    fits: Any
    notes: list[str] = field(default_factory=list)
    continuations: dict[str, list[int]] = field(default_factory=dict)  # pair -> shared ids


@dataclass
class _Prepared:
    ids: dict[str, tuple[list[int], list[int]]]
    continuations: dict[str, list[int]]


class UnitCache:
    """Resumable units of a probe under `<out>/cache` (a RunStore): each pair's continuation and
    each (model, lam, pair) curve set, keyed by content. A killed probe re-run with the same
    --out redoes only the unit in flight, and writes the same rows as an uninterrupted one
    (every curve goes through the store, float64 exact). The folder is created only when the
    first unit is about to run, i.e. after every input check passed."""

    STAGE = "probe-cli"

    def __init__(self, root: Path | None, fresh: bool = False) -> None:
        self.root, self.fresh = root, fresh
        self._store: Any = None

    def _open(self) -> Any:
        if self._store is None and self.root is not None:
            self._store = RunStore(self.root, fresh=self.fresh).__enter__()
        return self._store

    def close(self) -> None:
        if self._store is not None:
            self._store.__exit__(None, None, None)
            self._store = None

    def continuation(self, parts: list) -> list[int] | None:
        store = self._open()
        return None if store is None else store.get(self.STAGE, content_key(self.STAGE, *parts))

    def keep_continuation(self, parts: list, ids: list[int]) -> None:
        store = self._open()
        if store is not None:
            store.put(self.STAGE, content_key(self.STAGE, *parts), ids)

    def curves(self, parts: list, compute: Callable[[], PairDivergence]) -> PairDivergence:
        store = self._open()
        if store is None:
            return compute()
        key = content_key(self.STAGE, "curves", *parts)
        arrays = get_arrays(store, self.STAGE, key)
        if arrays is None:
            arrays = compute().to_arrays()
            put_arrays(store, self.STAGE, key, arrays)
        return PairDivergence.from_arrays(arrays)


def load_hf(name: str) -> tuple[Any, Any]:
    from transformers import AutoTokenizer

    path = resolve_model(name).path
    return load_probe_model(path), AutoTokenizer.from_pretrained(path)


def _config_only(name: str) -> tuple[Any, Any]:
    """(object with .config, tokenizer) without loading weights: the vLLM path needs no HF model."""
    from types import SimpleNamespace

    from transformers import AutoConfig, AutoTokenizer

    path = resolve_model(name).path
    return SimpleNamespace(config=AutoConfig.from_pretrained(path)), AutoTokenizer.from_pretrained(
        path
    )


def _vllm_depth(path: Path) -> int:
    why = vllm_support(path)
    if why:
        raise UserError(f"--backend vllm cannot probe {path.name}: {why}")
    return model_depth(path)


class _VllmOnDemand:
    """The vllm backend's engine for one model, started at the first uncached pair (sized for
    the longest pair) and closed after the model's last."""

    def __init__(self, path: Path, request: ProbeRequest, prepared: _Prepared) -> None:
        self.path, self.request = path, request
        self.layers = resolve_layers(request.layers, model_depth(path) + 1)
        self.longest = max(
            max(len(a), len(b)) + len(prepared.continuations[name])
            for name, (a, b) in prepared.ids.items()
        )
        self._probe: Any = None
        self._started = False

    def pair_divergence(self, a: list[int], b: list[int], cont: list[int]) -> PairDivergence:
        layers = self.layers
        if self._probe is None:
            room = min(self.longest + 1, config_context(self.path))  # + 1: the generated token
            self._probe, self._started = get_vllm_probe(self.path, layers, max_model_len=room)
        return self._probe.pair_divergence(a, b, cont, layers)

    def close(self) -> None:
        if self._probe is not None and self._started:  # an engine found running stays
            self._probe.close()


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
    model: Any,
    tokenizer: Any,
    request: ProbeRequest,
    notes: list[str],
    cache: UnitCache | None = None,
    model_key: str = "",
    progress: Callable[[str], None] = lambda _msg: None,
    model_path: Path | None = None,
) -> _Prepared:
    """Token ids of every pair and its continuation, all checked before any probe runs."""
    cache = cache or UnitCache(None)
    ids = {spec.name: pair_prompt_ids(tokenizer, spec) for spec in request.pairs}
    _loaded: dict[str, list[int]] = {}
    context = getattr(model.config, "max_position_embeddings", None)
    for name, (a, b) in ids.items():
        longest = max(len(a), len(b)) + request.t_min
        if context is not None and longest > context:
            raise UserError(
                f"pair '{name}': prompt of {max(len(a), len(b))} tokens + t_min exceeds the "
                f"model's context of {context}"
            )
    conts: dict[str, list[int]] = {}
    for spec in request.pairs:
        source = spec.continuation or request.continuation
        if source != "generate":
            if source not in _loaded:
                ids_c = file_continuation(tokenizer, source)
                _loaded[source] = _fit_continuation(ids_c, request, source, notes)
            conts[spec.name] = _loaded[source]
    for name, (a, b) in ids.items():
        total = max(len(a), len(b)) + len(conts.get(name, [0] * request.tokens))
        if context is not None and total > context:
            raise UserError(
                f"pair '{name}': prompt + continuation = {total} tokens exceeds the model's "
                f"context of {context}"
            )
    wanted = [name for name in ids if name not in conts]
    parts = {
        name: ["continuation", request.generator, model_key, ids[name][0], request.tokens,
               request.seed]
        for name in wanted
    }  # fmt: skip
    samples = {name: cache.continuation(parts[name]) for name in wanted}
    todo = [name for name in wanted if samples[name] is None]
    if todo and request.generator == "vllm":
        progress(f"generating {request.tokens} tokens for {len(todo)} pair(s) on vLLM")
        batch = generate_continuations_vllm(
            model_path, [ids[name][0] for name in todo], request.tokens, seed=request.seed
        )
        for name, sample in zip(todo, batch, strict=True):
            cache.keep_continuation(parts[name], sample)
            samples[name] = sample
    else:
        for name in todo:  # kept pair by pair: a killed run keeps the pairs already sampled
            progress(f"generating {request.tokens} tokens for pair {name}")
            samples[name] = generate_continuation(model, ids[name][0], request.tokens, request.seed)
            cache.keep_continuation(parts[name], samples[name])
    for name in wanted:
        conts[name] = _fit_continuation(samples[name], request, f"pair '{name}'", notes)
    return _Prepared(ids=ids, continuations=conts)


def run_probe(
    request: ProbeRequest,
    loader: Callable[[str], tuple[Any, Any]] = load_hf,
    progress: Callable[[str], None] = lambda _msg: None,
    cache: UnitCache | None = None,
) -> ProbeTables:
    """Run every (model, lam, pair); the first model's continuations are shared by the others
    (an untrained twin cannot write a meaningful continuation of its own)."""
    cache = cache or UnitCache(None)
    notes: list[str] = []
    curves: list[tuple[str, float | None, str, PairDivergence]] = []
    prepared: _Prepared | None = None
    vllm = request.backend == "vllm"
    if vllm and request.lams is not None:
        raise UserError("--attention-bias needs --backend hf (the bias is a transformers hook)")
    if vllm and request.continuation == "generate" and request.generator == "hf":
        raise UserError("--backend vllm loads no transformers model: use --generator vllm")

    for model_name in request.models:
        model, tokenizer = _config_only(model_name) if vllm else loader(model_name)
        resolved = resolve_model(model_name)
        # an unsupported architecture or a bad layer index fails before any pair
        depth = _vllm_depth(resolved.path) if vllm else n_hidden_states(model) - 1
        resolve_layers(request.layers, depth + 1)
        model_key = resolved.content_key
        if prepared is None:
            prepared = prepare(
                model, tokenizer, request, notes, cache, model_key, progress, resolved.path
            )
        probe = _VllmOnDemand(resolved.path, request, prepared) if vllm else None
        try:
            for lam in request.lams if request.lams is not None else [None]:
                for spec in request.pairs:
                    a, b = prepared.ids[spec.name]
                    cont = prepared.continuations[spec.name]
                    tag = f"lam={lam} " if lam is not None else ""
                    progress(f"{model_name} {tag}pair {spec.name}")
                    if probe is not None:
                        compute = partial(probe.pair_divergence, a, b, cont)
                    else:
                        compute = partial(
                            pair_divergence, model, a, b, cont,
                            layers=request.layers, chunk=request.chunk, lam=lam,
                        )  # fmt: skip
                    parts = [model_key, request.backend, a, b, cont, request.layers, lam]
                    curves.append((model_name, lam, spec.name, cache.curves(parts, compute)))
        finally:
            if probe is not None:
                probe.close()
        del model
    tables = build_tables(curves, request)
    tables.notes.extend(notes)
    tables.continuations = prepared.continuations if prepared else {}
    return tables


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
                }
            )
        )
    fits = fit_table(curves, request)
    return ProbeTables(pd.concat(div_parts), pd.concat(next_parts), fits)


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
