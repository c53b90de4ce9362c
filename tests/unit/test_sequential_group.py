"""The group-sequential test (harness.stats.group_sequential) and bench/sequential.py's
simulation: exact errors at the planned looks, exact figures against simulated paths, the
fixed baseline on the power sawtooth, and the bench's exit status."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from harness.stats.group_sequential import design

LOOKS = [4, 5, 7, 9, 11, 15, 19, 25, 33, 42, 55, 72, 93, 121, 157]


@pytest.fixture(scope="module")
def test_design():
    return design(LOOKS, 0.8, 0.05)


def test_each_side_errs_at_most_alpha_at_every_rate_and_looking_costs_nominal_level(test_design):
    at = test_design.outcome(0.8)
    assert at.passes <= 0.05 and at.fails <= 0.05
    assert at.passes > 0.04 and at.fails > 0.04  # calibrated, not Bonferroni's 0.05 / 15
    for p in (0.6, 0.7, 0.79, 0.7999):
        assert test_design.outcome(p).passes <= at.passes + 1e-12
    for p in (0.8001, 0.85, 0.95):
        assert test_design.outcome(p).fails <= at.fails + 1e-12
    # a fixed-n bound at the full 0.05 looked at 15 times errs well above 0.05
    naive = type(test_design)(tuple(LOOKS), 0.8, 0.05, 0.05).outcome(0.8)
    assert max(naive.passes, naive.fails) > 0.08
    assert 0.05 / len(LOOKS) < min(test_design.alpha_pass, test_design.alpha_fail) < 0.05


@pytest.mark.parametrize("p", [0.65, 0.8, 0.93])
def test_the_exact_figures_match_simulated_paths(test_design, p):
    rng = np.random.default_rng(7)
    verdicts, taken = [], []
    for _ in range(3000):
        path = rng.random(LOOKS[-1]) < p
        for index, n in enumerate(LOOKS):
            verdict = test_design.decide(int(path[:n].sum()), index)
            if verdict or index == len(LOOKS) - 1:
                verdicts.append(verdict)
                taken.append(n)
                break
    exact = test_design.outcome(p)
    se = np.sqrt(0.25 / 3000)
    assert abs(verdicts.count("pass") / 3000 - exact.passes) < 4 * se
    assert abs(verdicts.count("fail") / 3000 - exact.fails) < 4 * se
    assert np.mean(taken) == pytest.approx(exact.samples, rel=0.05)


def test_looks_must_increase():
    with pytest.raises(ValueError, match="increasing"):
        design([8, 4], 0.8, 0.05)


@pytest.fixture
def bench(monkeypatch):
    monkeypatch.syspath_prepend(str(Path(__file__).parents[2] / "bench"))
    import sequential

    return sequential


def test_the_fixed_baseline_gets_all_ten_right_with_the_power(bench):
    assert bench.fixed_n(0.9) == 88
    assert bench.fixed_powers(88).prod() == pytest.approx(0.904, abs=5e-4)
    # n = 77 gives each condition 0.9 but all ten right only 0.867; 78 drops to 0.874 alone
    assert bench.fixed_powers(77).min() >= 0.9
    assert bench.fixed_powers(77).prod() == pytest.approx(0.867, abs=5e-4)
    assert bench.fixed_powers(78).min() == pytest.approx(0.874, abs=5e-4)


def test_the_quick_bench_passes_and_exits_1_when_the_goal_is_missed(bench, capsys, monkeypatch):
    import _sequential_sim

    assert bench.main(["--quick"]) == 0
    out = capsys.readouterr().out
    assert "20 simulated runs" in out and "ratio per run mean" in out
    assert "MISS" not in out
    monkeypatch.setattr(_sequential_sim, "GOAL_RATIO", 10.0)
    assert bench.main(["--runs", "4"]) == 1
    assert "MISS: ratio" in capsys.readouterr().out
