"""The stages of `harness score` on a chat log (docs/architecture.md, "Logged conversations"):
score, analyse, rules, manifest, report, over one `StageContext` built from a validated
`ScorePlan`
(`harness.units.plan.plan_score`: everything a bad input could break is checked before the first of
them runs). As in a run, each stage returns its files and `pipeline.run_stages` writes them,
every CSV through its row model (docs/results.md).
"""

from __future__ import annotations

import contextlib
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from harness.analysis.conversations import (
    conversation_summary,
    merge_turn_digests,
    turn_curves,
    turn_digest,
)
from harness.analysis.gate_sources import GATE_TABLES
from harness.analysis.rules import rule_frames, rule_sentences
from harness.config.gate_specs import gate_levels
from harness.report import render_report
from harness.report.load import KNOWN_FILES
from harness.results import (
    AdherenceCurveRow,
    AdherenceRow,
    ConversationRow,
    GateRow,
    LoggedRow,
    RuleCurveRow,
    RuleRow,
    SurvivalRow,
    TurnAdherenceRow,
    TurnRow,
    WindowRow,
    typed_frame,
)
from harness.scoring.adherence import TASK_CONDITION
from harness.scoring.io import adherence_frames
from harness.scoring.judge import JudgeRunner
from harness.scoring.logged import LoggedScores, TurnDigests, log_totals, score_logged
from harness.stages.base import (
    FILES_OF_A_RUN,
    JUnit,
    Manifest,
    Output,
    Product,
    Report,
    RunFiles,
    Timings,
    WrittenFile,
    artifact_name,
)
from harness.stages.context import StageContext
from harness.stages.gates import read_scored, scored_gate_levels, scored_gate_outputs
from harness.store import RunStore
from harness.units.plan import ScorePlan

if TYPE_CHECKING:  # annotations only: pandas loads where frames are made
    pass


ScoreContext = StageContext[ScorePlan]


class LogDigests(Product[LoggedScores]):
    """The scored chunks' digests of windows.csv and turns.csv and their token
    sums, what the analysis files are computed from (the CSVs themselves are on disk)."""


class LogScoreStage:
    """windows.csv, turns.csv and logged_conversations.csv: the log scored a chunk at a time
    with the model's tokenizer and chat template (judge checks ask through one JudgeRunner,
    their verdicts cached under the folder's cache/judge/)."""

    name = "score"
    reads = ()
    writes = (WindowRow, TurnRow, LoggedRow, LogDigests)

    def run(self, ctx: ScoreContext) -> dict[str, Output]:
        plan = ctx.plan
        store = RunStore(ctx.out_dir) if plan.judge_checks else contextlib.nullcontext()
        # the chunks' part files, beside the folder's files (the joined ones are moved there)
        spill = tempfile.TemporaryDirectory(prefix=".scoring-", dir=ctx.out_dir)
        with spill as parts, store as opened, JudgeRunner(opened, plan.judges) as judges:
            scores = score_logged(
                plan.logs,
                plan.suites,
                plan.matcher,
                plan.tokenizer,
                plan.model,
                plan.config,
                Path(parts),
                ctx.out_dir,
                TurnDigests(turn_digest, merge_turn_digests),
                judges,
                log_format=plan.log_format,
                run_id=plan.run_id,
            )
        return {
            "windows.csv": WrittenFile(scores.windows),
            "turns.csv": WrittenFile(scores.turns),
            "logged_conversations.csv": WrittenFile(scores.logged),
            artifact_name(LogDigests): scores,
        }


class LogAnalyseStage:
    """The adherence files from windows.csv's digest; turn_adherence.csv and conversations.csv
    from turns.csv's (the replies' token counts: nothing is injected into a log)."""

    name = "analyse"
    reads = (LogDigests,)
    writes = (AdherenceRow, AdherenceCurveRow, SurvivalRow, TurnAdherenceRow, ConversationRow)

    def run(self, ctx: ScoreContext) -> dict[str, Output]:
        scores, plan = ctx.read(LogDigests), ctx.plan
        # the gates' one-sided bounds at their levels (as a run's analyse stage makes them),
        # over the scored models and items (`scored_gate_levels`, from the digest's keys)
        keys = list(scores.window_digest.conditions or {})
        models, items = (
            list(dict.fromkeys(str(key[TASK_CONDITION.index(c)]) for key in keys))
            for c in ("model", "item")
        )
        checked = gate_levels(plan.gates, models, items, plan.stats.level, plan.stats.family)
        return {
            **adherence_frames(scores.window_digest, level=plan.stats.level, gate_level=checked),
            "turn_adherence.csv": turn_curves(scores.turn_digest),
            "conversations.csv": conversation_summary(scores.turn_digest, scores.tokens),
        }


class LogManifestStage:
    """manifest.json: `command: score`, its run id, the log, the model, the counts, the
    matching notes, the files written before it (`files`, as a run's manifest)."""

    name = "manifest"
    reads = (LoggedRow, Timings, RunFiles)
    writes = (Manifest,)

    def run(self, ctx: ScoreContext) -> dict[str, Output]:
        plan, timings = ctx.plan, ctx.read(Timings, {})
        return {
            "manifest.json": {
                "command": "score",
                "run_id": plan.run_id,
                "log": str(plan.logs.resolve()),
                "log_format": plan.log_format,
                "model": plan.model,
                "item": plan.item,
                "counts": log_totals(ctx.frames(LoggedRow)),
                "matching": plan.matcher.shared_notes(),
                "timings": dict(timings),
                "started": ctx.started,
                "finished": datetime.now(UTC).isoformat(timespec="seconds"),
                "files": ctx.read(RunFiles, []),
            }
        }


class LogGateStage:
    """gates.csv and junit.xml: the plan's gates (the suites' and `--gates`') on what this
    command wrote (adherence.csv, the gate tables), before the manifest and the report, so
    the manifest lists them and the report shows their verdicts. Without gates, none."""

    name = "gates"
    reads = (WindowRow, AdherenceRow, RunFiles)
    reads_if_written = (RuleRow, RuleCurveRow, TurnAdherenceRow, ConversationRow)
    writes = (GateRow, JUnit)

    def run(self, ctx: ScoreContext) -> dict[str, Output]:
        if not ctx.plan.gates:
            return {}
        windows = typed_frame(WindowRow, read_scored(ctx.path(WindowRow)))
        files = ctx.written(GATE_TABLES)
        plan = ctx.plan
        return scored_gate_outputs(
            plan.gates, windows, ctx.path(AdherenceRow), files, plan.stats.level,
            plan.logs.name, plan.stats.family,
        )  # fmt: skip


class LogReportStage:
    """report.html: the report of a log (`harness.report.logs`), from the files this
    command wrote (`ctx.written`, checked against this declaration)."""

    name = "report"
    reads = (TurnRow, LoggedRow, Manifest, RunFiles)
    reads_if_written = FILES_OF_A_RUN  # as a run's report, from the folder as written
    writes = (Report,)

    def run(self, ctx: ScoreContext) -> dict[str, Output]:
        files = ctx.written(KNOWN_FILES)
        render_report(ctx.out_dir, ctx.plan.worst, ctx.plan.with_text, files=files)
        return {}


class LogRulesStage:
    """rules.csv and rule_curves.csv: each rule alone (`harness.analysis.rules`), from the
    written windows.csv and turns.csv (read whole: a log of ~10,000 conversations holds
    ~50 MiB of windows)."""

    name = "rules"
    reads = (WindowRow, TurnRow)
    writes = (RuleRow, RuleCurveRow)

    def run(self, ctx: ScoreContext) -> dict[str, Output]:
        plan, windows = ctx.plan, ctx.frame(WindowRow)
        checks = ((i.id, c) for s in plan.suites for i in s.items for c in i.checks)
        sentences = rule_sentences(checks)
        checked = scored_gate_levels(plan.gates, windows, plan.stats.level, plan.stats.family)
        return rule_frames(
            windows, ctx.frame(TurnRow), sentences=sentences, level=plan.stats.level,
            gate_level=checked,
        )  # fmt: skip
