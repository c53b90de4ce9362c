"""Gates stage: the config's gates checked on summary.csv (and, for rule gates and turn
metrics, rules.csv, rule_curves.csv, turn_adherence.csv, conversations.csv) -> gates.csv and
junit.xml.

It reads summary.csv as written (not the frame in memory), so `harness gate DIR CONFIG`, which
re-evaluates a finished run folder, writes byte for byte what the run wrote. A run without
gates writes a header-only gates.csv and an empty junit.xml, so no stale verdict of an earlier
config stays in the folder.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from harness.analysis.gates import (
    GATE_COLUMNS,
    evaluate_gates,
    junit_xml,
    read_gate_tables,
    read_summary,
)
from harness.config import RunConfig
from harness.results import GateRow, SummaryRow
from harness.stages.base import JUnit, RunContext


def gate_outputs(config: RunConfig, items: list[str], run_dir: Path) -> dict:
    """{"gates.csv": frame, "junit.xml": text} of `config`'s gates on run_dir/summary.csv."""
    if config.gates:
        summary = read_summary(Path(run_dir) / "summary.csv")
        st = config.stats  # the level each bound is tested at (harness.gate_specs.gate_level)
        frame = evaluate_gates(
            config.gates, summary, items, list(config.models), st.level, st.family,
            tables=read_gate_tables(Path(run_dir)),
        )  # fmt: skip
    else:
        frame = pd.DataFrame(columns=GATE_COLUMNS)
    return {"gates.csv": frame, "junit.xml": junit_xml(frame, config.name)}


class GateStage:
    """summary.csv, on disk -> gates.csv, junit.xml; rule gates and turn metrics read
    rules.csv, rule_curves.csv, turn_adherence.csv and conversations.csv where the folder has
    them (not declared: a sequential run's loop looks at summary.csv alone, and these gates
    are decided after it, on the final analysis)."""

    name = "gates"
    reads = (SummaryRow,)
    writes = (GateRow, JUnit)

    def run(self, ctx: RunContext) -> dict:
        return gate_outputs(ctx.config, [sel.item.id for sel in ctx.items], ctx.out_dir)
