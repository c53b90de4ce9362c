"""Gates stage: the config's gates checked on summary.csv (and, for rule gates and turn
metrics, rules.csv, rule_curves.csv, turn_adherence.csv, conversations.csv) -> gates.csv and
junit.xml.

It reads summary.csv as written (not the frame in memory), and of the other files only those
this run wrote (through its checked context), so `harness gate DIR CONFIG`, which re-evaluates
a finished run folder on the files its manifest lists, writes byte for byte what the run
wrote. A run without gates writes a header-only gates.csv and an empty junit.xml, so no stale
verdict of an earlier config stays in the folder.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from harness.analysis.gate_junit import junit_xml
from harness.analysis.gate_sources import GATE_TABLES, read_gate_tables
from harness.analysis.gates import GATE_COLUMNS, evaluate_gates, read_summary
from harness.analysis.rules import rule_frames, rule_sentences
from harness.atomic import atomic_write_text
from harness.config.gate_specs import Family, GateSpec, gate_levels, gate_units
from harness.config.policy_specs import policy_label
from harness.config.run import RunConfig, TaskItem
from harness.config.sampling import schedule
from harness.results import (
    ConversationRow,
    GateRow,
    RuleCurveRow,
    RuleRow,
    SummaryRow,
    TurnAdherenceRow,
    TurnRow,
    WindowRow,
    typed_frame,
)
from harness.scoring.io import adherence_frames
from harness.stages.base import JUnit, RunFiles
from harness.stages.context import RunContext
from harness.store import write_csv


def gate_outputs(
    config: RunConfig, items: list[TaskItem], files: Mapping[str, Path]
) -> dict[str, Any]:
    """{"gates.csv": frame, "junit.xml": text} of `config`'s gates on the run's summary.csv and
    the GATE_TABLES among `files` (name -> path: the files the run wrote, never every file its
    folder holds), each judging the run's `items` that hold a unit of it
    (`harness.config.gate_specs.gate_units`)."""
    if config.gates:
        summary = read_summary(files["summary.csv"])
        # the level each bound is tested at (harness.config.gate_specs.gate_level)
        st = config.stats
        # a sequential run's auc/final gates: the group-sequential test at its looks
        looks = tuple(schedule(config.sequential)) if config.sequential else None
        single = [policy_label(p) for p in config.policies]
        talks = [policy_label(p) for p in config.conversation_policies or config.policies]
        by_id = {item.id: item for item in items}
        units = {
            index: [i.id for i in gate_units(gate, [by_id[i] for i in gate.items or by_id],
                                             single, talks)]
            for index, gate in enumerate(config.gates)
        }  # fmt: skip
        frame = evaluate_gates(
            config.gates, summary, list(by_id), list(config.models), st.level, st.family,
            tables=read_gate_tables(files), units=units, looks=looks,
        )  # fmt: skip
    else:
        frame = pd.DataFrame(columns=GATE_COLUMNS)
    return {"gates.csv": frame, "junit.xml": junit_xml(frame, config.name)}


class GateStage:
    """summary.csv, on disk -> gates.csv, junit.xml; rule gates and turn metrics read
    rules.csv, rule_curves.csv, turn_adherence.csv and conversations.csv where a stage of this
    run wrote them (`reads_if_written`, through `ctx.written`: a sequential run's loop looks at
    summary.csv alone, and these gates are decided after it, on the final analysis)."""

    name = "gates"
    reads = (SummaryRow, RunFiles)
    reads_if_written = (RuleRow, RuleCurveRow, TurnAdherenceRow, ConversationRow)
    writes = (GateRow, JUnit)

    def run(self, ctx: RunContext) -> dict[str, object]:
        files = {"summary.csv": ctx.path(SummaryRow), **ctx.written(GATE_TABLES)}
        return gate_outputs(ctx.config, [sel.item for sel in ctx.items], files)


def score_gates(
    out: Path, suites: list[Any], gates: list[Any], level: float = 0.95, name: str = "score",
    written: Collection[str] = (), family: Family = "holm",
) -> pd.DataFrame:  # fmt: skip
    """`harness score`'s per-rule files and gates on a file of records or texts (a chat log's
    are stages of its own: `harness.stages.logs`), from the files it wrote into `out`
    (`written`, by name: a file an earlier command left there is not read): rules.csv and
    rule_curves.csv from windows.csv (and turns.csv), then `gates` checked on adherence.csv
    (what summary.csv is to a run; made again with the one-sided bounds at the gates' levels)
    and those files -> gates.csv, junit.xml. `level`, `family`: stats.level and stats.family,
    as in a run. Returns gates.csv's frame (empty without gates)."""
    windows = typed_frame(WindowRow, read_scored(out / "windows.csv"))
    turns = None
    if "turns.csv" in written:
        turns = typed_frame(TurnRow, read_scored(out / "turns.csv"))
    checked = scored_gate_levels(gates, windows, level, family)
    sentences = rule_sentences((i.id, c) for suite in suites for i in suite.items for c in i.checks)
    frames = rule_frames(windows, turns, sentences=sentences, level=level, gate_level=checked)
    if gates:  # the bounds the gates read, at their levels (score_files made them at level)
        frames.update(adherence_frames(windows, level=level, gate_level=checked))
    for file, frame in frames.items():
        write_csv(frame, out / file)
    written = [*written, *frames]
    if not gates:
        return pd.DataFrame(columns=GATE_COLUMNS)
    tables = {n: out / n for n in GATE_TABLES if n in written}
    outputs = scored_gate_outputs(
        gates, windows, out / "adherence.csv", tables, level, name, family
    )
    verdicts: pd.DataFrame = outputs["gates.csv"]
    write_csv(verdicts, out / "gates.csv")
    atomic_write_text(out / "junit.xml", outputs["junit.xml"])
    return verdicts


def scored_gate_outputs(
    gates: list[Any], windows: pd.DataFrame, adherence: Path, files: Mapping[str, Path],
    level: float = 0.95, name: str = "score", family: Family = "holm",
) -> dict[str, Any]:  # fmt: skip
    """{"gates.csv": frame, "junit.xml": text} of `harness score`'s gates: checked on
    adherence.csv (what summary.csv is to a run) and the GATE_TABLES among `files` (name ->
    path, what the command wrote), each judging the scored items (`windows`, as
    `read_scored` reads them) that hold a unit of it. Their error adds up over the checks
    as a run's (`family`, `harness.analysis.gate_family`): adherence.csv and rules.csv hold
    the one-sided bounds at `scored_gate_levels`."""
    models, items = scored_conditions(windows)
    units = {index: _scored_items(windows, gate) for index, gate in enumerate(gates)}
    frame = evaluate_gates(
        gates, read_summary(adherence), items, models, level, family,
        tables=read_gate_tables(files), units=units,
    )  # fmt: skip
    return {"gates.csv": frame, "junit.xml": junit_xml(frame, name)}


def scored_conditions(windows: pd.DataFrame) -> tuple[list[str], list[str]]:
    """The models and items of what `harness score` scored, in the order first seen: the
    run's `config.models` and items, to its gates."""
    models = list(dict.fromkeys(windows["model"].astype(str)))
    return models, list(dict.fromkeys(windows["item"].astype(str)))


def scored_gate_levels(
    gates: list[Any], windows: pd.DataFrame, level: float, family: Family
) -> tuple[float, ...]:
    """The levels `harness score`'s gates test their one-sided bounds at (a run's
    `gate_levels`, over the scored models and items): where adherence.csv and rules.csv make
    them."""
    models, items = scored_conditions(windows)
    return gate_levels(gates, models, items, level, family)


def _scored_items(windows: pd.DataFrame, gate: GateSpec) -> list[str]:
    """The items of what was scored that hold a unit of `gate` (its policy's rows, its rule's):
    of its `items:` where named (a named item with none fails: it cannot be verified)."""
    if gate.items:
        return list(gate.items)
    rows = windows[windows["policy"].astype(str) == gate.policy]
    if gate.rule is not None:
        rows = rows[rows["rule"].astype(str) == gate.rule]
    return list(dict.fromkeys(rows["item"].astype(str)))


def read_scored(path: Path) -> pd.DataFrame:
    """A scored file as written (windows.csv, turns.csv), its condition and text columns kept
    as strings."""
    strings = ("run_id", "model", "task", "item", "policy", "check", "rule", "reason",
               "finish_reason", "conversation_id")  # fmt: skip
    frame = pd.read_csv(
        path, dtype=dict.fromkeys(strings, str), keep_default_na=False, na_values=[""],
        low_memory=False,
    )  # fmt: skip
    present = [c for c in strings if c in frame.columns]
    return frame.assign(**{c: frame[c].fillna("") for c in present})
