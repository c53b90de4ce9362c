"""bench/coverage.py is a check that can fail: its quick run passes on the harness's intervals,
fails on an interval shrunk to half its width, and stops on a metric it cannot find."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pandas as pd
import pytest

BENCH = Path(__file__).parents[2] / "bench"


@pytest.fixture
def bench(monkeypatch):
    """bench/coverage.py as a module (its helpers import each other from bench/)."""
    monkeypatch.syspath_prepend(str(BENCH))
    spec = importlib.util.spec_from_file_location("bench_coverage", BENCH / "coverage.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_quick_run_passes(bench, capsys):
    assert bench.main(["--quick"]) == 0
    out = capsys.readouterr().out
    assert "verdict: pass" in out
    for metric in ("a(t)", "auc", "half_life", "survival_median", "a(k)", "first_fail_median",
                   "pressure_delta", "delta auc", "dependence", "kappa", "sensitivity",
                   "specificity", "decision"):  # fmt: skip
        assert f"/ {metric}:" in out, metric


def test_an_interval_of_half_the_width_fails(bench, monkeypatch, capsys):
    import harness.scoring.adherence as adherence

    real = adherence.mean_interval

    def halved(values, **kwargs):
        ci = real(values, **kwargs)
        mid, half = (ci.low + ci.high) / 2, ci.width / 4
        return type(ci)(ci.estimate, mid - half, mid + half, ci.n, ci.method)

    monkeypatch.setattr(adherence, "mean_interval", halved)
    assert bench.main(["--quick", "--only", "adherence"]) == 1
    out = capsys.readouterr().out
    assert "FAIL adherence auc [mixed n=8 p=0.9]" in out
    assert "verdict: fail" in out


def test_a_missing_column_stops_the_bench(bench, monkeypatch):
    import _adherence_cells
    from _cover import MissingMetric

    real = _adherence_cells.summary
    monkeypatch.setattr(_adherence_cells, "summary", lambda f: real(f).drop(columns="final_low"))
    with pytest.raises(MissingMetric, match="summary.csv: no column final_low for metric 'final'"):
        bench.main(["--quick", "--only", "adherence"])


def test_an_empty_table_is_not_a_pass():
    from _cover import MissingMetric, columns

    with pytest.raises(MissingMetric, match="no rows"):
        columns(pd.DataFrame(columns=["auc_low", "auc_high"]), "auc", "summary.csv")
