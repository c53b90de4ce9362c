"""Issue 56: the run's gates share one false-verdict budget by default (`stats.family: holm`):
Holm's step-down decides what Bonferroni leaves undecided, says so in gates.csv and the
terminal, keeps the per-check behaviour as `stats.family: none`, and holds its family-wise
error at 1 - level in simulation through the project's code (bench/gate_family.py)."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from harness.analysis.gate_rows import undecided_conditions
from harness.analysis.gates import evaluate_gates
from harness.config.gate_specs import GateSpec, gate_levels
from harness.config.run import StatsConfig
from harness.report.terminal import family_line

ITEMS = ["clear", "close"]
GATES = [GateSpec(metric="auc", policy="none", min=0.5, items=[i]) for i in ITEMS]


def _row(item: str, lcb: float, ladder: list[float]) -> dict:
    """A summary.csv row whose auc lower bound is `lcb` at 1 - 0.05 / 2 and `ladder` at Holm's
    later level 1 - 0.05 / 1."""
    levels = gate_levels(GATES, ["m"], ITEMS, 0.95, "holm")[1:]
    steps = {"levels": levels, "auc": [[b, 1.0] for b in ladder], "final": [[0, 1]] * len(ladder)}
    return {"model": "m", "item": item, "policy": "none", "auc": 0.8, "auc_low": 0.4,
            "auc_high": 1.0, "auc_n": 20, "auc_method": "clopper-pearson", "auc_lcb": lcb,
            "auc_ucb": 1.0, "n": 20, "holm_bounds": json.dumps(steps)}  # fmt: skip


SUMMARY = pd.DataFrame([_row("clear", 0.7, [0.75]), _row("close", 0.45, [0.52])])


def test_holm_is_the_default_and_per_check_stays_a_setting():
    assert StatsConfig().family == "holm"
    assert StatsConfig(family="none").family == "none"
    assert gate_levels(GATES, ["m"], ITEMS, 0.95, "holm") == pytest.approx((0.975, 0.95))


def test_holm_decides_at_its_second_step_what_bonferroni_leaves_undecided():
    holm = evaluate_gates(GATES, SUMMARY, ITEMS, ["m"], 0.95, "holm").set_index("item")
    # step 1 (1 - 0.05/2): `clear` passes, `close` (lcb 0.45) straddles 0.5; step 2
    # (1 - 0.05/1): its bound 0.52 clears it
    assert holm["verdict"].to_dict() == {"clear": "pass", "close": "pass"}
    assert holm.loc["close", "level"] == pytest.approx(0.95)
    assert holm.loc["clear", "level"] == pytest.approx(0.975)
    assert set(holm["family"]) == {"holm"} and (holm["family_level"] == 0.95).all()
    bonferroni = evaluate_gates(GATES, SUMMARY, ITEMS, ["m"], 0.95, "bonferroni")
    assert bonferroni.set_index("item").loc["close", "verdict"] == "undecided"
    # `--until-decided` samples the conditions Holm leaves undecided: none here
    assert undecided_conditions(holm.reset_index()) == set()
    assert undecided_conditions(bonferroni) == {("m", "close", "none")}


def test_the_terminal_states_the_shared_budget_beside_the_per_check_figure():
    holm = evaluate_gates(GATES, SUMMARY, ITEMS, ["m"], 0.95, "holm")
    line = family_line(holm)
    assert "Holm over 2 bounds (stats.family: holm)" in line
    assert "any of their verdicts is wrong is <= 5 %" in line
    assert "per check, stats.family: none, it would be <= 10 %" in line


def test_a_metric_without_one_sided_bounds_stands_outside_the_budget():
    gates = [*GATES, GateSpec(metric="half_life", policy="none", min=10, items=["clear"])]
    summary = SUMMARY.assign(half_life=50.0, half_life_low=40.0, half_life_high=60.0,
                             half_life_n=20, half_life_censored=False)  # fmt: skip
    frame = evaluate_gates(gates, summary, ITEMS, ["m"], 0.95, "holm")
    assert frame["family"].tolist() == ["holm", "holm", "outside"]
    assert "1 bounds outside it" in family_line(frame)


def test_holm_keeps_the_family_wise_error_of_8_gates_within_the_level(gate_family_bench):
    """100 simulated runs of 8 auc gates (4 clear passes, 4 just under the bound): Holm's
    share of runs with a wrong verdict stays within 5 % + 3 Monte-Carlo errors; per check it
    is higher (its bound is 8 x 5 % = 40 %)."""
    rates = gate_family_bench.family_error(100, seed=0)
    mc = math.sqrt(0.05 * 0.95 / 100)
    assert rates["holm"] <= 0.05 + 3 * mc, rates
    assert rates["none"] > rates["holm"], rates
