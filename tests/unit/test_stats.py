"""harness.stats: coverage on a small seeded grid per method, n = 1 and all-equal cases, widths."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.stats import Interval, mean_interval, none_interval, paired_interval, verdict
from harness.stats.bootstrap import bootstrap_interval

GRID = [(n, p) for n in (4, 16) for p in (0.5, 0.9)]
REPS = 120


def _coverage(draw, truth: float, **kw) -> tuple[float, set[str]]:
    rng = np.random.default_rng(7)
    hits, methods = 0, set()
    for _ in range(REPS):
        ci = draw(rng)
        hits += ci.covers(truth)
        methods.add(ci.method)
    return hits / REPS, methods


@pytest.mark.parametrize("anytime", [False, True])
@pytest.mark.parametrize(("n", "p"), GRID)
def test_binary_coverage(n, p, anytime):
    cov, methods = _coverage(
        lambda rng: mean_interval(rng.random(n) < p, anytime=anytime, value_type="binary"), p
    )
    assert methods == {"beta-binomial-cs" if anytime else "clopper-pearson"}
    assert cov >= 0.93, cov


@pytest.mark.parametrize("anytime", [False, True])
@pytest.mark.parametrize(("n", "p"), GRID)
def test_bounded_coverage(n, p, anytime):
    # per-sample shares of 8 windows: bounded, not 0/1, so the betting interval
    cov, methods = _coverage(
        lambda rng: mean_interval(rng.binomial(8, p, size=n) / 8, anytime=anytime), p
    )
    # fixed n: a run of 4 whole passes is 0/1 data and gets the binomial method; anytime: the
    # fraction type's one method, whatever the values
    if anytime:
        assert methods == {"beta-binomial-cs+betting-cs"}
    else:
        assert methods <= {"betting", "clopper-pearson"}
    assert cov >= 0.93, cov


@pytest.mark.parametrize(("n", "p"), GRID)
def test_paired_coverage(n, p):
    # two arms sharing a seed: b passes whenever a does, plus 20 % more often when a fails
    def draw(rng):
        u = rng.random(n)
        return paired_interval(u < p * 0.8, u < p, anytime=False)

    cov, methods = _coverage(draw, -0.2 * p)
    assert methods == {"betting"}
    assert cov >= 0.93, cov


def test_clopper_pearson_values_and_n1():
    ci = mean_interval([1, 1, 1, 1])
    assert ci.method == "clopper-pearson" and ci.n == 4 and ci.estimate == 1.0
    assert ci.low == pytest.approx(0.025**0.25) and ci.high == 1.0
    one = mean_interval([0.0])
    assert one.n == 1 and one.low == 0.0 and one.high == pytest.approx(0.975)
    # on other bounds the same interval, mapped
    scaled = mean_interval([2, 2, 2, 2], lower=-2, upper=2)
    assert scaled.low == pytest.approx(-2 + 4 * 0.025**0.25)


def test_empty_and_nan_units():
    ci = mean_interval([math.nan, math.nan])
    assert ci.n == 0 and math.isnan(ci.estimate) and math.isnan(ci.low)
    assert ci.method == "none (n = 0)"
    assert mean_interval([1, math.nan, 0]).n == 2


def test_all_equal_interior_values():
    ci = mean_interval([0.5] * 10)
    assert ci.method == "betting" and ci.estimate == 0.5
    assert 0.25 < ci.low < 0.5 < ci.high < 0.75
    assert mean_interval([0.5]).width == pytest.approx(1.0)  # one unit in the interior: no bet wins
    many = mean_interval([0.5] * 200)
    assert many.width < 0.1 and many.covers(0.5)


def test_widths_shrink_and_cs_is_wider_on_binary():
    rng = np.random.default_rng(1)
    x = rng.random(64) < 0.7
    widths = [mean_interval(x[:n]).width for n in (8, 16, 32, 64)]
    assert widths == sorted(widths, reverse=True)
    fixed, seq = mean_interval(x), mean_interval(x, anytime=True)
    assert seq.width > fixed.width and seq.width < 1.6 * fixed.width
    bounded = mean_interval(rng.uniform(0.6, 0.8, size=64))
    assert bounded.width < 0.15  # adapts to the small variance (Hoeffding's would be 0.34)


@pytest.mark.parametrize("binary", [True, False])
def test_confidence_sequence_is_nested(binary):
    # the running intersection: what is looked at after every sample only ever shrinks, so a
    # stop at any time keeps the coverage of the whole path
    rng = np.random.default_rng(3)
    x = (rng.random(40) < 0.8).astype(float) if binary else rng.uniform(0.5, 1.0, size=40)
    cs = [mean_interval(x[:n], anytime=True) for n in range(1, 41)]
    for before, after in zip(cs, cs[1:], strict=False):
        assert before.low <= after.low and after.high <= before.high


def test_bad_input():
    with pytest.raises(ValueError, match="outside the bounds"):
        mean_interval([0.5, 1.5])
    with pytest.raises(ValueError, match="between 0 and 1"):
        mean_interval([0.5], level=1.0)
    with pytest.raises(ValueError, match="differ in length"):
        paired_interval([1, 0], [1])


def test_paired_identical_arms_contain_zero():
    ci = paired_interval([1, 0, 1, 1, 0, 1], [1, 0, 1, 1, 0, 1])
    assert ci.estimate == 0.0 and ci.low < 0 < ci.high and ci.n == 6


def test_verdict_three_outcomes():
    ci = Interval(0.7, 0.6, 0.8, 10, "betting")
    assert verdict(ci, 0.5, "min") == "pass" and verdict(ci, 0.9, "min") == "fail"
    assert verdict(ci, 0.7, "min") == "undecided" and verdict(ci, 0.85, "max") == "pass"
    assert verdict(ci, 0.5, "max") == "fail" and verdict(ci, 0.7, "max") == "undecided"
    assert verdict(none_interval(1.0, 1, "n < 2"), 0.5, "min") == "undecided"


def test_bootstrap_interval():
    draws = np.arange(1000, dtype=float)
    ci = bootstrap_interval(5.0, draws, n=7, level=0.9)
    assert (ci.low, ci.high) == pytest.approx((49.95, 949.05)) and ci.n == 7
    grid = np.array([1.0, 2.0, np.inf, np.inf, 3.0, np.nan])
    disc = bootstrap_interval(2.0, grid, n=3, level=0.5, discrete=True)
    assert disc.low in grid and disc.high == np.inf
    few = bootstrap_interval(1.0, [np.nan, 2.0], n=2, min_finite=10)
    assert math.isnan(few.low) and few.method == "none (1 usable draws)"


def test_row_names_columns():
    row = mean_interval([1, 0, 1]).row("auc")
    assert set(row) == {"auc", "auc_low", "auc_high", "auc_n", "auc_method"}
    assert row["auc_n"] == 3 and row["auc_method"] == "clopper-pearson"


@pytest.mark.parametrize("anytime", [False, True])
def test_many_units_are_tested_a_slice_of_means_at_a_time(anytime):
    """20,000 bounded values (a chat log's conversations): the betting interval's arrays stay
    a slice of the 2001 candidate means wide (one (n, 2001) float array alone is 305 MiB)."""
    import tracemalloc

    x = np.random.default_rng(5).random(20_000) * 0.5 + 0.25
    tracemalloc.start()
    ci = mean_interval(x, anytime=anytime)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 64 * 2**20, peak / 2**20
    method = "beta-binomial-cs+betting-cs" if anytime else "betting"
    assert ci.low < 0.5 < ci.high and ci.method == method
    # the fraction type's betting part adapts to these low-variance values (the beta-binomial
    # sequence alone, which spends the variance of 0/1 data, was 0.035 wide)
    assert ci.width < 0.02


def _betting_rejected_by_the_formula(x: np.ndarray, alpha: float, anytime: bool) -> np.ndarray:
    """The hedged-capital test written as its formula, every (t, m) cell at once: what the
    in-place, sliced, two-layout code of `harness.stats` must reproduce bit for bit."""
    from harness.stats import TRUNCATION, _bets, _grid

    lam, m = _bets(x, alpha, anytime)[:, None], _grid()[None, :]
    with np.errstate(divide="ignore"):
        lam_plus, lam_minus = np.minimum(lam, TRUNCATION / m), np.minimum(lam, TRUNCATION / (1 - m))
    log_plus = np.cumsum(np.log1p(lam_plus * (x[:, None] - m)), axis=0)
    log_minus = np.cumsum(np.log1p(-lam_minus * (x[:, None] - m)), axis=0)
    log_k = np.maximum(log_plus, log_minus) - math.log(2)
    return log_k.max(axis=0) >= math.log(1 / alpha)


@pytest.mark.parametrize("n", [1, 4, 15, 16, 65, 66, 700])
def test_the_betting_test_rejects_what_its_formula_rejects(n):
    """Both layouts (by columns below 16 values, by rows from 16), one slice and many: the
    same rejected means as the formula, for fractions, 0/1 values and constants."""
    from harness.stats import _betting_rejected

    rng = np.random.default_rng(n)
    for x in (rng.random(n), (rng.random(n) < 0.7).astype(float), np.full(n, 0.25)):
        for alpha, anytime in ((0.05, False), (0.025, True), (0.2, True)):
            expected = _betting_rejected_by_the_formula(x, alpha, anytime)
            assert np.array_equal(_betting_rejected(x, alpha, anytime), expected)
            # from 4 values the test rejects some means, never all (one value rejects none)
            assert (0 < expected.sum() < len(expected)) if n >= 4 else not expected.any()
