"""bench/coverage.py is a check that can fail: its quick run passes on the harness's intervals,
fails on an interval shrunk to half its width, and stops on a metric it cannot find."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.script_module import load_script

BENCH = Path(__file__).parents[2] / "bench"


@pytest.fixture
def bench(monkeypatch):
    """bench/coverage.py as a module (its helpers import each other from bench/)."""
    monkeypatch.syspath_prepend(str(BENCH))
    return load_script(BENCH / "coverage.py", "bench_coverage")


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
    # the quick grid's one cell asserted on: a failing cell is topped up to 5 x its runs, and
    # the other adherence cell (sticky, anytime) would take ~10 s more of them
    mixed = tuple(cell for cell in bench.QUICK if cell[2][:2] == ("mixed", 8))
    assert len(mixed) == 1
    monkeypatch.setattr(bench, "QUICK", mixed)
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


def test_an_empty_table_is_not_a_pass(bench):
    from _cover import MissingMetric, columns  # bench/ on the path: the fixture's

    with pytest.raises(MissingMetric, match="no rows"):
        columns(pd.DataFrame(columns=["auc_low", "auc_high"]), "auc", "summary.csv")


def test_a_cell_below_the_floor_is_topped_up_and_judged_on_the_pooled_runs(bench, capsys):
    """The full run's rule: a cell at 184 of 200 (0.920 < 0.93, a Monte-Carlo miss of a
    correct interval) gets 800 more runs at its own seed and passes on the pooled 1,000; a
    broken interval (half its runs) stays failing; a cell above the floor is left alone."""
    from _cover import Cell, verdict

    calls = []

    def scenario(rate_first: float, rate_more: float, reps: int, rng):
        calls.append(reps)
        rate = rate_first if reps == 200 else rate_more
        return [Cell("adherence", "auc", f"first {rate_first}", round(rate * reps), reps)]

    grid = [("adherence", scenario, (0.92, 0.97)), ("adherence", scenario, (0.5, 0.5)),
            ("adherence", scenario, (0.965, 0.0))]  # fmt: skip
    cells = bench.measure(grid, 200, 0, {"adherence"}, progress=False, quick=False)
    assert calls == [200, 800, 200, 800, 200]  # the third is not topped up
    assert [(c.held, c.runs, c.first_runs) for c in cells] == [
        (960, 1000, 200),
        (500, 1000, 200),
        (193, 200, 0),
    ]
    assert verdict(cells) == 1
    out = capsys.readouterr().out
    assert "topped up (below the floor, p < 0.05 before Holm at first): 2" in out
    assert "adherence auc [first 0.92]: 960 of 1000 = 0.960 over 200 + 800 runs" in out
    assert "FAIL adherence auc [first 0.5]" in out and "FAIL adherence auc [first 0.92]" not in out


def test_an_80_percent_interval_labelled_95_fails_the_quick_run(bench, monkeypatch, capsys):
    """Every interval primitive of harness.stats asked for 95 % gives its 80 % interval: the
    quick run's fixed-n pass-rate cell (exact binomial, close to its level) fails."""
    import sys

    import harness.stats as S

    names = ("mean_interval", "binomial_interval", "paired_interval", "quantile_interval")
    real = {name: getattr(S, name) for name in names}

    def at_80(f):
        def shrunk(*args, **kwargs):
            return f(*args, **{**kwargs, "level": 0.80})

        return shrunk

    # the harness's and the bench's modules only: getattr on a third-party lazy module (a
    # transformers model package another test imported) would import what it stands for
    repo = str(BENCH.parent)
    ours = [m for m in list(sys.modules.values())
            if str(getattr(m, "__file__", None) or "").startswith(repo)]  # fmt: skip
    for module in ours:
        for name in names:
            if getattr(module, name, None) is real[name]:
                monkeypatch.setattr(module, name, at_80(real[name]))
    mixed = tuple(cell for cell in bench.QUICK if cell[2][:2] == ("mixed", 8))
    monkeypatch.setattr(bench, "QUICK", mixed)
    assert bench.main(["--quick", "--only", "adherence"]) == 1
    out = capsys.readouterr().out
    assert "FAIL adherence pass_1 [mixed n=8 p=0.9]" in out


def test_an_empty_interval_is_a_miss_and_no_interval_is_reported_apart():
    import _cover

    frame = pd.DataFrame({"m_low": [0.1, np.nan, np.nan], "m_high": [0.9, np.nan, np.nan],
                          "m_method": ["exact", "none (empty running intersection)",
                                       "none (cannot tell: n = 2)"]})  # fmt: skip
    cell = _cover.coverage_cell("f", "m", "s", *_cover.columns(frame, "m", "test"), 0.5)
    assert (cell.held, cell.runs) == (1, 2)  # the empty one missed; the third left apart
    assert cell.none == pytest.approx(1 / 3)
    never = _cover.coverage_cell("f", "m", "s", [np.nan] * 3, [np.nan] * 3, 0.5)
    assert never.runs == 0 and not _cover.needs_top_up(never)
