"""One run: a list of stages over one RunContext. This module only wires them together.

Everything a bad input could break is checked by `plan_run` before the run folder is created.
Each stage caches its units in the RunStore, so a killed run resumes where it stopped, and
every file is assembled in a fixed order from the units, so a resumed run writes the same rows.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from harness.plan import plan_run
from harness.stages.analyse import AnalyseStage
from harness.stages.base import ProgressBars, RunContext, Stage, write_output
from harness.stages.fits import FitsStage
from harness.stages.forks import ForksStage
from harness.stages.gates import GateStage
from harness.stages.generate import GenerateStage
from harness.stages.probe import ProbeStage
from harness.stages.report import ManifestStage, ReportStage
from harness.stages.score import ScoreStage
from harness.stages.theory import TheoryStage
from harness.store import RunStore

# In order; a stage reads only what the stages before it produced.
STAGES: list[Stage] = [
    GenerateStage(),
    ForksStage(),  # right after generation: it reuses the generation engine
    ScoreStage(),
    ProbeStage(),
    TheoryStage(),
    FitsStage(),
    AnalyseStage(),
    GateStage(),
    ManifestStage(),
    ReportStage(),
]


def run_pipeline(
    config_path: Path, out: Path | None = None, fresh: bool = False, show_progress: bool = True
) -> Path:
    """Validate, then run every stage; returns the run folder."""

    plan = plan_run(Path(config_path), out)
    with RunStore(plan.out_dir, fresh=fresh) as store:
        ctx = RunContext(
            config=plan.config,
            store=store,
            out_dir=plan.out_dir,
            run_id=plan.run_id,
            suites=plan.suites,
            items=plan.items,
            models=plan.models,
            twins=plan.twins,
            probe_backends=plan.probe_backends,
            started=datetime.now(UTC).isoformat(timespec="seconds"),
        )
        run_stages(ctx, STAGES, show_progress)
    return plan.out_dir


def run_stages(ctx: RunContext, stages: list[Stage], show_progress: bool = True) -> None:
    """Run each stage, write each file it returns (once), and time it."""
    from rich.progress import Progress

    with Progress(transient=False, disable=not show_progress) as progress:
        ctx.progress = ProgressBars(progress)
        try:
            for stage in stages:
                with ctx.timed(stage.name):
                    outputs = stage.run(ctx)
                for name, value in outputs.items():
                    write_output(ctx.out_dir / name, value)
                    ctx.outputs[name] = value
        finally:
            ctx.engines.close()  # engines a generating stage left open (none on success)
