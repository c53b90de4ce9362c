"""One run: a list of stages over one StageContext. This module only wires them together.

Everything a bad input could break is checked by `plan_run` before the run folder is created.
Each stage caches its units in the RunStore, so a killed run resumes where it stopped, and
every file is assembled in a fixed order from the units, so a resumed run writes the same rows.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harness.analysis.gate_rows import undecided_conditions
from harness.errors import notice
from harness.results import RESULT_FILES, GateRow
from harness.stages.analyse import AnalyseStage
from harness.stages.base import (
    Records,
    Sequential,
    Stage,
    Timings,
    check_order,
    check_outputs,
    declared_product,
    declared_row,
    kept_output,
    with_t_unit,
    write_output,
)
from harness.stages.context import ProgressBars, RunContext, StageContext, run_context
from harness.stages.fits import FitsStage
from harness.stages.forks import ForksStage
from harness.stages.gates import GateStage
from harness.stages.generate import GenerateStage
from harness.stages.laws import LawsStage
from harness.stages.logs import (
    LogAnalyseStage,
    LogGateStage,
    LogManifestStage,
    LogReportStage,
    LogRulesStage,
    LogScoreStage,
)
from harness.stages.probe import ProbeStage
from harness.stages.probe_cli import (
    ContinuationStage,
    PairCurvesStage,
    ProbeFitsStage,
    ProbeTablesStage,
)
from harness.stages.report import ManifestStage, ReportStage
from harness.stages.score import ScoreStage
from harness.stages.single_turn import SingleTurnStage
from harness.stages.theory import TheoryStage
from harness.store import RunStore
from harness.units.plan import RunPlan, ScorePlan, plan_run
from harness.units.probe_plan import ProbePlan
from harness.units.sequential import SamplePlan, gated_conditions

# In order; a stage reads only what the stages before it produced.
STAGES: list[Stage] = [
    GenerateStage(),
    SingleTurnStage(),  # right after generation: it reuses the generation engine
    ForksStage(),  # so does this one
    ScoreStage(),
    ProbeStage(),
    TheoryStage(),
    FitsStage(),
    LawsStage(),
    AnalyseStage(),
    GateStage(),
    ManifestStage(),
    ReportStage(),
]

# What a sequential run repeats after each batch of samples: the stages from samples to verdicts.
LOOP: list[Stage] = [GenerateStage(), ScoreStage(), AnalyseStage(summary_only=True), GateStage()]

# `harness score` on a chat log
LOG_STAGES: list[Stage] = [
    LogScoreStage(), LogAnalyseStage(), LogRulesStage(), LogGateStage(), LogManifestStage(),
    LogReportStage(),
]  # fmt: skip

# `harness probe`: continuations, pair curves, their tables and fits
PROBE_STAGES: list[Stage] = [
    ContinuationStage(), PairCurvesStage(), ProbeTablesStage(), ProbeFitsStage()
]  # fmt: skip

for _stages in (STAGES, LOOP, LOG_STAGES, PROBE_STAGES):
    check_order(_stages)  # at import: a stage list that reads before it writes never runs


def run_score(plan: ScorePlan, show_progress: bool = False) -> StageContext[ScorePlan]:
    """Score a validated chat log: the matching notes, then every LOG_STAGES stage; returns
    the context (`artifacts.files()` the files written, each held by its path once no later
    stage reads it; `read(LogDigests)` the counts and token frame of the conversations)."""
    for line in plan.matcher.shared_notes():
        notice(f"{plan.logs}: {line}")
    plan.out_dir.mkdir(parents=True, exist_ok=True)
    started = datetime.now(UTC).isoformat(timespec="seconds")
    ctx = StageContext(plan, None, plan.out_dir, started=started)
    run_stages(ctx, LOG_STAGES, show_progress, release=True)
    return ctx


def run_probe(
    plan: ProbePlan, say: Callable[[str], None] = lambda _msg: None
) -> StageContext[ProbePlan]:
    """`harness probe` on a validated plan: every PROBE_STAGES stage over the units of
    `<out>/cache` (a re-run with the same --out resumes); returns the context
    (`artifacts.files()` the files written, `notes` what the user should know)."""
    with RunStore(plan.out_dir, fresh=plan.fresh) as store:
        ctx = StageContext(plan, store, plan.out_dir, say=say, notes=list(plan.notes))
        run_stages(ctx, PROBE_STAGES, show_progress=False)
    return ctx


def run_pipeline(
    config_path: Path,
    out: Path | None = None,
    fresh: bool = False,
    show_progress: bool = True,
    until_decided: bool = False,
    max_samples: int | None = None,
) -> Path:
    """Validate, then run every stage; returns the run folder. `until_decided`: sample until
    the gates decide, from the config's samples up to `max_samples` per condition (as
    `samples: {min, max}` does)."""

    plan = plan_run(Path(config_path), out, until_decided, max_samples)
    return run_plan(plan, fresh, show_progress)


def run_plan(plan: RunPlan, fresh: bool = False, show_progress: bool = True) -> Path:
    """Run every stage of a validated plan; returns the run folder."""
    with RunStore(plan.out_dir, fresh=fresh) as store:
        ctx = run_context(plan, store, started=datetime.now(UTC).isoformat(timespec="seconds"))
        if plan.config.sequential:
            run_sequential(ctx, show_progress)
        else:
            run_stages(ctx, STAGES, show_progress)
    return plan.out_dir


def run_sequential(ctx: RunContext, show_progress: bool = True) -> None:
    """Sample until decided (harness.units.sequential): LOOP over every batch so far, each look
    adding a batch to the gated conditions still undecided; then every stage once over the
    final records. Units are cached, so each look generates and scores only the new batch, and
    a killed run replays its looks from the cache."""
    items = [sel.item.id for sel in ctx.items]
    assert ctx.config.sequential is not None, "run_sequential runs a sequential config"
    plan = SamplePlan.start(ctx.config.sequential, gated_conditions(ctx.config, items))
    try:
        while True:
            ctx.batches = list(plan.batches)
            ctx.artifacts.clear()  # each look generates its records anew (from the cache)
            # the engine stays open between looks: a CPU vLLM start costs ~1 min
            run_stages(ctx, LOOP, show_progress, close_engines=False)
            if not plan.step(undecided_conditions(ctx.artifacts.value(GateRow))):
                break
    except BaseException:
        ctx.engines.close()
        raise
    if ctx.config.forks is None:  # else the forks stage generates on it next
        ctx.engines.close()
    records = ctx.artifacts.value(Records)
    assert isinstance(records, list), "the loop's generate stage wrote the records"
    looks = plan.manifest(sorted({(r.model, r.item, r.policy) for r in records}))
    ctx.artifacts.clear()
    run_stages(ctx, STAGES, show_progress, sequential=looks)


def run_stages(
    ctx: StageContext[Any],
    stages: list[Stage],
    show_progress: bool = True,
    close_engines: bool = True,
    release: bool = False,
    sequential: dict[str, Any] | None = None,
) -> None:
    """Run each stage, write each file it returns (once), put every artifact in the
    context's map, and time each stage (summed over the looks of a sequential run). Before
    the first, the map holds what the pipeline gives (`base.GIVEN`): the timings and the
    sequential run's looks. release: once written, a file no later stage reads is kept in
    the map as its path, not its value (a scored log's windows frame is ~50 MiB per 10,000
    conversations)."""
    from rich.progress import Progress

    ctx.artifacts.set(Timings, ctx.timings)
    ctx.artifacts.set(Sequential, sequential or {})
    with Progress(transient=False, disable=not show_progress) as progress:
        ctx.progress = ProgressBars(progress)
        try:
            for index, stage in enumerate(stages):
                ctx.stage = stage
                with ctx.timed(stage.name):
                    outputs = stage.run(ctx)
                check_outputs(stage, outputs)
                for name, value in outputs.items():
                    _keep(ctx, stage, name, value)
                if release:
                    _release(ctx, stages[index + 1 :])
        finally:
            ctx.stage = None
            if close_engines:
                ctx.engines.close()  # engines a generating stage left open (none on success)
                ctx.backends.close()


def _keep(ctx: StageContext[Any], stage: Stage, name: str, value: object) -> None:
    """Write a returned artifact's file (a Product without one stays in the map only) and
    put its value in the map."""
    product = declared_product(stage, name)
    if product is not None and not product.file:
        ctx.artifacts.put(name, value)
        return
    # every position t in the files is in the run's unit (`harness score`/`probe`: tokens)
    value = with_t_unit(value, declared_row(stage, name) or RESULT_FILES.get(name), ctx.t_unit)
    written = product.written(value) if product is not None else value
    write_output(ctx.out_dir / name, written, declared_row(stage, name))
    ctx.artifacts.put(name, kept_output(ctx.out_dir / name, value), written=True)


def _release(ctx: StageContext[Any], later: list[Stage]) -> None:
    """Keep the written files that no later stage requires as their paths in the run folder
    (a stage reading one where written reads it from there: `ctx.frame` takes a path)."""
    read_later = {a.file for stage in later for a in stage.reads}
    for name in [n for n in ctx.artifacts.files() if n not in read_later]:
        ctx.artifacts.put(name, ctx.out_dir / name)
