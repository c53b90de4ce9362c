"""The stages of `harness probe` (docs/architecture.md, "The flow of one run"): continuations,
probe, tables, fits, over one `StageContext` built from a validated `ProbePlan`
(`harness.units.probe_plan.plan_probe`: every input is checked before the first of them runs). As
in a run, each stage declares what it reads and writes and returns its files, which
`pipeline.run_stages` writes, every CSV through a run's own row model (`harness.results.probing`:
a pair is a record of item = the pair's name, policy `none` or `attention_bias-<lam>`).

Units are kept under `<out>/cache/probe-cli` (a RunStore): each pair's generated
continuation and each (model, lam, pair) curve set, keyed by content (`unit_key`). A killed
probe re-run with the same --out redoes only the unit in flight and writes the same rows as an
uninterrupted one (every curve goes through the store, float64 exact).
"""

from __future__ import annotations

import json
from functools import partial
from typing import Any

from harness.analysis.probe_tables import (
    ProbedPair,
    attention_frame,
    divergence_frame,
    nexttoken_frame,
    probe_fits,
)
from harness.models import ResolvedModel
from harness.probes.backend import (
    Backend,
    HfBackend,
    backend_dtype,
    cached_curves,
    map_pairs,
)
from harness.probes.pairs import PairSpec, generate_continuation, generate_continuations_vllm
from harness.probes.precision import key_params
from harness.results import AttentionRow, DivergenceRow, FitRow, NextTokenRow
from harness.stages.base import Output, Product, artifact_name
from harness.stages.context import StageContext
from harness.store import unit_key
from harness.units.probe_plan import ProbePlan, fit_continuation

UNITS = "probe-cli"  # the cache folder and STAGE_VERSIONS entry of the probe's units


class Continuations(Product[dict[str, list[int]]]):
    """Each pair's shared continuation ids (continuations.jsonl, rows reusable as
    `--continuation FILE#row`)."""

    file = "continuations.jsonl"

    @classmethod
    def written(cls, value: dict[str, list[int]]) -> object:
        rows = [json.dumps({"pair": name, "continuation_ids": ids}) for name, ids in value.items()]
        return "".join(row + "\n" for row in rows)


class ProbedPairs(Product[list[ProbedPair]]):
    """Every (model, lam, pair, PairDivergence), in the plan's order."""


ProbeContext = StageContext[ProbePlan]


def unit_key_of(model: ResolvedModel, inputs: list[Any], params: dict[str, Any]) -> str:
    return unit_key(UNITS, model=model.content_key, inputs=inputs, params=params)


class ContinuationStage:
    """continuations.jsonl: the files' continuations (read by the plan), then those of
    `--continuation generate`, sampled by the first model from prompt A (an untrained twin
    cannot write a meaningful continuation of its own) and shared by every model."""

    name = "continuations"
    reads = ()
    writes = (Continuations,)

    def run(self, ctx: ProbeContext) -> dict[str, Output]:
        plan = ctx.plan
        continuations = dict(plan.given)
        wanted = {name: a for name, (a, _) in plan.ids.items() if name not in plan.given}
        samples = _sampled(ctx, wanted)
        for name in wanted:
            where = f"pair '{name}'"
            ids = fit_continuation(samples[name], plan.request, where, ctx.notes)
            continuations[name] = ids
        return {"continuations.jsonl": continuations}


def _sampled(ctx: ProbeContext, prompts: dict[str, list[int]]) -> dict[str, list[int]]:
    """Each pair's sampled continuation of prompt A, from the cache or generated (on vLLM all
    in one batch; on hf pair by pair, each kept at once)."""
    req, model = ctx.plan.request, ctx.plan.models[0]
    params = {"generator": req.generator, "tokens": req.tokens, "seed": req.seed}
    if req.generator == "hf":  # sampled by the probe's own model, in its dtype
        params |= key_params(backend_dtype(req.backend, req.dtype, model.path))
    keys = {name: unit_key_of(model, [a], params) for name, a in prompts.items()}
    samples: dict[str, Any] = {name: ctx.cache.get(UNITS, key) for name, key in keys.items()}
    todo = [name for name in prompts if samples[name] is None]
    if todo and req.generator == "vllm":
        ctx.say(f"generating {req.tokens} tokens for {len(todo)} pair(s) on vLLM")
        batch = generate_continuations_vllm(
            model.path, [prompts[name] for name in todo], req.tokens, seed=req.seed
        )
        for name, sample in zip(todo, batch, strict=True):
            ctx.cache.put(UNITS, keys[name], sample)
            samples[name] = sample
    elif todo:
        hf = ctx.backends.get(ctx.plan, model)
        assert isinstance(hf, HfBackend), "--generator hf runs with --backend hf (the plan)"
        for name in todo:  # kept pair by pair: a killed run keeps the pairs already sampled
            ctx.say(f"generating {req.tokens} tokens for pair {name}")
            sample = generate_continuation(hf.model(), prompts[name], req.tokens, req.seed)
            ctx.cache.put(UNITS, keys[name], sample)
            samples[name] = sample
    return samples


class PairCurvesStage:
    """Every (model, lam, pair) curve set, from the cache or computed on the model's backend
    (on an endpoint, `concurrency` requests at a time); each model's backend is closed before
    the next starts."""

    name = "probe"
    reads = (Continuations,)
    writes = (ProbedPairs,)

    def run(self, ctx: ProbeContext) -> dict[str, Output]:
        continuations = ctx.read(Continuations)
        longest = max(
            max(len(a), len(b)) + len(continuations[name]) for name, (a, b) in ctx.plan.ids.items()
        )
        pairs: list[ProbedPair] = []
        for model in ctx.plan.models:
            try:
                backend = ctx.backends.get(ctx.plan, model, longest)
                pairs += _model_curves(ctx, model, backend, continuations)
            finally:
                ctx.backends.close()
        return {artifact_name(ProbedPairs): pairs}


def _model_curves(
    ctx: ProbeContext, model: ResolvedModel, backend: Backend, continuations: dict[str, list[int]]
) -> list[ProbedPair]:
    from harness.probes.divergence import PairDivergence  # lazy: loads torch

    req = ctx.plan.request

    def one(unit: tuple[float | None, PairSpec]) -> ProbedPair:
        lam, spec = unit
        a, b = ctx.plan.ids[spec.name]
        cont = continuations[spec.name]
        ctx.say(f"{model.name} {f'lam={lam} ' if lam is not None else ''}pair {spec.name}")
        compute = partial(backend.curves, a, b, cont, req.layers, lam)
        params = {"backend": req.backend, "layers": req.layers, "lam": lam,
                  **key_params(backend_dtype(req.backend, req.dtype, model.path))}  # fmt: skip
        if req.backend == "openai":  # the KL's bracket depends on the lists' length
            params["top_k"] = req.top_k
        key = unit_key_of(model, [a, b, cont], params)
        arrays = cached_curves(ctx.cache, UNITS, key, compute)
        return (model.name, lam, spec.name, PairDivergence.from_arrays(arrays))

    lams = req.lams if req.lams is not None else [None]
    return map_pairs(backend, one, [(lam, spec) for lam in lams for spec in req.pairs])


class ProbeTablesStage:
    """nexttoken.csv, and divergence.csv and attention.csv where the backend hands out hidden
    states (an endpoint does not), every t of every curve set."""

    name = "tables"
    reads = (ProbedPairs,)
    writes = (DivergenceRow, NextTokenRow, AttentionRow)

    def run(self, ctx: ProbeContext) -> dict[str, Output]:
        req = ctx.plan.request
        curves = ctx.read(ProbedPairs)
        files = {"nexttoken.csv": nexttoken_frame(curves, req.backend)}
        if req.backend != "openai":
            files["divergence.csv"] = divergence_frame(curves)
            files["attention.csv"] = attention_frame(curves)
        return files


class ProbeFitsStage:
    """fits.csv: alpha of every curve set, and pooled over the pairs (per model, and per
    policy of a lam sweep)."""

    name = "fits"
    reads = (ProbedPairs,)
    writes = (FitRow,)

    def run(self, ctx: ProbeContext) -> dict[str, Output]:
        req = ctx.plan.request
        return {"fits.csv": probe_fits(ctx.read(ProbedPairs), req.t_min, req.n_boot)}
