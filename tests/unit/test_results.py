"""The result files' row models: column docs, the key and interval names, the frame helper,
the report's reading, the generated docs, and the one check-scoring routine."""

from __future__ import annotations

import math
import re

import pandas as pd
import pytest

from harness.config.run import TaskSuite
from harness.report.load import load_run, read_result
from harness.results import (
    CONDITION,
    RECORD,
    RESULT_FILES,
    ROWS,
    RUN_SAMPLE,
    SAMPLE,
    TASK_CONDITION,
    AdherenceCurveRow,
    ForkRow,
    SummaryRow,
    TurnRow,
    WindowRow,
    result_frame,
)
from harness.results.table import COLUMNS_DOC, DOC, column_docs, doc_block, generated_block
from harness.scoring.score import item_checks, score_checks
from harness.stages.forks import ForkArm, score_arms

ITEM = TaskSuite.model_validate(
    {
        "suite": "demo",
        "items": [
            {
                "id": "x",
                "system": "s",
                "user": "u",
                "checks": [
                    {"type": "regex_must_not", "pattern": "chat", "name": "no-chat"},
                    {"type": "regex_must", "pattern": "cat", "name": "cat", "scope": "response"},
                ],
            }
        ],
    }
).items[0]


def test_every_column_has_a_doc_and_every_key_is_a_column():
    assert len(RESULT_FILES) == len(ROWS) == 31
    for row in ROWS:
        for name in row.columns():
            assert row.column_doc(name), f"{row.file}: column {name} has no doc"
        assert row.keys and set(row.keys) <= set(row.columns()), row.file
        assert row.written_by and row.row, row.file


def test_key_sets_are_distinct_names_for_distinct_concepts():
    assert CONDITION == ("model", "item", "policy")
    assert TASK_CONDITION == ("model", "task", "item", "policy")
    assert SAMPLE == ("seed", "sample") and RUN_SAMPLE == ("run_id", "seed", "sample")
    assert RECORD == ("model", "item", "policy", "sample")
    assert set(WindowRow.keys) >= {*TASK_CONDITION, *RUN_SAMPLE}


def test_every_interval_is_metric_low_and_metric_high():
    for row in ROWS:
        columns = row.columns()
        for name in columns:
            assert not re.search(r"(^|_)(lo|hi)$|^ci_|_ci_", name), f"{row.file}: {name}"
            base, _, side = name.rpartition("_")
            if side in ("low", "high"):
                other = f"{base}_{'high' if side == 'low' else 'low'}"
                assert base in columns and other in columns, f"{row.file}: {name}"
                assert "interval" in row.column_doc(name)


def test_result_frame_orders_the_declared_columns_and_checks_every_cell():
    row = {"model": "m", "task": "d", "item": "x", "policy": "none", "t": 1}
    row |= {"a": 0.5, "a_low": 0.25, "a_high": 0.75, "n": 4, "method": "clopper-pearson"}
    frame = result_frame(AdherenceCurveRow, [dict(reversed(list(row.items())))])
    assert list(frame.columns) == AdherenceCurveRow.columns()
    # a column declared with a default (t_unit: tokens) is filled where a row lacks it
    assert frame.iloc[0].to_dict() == {**row, "t_unit": "tokens"}
    assert list(result_frame(AdherenceCurveRow).columns) == AdherenceCurveRow.columns()
    with pytest.raises(ValueError, match=r"adherence_curve.csv: column n: 'four' is not a int"):
        result_frame(AdherenceCurveRow, [{**row, "n": "four"}])
    with pytest.raises(ValueError, match=r"column t: 1.5 is not a int"):
        result_frame(AdherenceCurveRow, [{**row, "t": 1.5}])
    with pytest.raises(ValueError, match=r"column item: empty at row 0"):
        result_frame(AdherenceCurveRow, [{**row, "item": None}])
    with pytest.raises(ValueError, match=r"missing column\(s\) a_high"):
        result_frame(AdherenceCurveRow, pd.DataFrame([row]).drop(columns="a_high"))
    with pytest.raises(ValueError, match=r"undeclared column\(s\) lo"):
        result_frame(AdherenceCurveRow, [{**row, "lo": 0.2}])
    with pytest.raises(ValueError, match=r"column arm: 'neither' is not one of with, without"):
        fork = {"model": "m", "item": "x", "policy": "none", "sample": 0, "fork_t": 8}
        fork |= {"arm": "neither", "draw": 0, "check": "c", "scope": "window", "value": 1.0}
        result_frame(ForkRow, [{**fork, "passed": True, "reason": ""}])


def test_summary_places_its_per_layer_columns_after_alpha_mean_and_refuses_others():
    row = dict.fromkeys(SummaryRow.columns(), math.nan) | {"model": "m", "item": "x"}
    row |= {"policy": "none", "half_life_censored": True, "tokens_generated": 8}
    row |= {"tokens_injected": 0, "tokens_restated": 0, "t_unit": "tokens"}
    frame = result_frame(SummaryRow, [{**row, "alpha_L3": 0.5, "alpha_L3_low": 0.4}])
    at = SummaryRow.columns().index(SummaryRow.extra_after) + 1
    assert SummaryRow.extra_after == "alpha_mean_method"  # alpha_mean, its interval and units
    assert list(frame.columns[at : at + 2]) == ["alpha_L3", "alpha_L3_low"]
    with pytest.raises(ValueError, match="undeclared column"):
        result_frame(SummaryRow, [{**row, "alpha_L3_lo": 0.4}])


def test_the_docs_tables_are_generated_from_the_models():
    """Run `python -m harness.results.table --write` after changing a row model."""
    assert doc_block(DOC.read_text(encoding="utf-8")) == generated_block()
    assert COLUMNS_DOC.read_text(encoding="utf-8") == column_docs()


def test_the_report_reads_a_file_through_its_model(tmp_path):
    row = {"model": "m", "task": "d", "item": "007", "policy": "none", "t": 1}
    row |= {"a": 0.5, "a_low": 0.25, "a_high": 0.75, "n": 4, "method": "clopper-pearson"}
    path = tmp_path / "adherence_curve.csv"
    result_frame(AdherenceCurveRow, [row]).to_csv(path, index=False)
    frame, problem = read_result(path, AdherenceCurveRow)
    assert problem is None and frame["item"].tolist() == ["007"]  # ids stay strings
    pd.DataFrame([row]).rename(columns={"a_low": "lo", "a_high": "hi"}).to_csv(path, index=False)
    data = load_run(tmp_path)
    assert "adherence_curve.csv" not in data.frames
    assert data.problems["adherence_curve.csv"] == "missing column(s) a_high, a_low"
    pd.DataFrame([{**row, "n": "many"}]).to_csv(path, index=False)
    assert read_result(path, AdherenceCurveRow)[1] == "column n: 'many' is not a int"


def test_one_check_scoring_routine_fills_the_verdict_columns_of_each_row_model():
    checks = item_checks(ITEM)
    base = {"model": "m", "item": "x", "policy": "none", "sample": 0, "fork_t": 4, "draw": 0}
    texts = (("with", "a cat"), ("without", "le chat"))
    jobs = [(c, {**base, "arm": arm}, text) for arm, text in texts for c in checks]
    rows = score_checks(ForkRow, jobs, judges=None)
    assert all(isinstance(r, ForkRow) for r in rows)
    assert [(r.arm, r.check, r.scope, r.passed) for r in rows] == [  # per check, job order
        ("with", "regex_must_not:no-chat", "window", True),
        ("without", "regex_must_not:no-chat", "window", False),
        ("with", "regex_must:cat", "response", True),
        ("without", "regex_must:cat", "response", False),
    ]
    turn = {"run_id": "r", "model": "m", "task": "d", "item": "x", "policy": "none", "seed": 1}
    turn |= {"sample": 0, "turn": 2, "pressure": False, "t_start": 5, "t_end": 9, "tokens": 5}
    turn |= {"finish_reason": "stop"}
    turn |= {"history": "logged", "conversation_id": "c-1"}
    (scored,) = score_checks(TurnRow, [(checks[0], turn, "le chat")], judges=None)
    assert isinstance(scored, TurnRow) and "scope" not in TurnRow.model_fields
    assert (scored.check, scored.passed, scored.turn) == ("regex_must_not:no-chat", False, 2)
    assert (scored.history, scored.conversation_id) == ("logged", "c-1")


def test_fork_arms_are_scored_through_the_routine():
    arms = [
        ForkArm(model="m", item="x", policy="none", sample=1, fork_t=8, arm=arm, draw=d, seed=3,
                prompt_tokens=10, token_ids=[1], text=text, finish_reason="length")
        for d, (arm, text) in enumerate((("with", "cat"), ("without", "chat!")))
    ]  # fmt: skip
    rows = score_arms(arms, {"x": ITEM}, None, judges=None)
    frame = result_frame(ForkRow, rows)
    assert list(frame.columns) == ForkRow.columns()
    assert frame[["arm", "draw", "check", "passed"]].values.tolist() == [
        ["with", 0, "regex_must_not:no-chat", True],
        ["without", 1, "regex_must_not:no-chat", False],
        ["with", 0, "regex_must:cat", True],
        ["without", 1, "regex_must:cat", False],
    ]


# The probe files' columns as they were before the field groups (results/probing.py): sharing
# the measurements must not move a column of a file (`harness probe` writes these same files).
PROBE_COLUMNS = {
    "DivergenceRow": (
        "model item policy sample pair layer t turn role l2 rel_l2 cos_dist below_floor"
    ),
    "NextTokenRow": "model item policy sample pair t delta_logp kl kl_low kl_high backend",
    "TurnInfluenceRow": "model item policy sample pair turn t kl kl_low kl_high delta_logp backend",
    "AttentionRow": "model item policy sample pair layer t turn role prompt_len share_prompt_mean "
    "share_prompt_max_head share_sink_mean share_sink_max_head uniform",
    "FitRow": "model item policy pair layer metric alpha alpha_low alpha_high n method r2 t_min "
    "t_max reason",
}


def test_the_shared_measurement_fields_keep_each_files_column_order():
    import harness.results.probing as probing

    for name, columns in PROBE_COLUMNS.items():
        row = getattr(probing, name)
        # every file with positions ends with the unit they are in
        assert row.columns() == [*columns.split(), "t_unit"], name
    # one declaration: both files with the next-token influence document kl alike
    assert probing.NextTokenRow.column_doc("kl") == probing.TurnInfluenceRow.column_doc("kl")
    frame = result_frame(probing.NextTokenRow, [
        {"backend": "hf", "kl_high": 0.2, "kl_low": 0.1, "kl": 0.1, "delta_logp": -1.0,
         "t": 1, "pair": "p/none/0", "sample": 0, "policy": "none", "item": "p", "model": "m"},
    ])  # fmt: skip
    assert list(frame.columns) == [*PROBE_COLUMNS["NextTokenRow"].split(), "t_unit"]
    with pytest.raises(ValueError, match="undeclared column"):  # no `lam` column any more
        result_frame(probing.NextTokenRow, frame.assign(lam=0.5))


def test_a_field_group_without_a_place_fails_when_the_model_is_defined():
    from typing import ClassVar

    from harness.results.base import FieldGroup, ResultRow

    class Shared(FieldGroup):
        x: float

    with pytest.raises(TypeError, match="place every field group"):

        class Unplaced(ResultRow, Shared):
            t: int

    with pytest.raises(TypeError, match="Shared follows no column 'nope'"):

        class Misplaced(ResultRow, Shared):
            place: ClassVar = {Shared: "nope"}
            t: int

    class Placed(ResultRow, Shared):
        place: ClassVar = {Shared: "t"}
        t: int
        y: int

    assert Placed.columns() == ["t", "x", "y"]
