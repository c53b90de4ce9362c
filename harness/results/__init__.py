"""Every result file of a run folder declared once: one row model per CSV (its columns, in
order, with their docs), the key column names, and the helpers that build, check and read
frames through them. Stages write `result_frame(Row, rows)`; the report reads `read_result`.
"""

from __future__ import annotations

from harness.results.analysis import (
    CalibrationRow,
    CarriedRow,
    CorrelationRow,
    GateRow,
    LinkageRow,
    PolicyRow,
    PredictorRow,
    SummaryRow,
)
from harness.results.base import (
    CONDITION,
    RECORD,
    RUN_SAMPLE,
    SAMPLE,
    TASK_CONDITION,
    ResultRow,
    as_bool,
    cells_are,
    column_kind,
    column_problem,
    frame_columns,
    pair_id,
    result_frame,
    typed_frame,
)
from harness.results.conversations import (
    ConversationRow,
    LoggedRow,
    SingleTurnRow,
    TurnAdherenceRow,
    TurnRow,
)
from harness.results.prescription import PrescriptionRow
from harness.results.probing import (
    AttentionRow,
    AttentionTurnRow,
    BiasRow,
    DivergenceRow,
    FitRow,
    LawRow,
    NextTokenRow,
    RelayRow,
    TurnInfluenceRow,
)
from harness.results.quality import QualityRow
from harness.results.rules import RuleCurveRow, RuleRow
from harness.results.scoring import (
    AdherenceCurveRow,
    AdherenceRow,
    ForkRow,
    SurvivalRow,
    WindowRow,
)

# In the order of docs/architecture.md's table (the run's stage order).
ROWS: tuple[type[ResultRow], ...] = (
    WindowRow,
    AdherenceRow,
    AdherenceCurveRow,
    SurvivalRow,
    RuleRow,
    RuleCurveRow,
    DivergenceRow,
    NextTokenRow,
    AttentionRow,
    AttentionTurnRow,
    FitRow,
    LawRow,
    SummaryRow,
    CorrelationRow,
    PredictorRow,
    PolicyRow,
    QualityRow,
    CalibrationRow,
    ForkRow,
    CarriedRow,
    LinkageRow,
    TurnRow,
    TurnAdherenceRow,
    ConversationRow,
    LoggedRow,
    SingleTurnRow,
    TurnInfluenceRow,
    RelayRow,
    BiasRow,
    GateRow,
    PrescriptionRow,
)
RESULT_FILES: dict[str, type[ResultRow]] = {row.file: row for row in ROWS}
# the files `harness probe` writes into its folder: a run's own (its rows, every t)
PROBE_FILES: dict[str, type[ResultRow]] = {
    row.file: row for row in (DivergenceRow, NextTokenRow, AttentionRow, FitRow)
}

__all__ = [
    "CONDITION",
    "PROBE_FILES",
    "RECORD",
    "RESULT_FILES",
    "ROWS",
    "RUN_SAMPLE",
    "SAMPLE",
    "TASK_CONDITION",
    "AdherenceCurveRow",
    "AdherenceRow",
    "AttentionRow",
    "AttentionTurnRow",
    "BiasRow",
    "CalibrationRow",
    "CarriedRow",
    "ConversationRow",
    "CorrelationRow",
    "DivergenceRow",
    "FitRow",
    "LawRow",
    "ForkRow",
    "GateRow",
    "LinkageRow",
    "LoggedRow",
    "NextTokenRow",
    "PolicyRow",
    "PrescriptionRow",
    "PredictorRow",
    "QualityRow",
    "RelayRow",
    "ResultRow",
    "RuleCurveRow",
    "RuleRow",
    "SingleTurnRow",
    "SummaryRow",
    "SurvivalRow",
    "TurnAdherenceRow",
    "TurnInfluenceRow",
    "TurnRow",
    "WindowRow",
    "as_bool",
    "cells_are",
    "column_kind",
    "column_problem",
    "frame_columns",
    "pair_id",
    "result_frame",
    "typed_frame",
]
