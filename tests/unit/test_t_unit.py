"""Every result file with positions says which unit t is in (`t_unit`), and the report's t axes
name it: the unit's name per engine and positions setting, the column filled when a file is
written, the axes labelled."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import pytest

from harness.engines.positions import t_unit_name
from harness.errors import UserError
from harness.report.render import label_t_axes
from harness.results import AdherenceCurveRow, GateRow, WindowRow
from harness.stages.base import with_t_unit


@pytest.mark.parametrize(
    ("engine", "positions", "tokenizer", "unit"),
    [
        ("vllm", None, None, "tokens"),
        ("hf", "chars", None, "tokens"),  # positions apply to the chat engine only
        ("chat", None, None, "logprobs+chars"),
        ("chat", "logprobs", "tiktoken:o200k_base", "logprobs+tiktoken:o200k_base"),
        ("chat", "chars", None, "chars"),
        ("chat", "hf:smollm2-135m-instruct", None, "hf:smollm2-135m-instruct"),
    ],
)
def test_the_unit_of_t_per_engine_and_positions(engine, positions, tokenizer, unit):
    assert t_unit_name(engine, positions, tokenizer) == unit


def test_an_unknown_positions_setting_is_one_error():
    with pytest.raises(UserError, match="positions: 'bytes' is not one of"):
        t_unit_name("chat", "bytes")


def test_every_file_with_positions_gets_the_runs_unit_when_written():
    assert "t_unit" in WindowRow.columns() and "t_unit" in AdherenceCurveRow.columns()
    frame = pd.DataFrame({"t": [1, 2], "t_unit": ["tokens", "tokens"]})
    assert list(with_t_unit(frame, AdherenceCurveRow, "chars")["t_unit"]) == ["chars", "chars"]
    gates = pd.DataFrame({"metric": ["auc"]})  # no positions: left as it is
    assert "t_unit" not in with_t_unit(gates, GateRow, "chars").columns


def test_the_reports_t_axes_name_the_unit_and_turn_axes_do_not():
    fig = go.Figure().set_subplots(rows=2, cols=1)
    fig.update_xaxes(title_text="t (continuation position)", row=1)
    fig.update_xaxes(title_text="turn k", row=2)
    label_t_axes({"a": fig}, "logprobs+chars")
    assert fig.layout.xaxis.title.text == "t (continuation position) [logprobs+chars]"
    assert fig.layout.xaxis2.title.text == "turn k"
    label_t_axes({"a": fig}, None)  # no unit known: nothing added
    assert fig.layout.xaxis.title.text.count("[") == 1
