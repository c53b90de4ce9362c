"""The stages of `harness score` on a chat log (docs/architecture.md, "Logged conversations"):
score, analyse, manifest, report, over one `ScoreContext` built from a validated `ScorePlan`
(`harness.plan.plan_score`: everything a bad input could break is checked before the first of
them runs). As in a run, each stage returns its files and `pipeline.run_stages` writes them,
every CSV through its row model (docs/results.md).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from harness.analysis.conversations import conversation_summary, turn_curves
from harness.engines.pool import EnginePool
from harness.plan import ScorePlan
from harness.report import render_report
from harness.results import (
    AdherenceCurveRow,
    AdherenceRow,
    ConversationRow,
    LoggedRow,
    ResultRow,
    SurvivalRow,
    TurnAdherenceRow,
    TurnRow,
    WindowRow,
)
from harness.scoring.io import adherence_frames
from harness.scoring.judge import JudgeRunner
from harness.scoring.logged import LoggedScores, log_totals, score_logged
from harness.stages.base import (
    Manifest,
    Output,
    ProgressBars,
    Report,
    Stage,
    StageTimings,
    check_order,
    typed_frame,
)
from harness.store import RunStore

if TYPE_CHECKING:  # annotations only: pandas loads where frames are made
    import pandas as pd


@dataclass
class ScoreContext(StageTimings):
    """What the score stages share: the plan, then what earlier stages produced."""

    plan: ScorePlan
    out_dir: Path
    progress: ProgressBars = field(default_factory=ProgressBars)
    outputs: dict[str, Output] = field(default_factory=dict)  # file name -> value written
    timings: dict[str, float] = field(default_factory=dict)
    started: str = ""
    scores: LoggedScores | None = None  # the score stage's counts and tokens (frames: outputs)
    engines: EnginePool = field(default_factory=EnginePool)  # none: judges own theirs
    stage: Stage | None = None  # the stage running now: `frame` reads only what it declared

    def frame(self, row: type[ResultRow]) -> pd.DataFrame:
        """An earlier stage's CSV, typed by its row model (as `RunContext.frame`)."""
        import pandas as pd

        if self.stage is not None and row not in self.stage.reads:
            raise RuntimeError(f"stage {self.stage.name} reads {row.file} without declaring it")
        value = self.outputs.get(row.file)
        return typed_frame(row, value) if value is not None else pd.DataFrame()


class LogScoreStage:
    """windows.csv, turns.csv and logged_conversations.csv: the log scored a chunk at a time
    with the model's tokenizer and chat template (judge checks ask through one JudgeRunner,
    their verdicts cached under the folder's cache/judge/)."""

    name = "score"
    reads = ()
    writes = (WindowRow, TurnRow, LoggedRow)

    def run(self, ctx: ScoreContext) -> dict[str, Output]:
        plan = ctx.plan
        store = RunStore(ctx.out_dir) if plan.judge_checks else contextlib.nullcontext()
        with store as opened, JudgeRunner(opened, plan.judges) as judges:
            scores = score_logged(
                plan.logs,
                plan.suites,
                plan.matcher,
                plan.tokenizer,
                plan.model,
                plan.config,
                judges,
                log_format=plan.log_format,
                run_id=plan.run_id,
            )
        # the frames live on in `outputs` only, let go of once no later stage reads them
        ctx.scores = replace(scores, windows=None, turns=None, logged=None)
        return {
            "windows.csv": scores.windows,
            "turns.csv": scores.turns,
            "logged_conversations.csv": scores.logged,
        }


class LogAnalyseStage:
    """The adherence files from windows.csv; turn_adherence.csv and conversations.csv from
    turns.csv (the replies' token counts: nothing is injected into a log)."""

    name = "analyse"
    reads = (WindowRow, TurnRow)
    writes = (AdherenceRow, AdherenceCurveRow, SurvivalRow, TurnAdherenceRow, ConversationRow)

    def run(self, ctx: ScoreContext) -> dict[str, Output]:
        turns = ctx.frame(TurnRow)
        return {
            **adherence_frames(ctx.frame(WindowRow)),
            "turn_adherence.csv": turn_curves(turns),
            "conversations.csv": conversation_summary(turns, ctx.scores.tokens),
        }


class LogManifestStage:
    """manifest.json: `command: score`, its run id, the log, the model, the counts, the
    matching notes."""

    name = "manifest"
    reads = (LoggedRow,)
    writes = (Manifest,)

    def run(self, ctx: ScoreContext) -> dict[str, Output]:
        plan = ctx.plan
        return {
            "manifest.json": {
                "command": "score",
                "run_id": plan.run_id,
                "log": str(plan.logs.resolve()),
                "log_format": plan.log_format,
                "model": plan.model,
                "item": plan.item,
                "counts": log_totals(ctx.frame(LoggedRow)),
                "matching": plan.matcher.shared_notes(),
                "timings": dict(ctx.timings),
                "started": ctx.started,
                "finished": datetime.now(UTC).isoformat(timespec="seconds"),
            }
        }


class LogReportStage:
    """report.html: the report of a log (`harness.report.logs`)."""

    name = "report"
    reads = (TurnRow, LoggedRow, Manifest)
    writes = (Report,)

    def run(self, ctx: ScoreContext) -> dict[str, Output]:
        render_report(ctx.out_dir, ctx.plan.worst, ctx.plan.with_text)
        return {}


LOG_STAGES: list[Stage] = [LogScoreStage(), LogAnalyseStage(), LogManifestStage(), LogReportStage()]
check_order(LOG_STAGES)  # at import, as the run's stage lists
