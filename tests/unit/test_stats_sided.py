"""harness.stats.sided and the method of a sequence: one-sided bounds at the gates' full level,
one method per sequence fixed before the data, no interval from an empty intersection, and the
order-neutral projection of the samples that would decide a gate."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from harness.stats import mean_interval
from harness.stats.sided import log_evalue_above, one_sided_bounds, samples_to_decide


def test_fixed_n_0_1_bounds_are_clopper_pearsons_one_sided_quantiles():
    bounds = one_sided_bounds([1] * 9 + [0], level=0.95)
    assert bounds.method == "clopper-pearson"
    assert bounds.lcb == pytest.approx(stats.beta.ppf(0.05, 9, 2))
    assert bounds.ucb == pytest.approx(stats.beta.ppf(0.95, 10, 1))
    # one side of the two-sided 95 % interval spends only 2.5 %: the one-sided bound is higher
    assert bounds.lcb > mean_interval([1] * 9 + [0]).low + 0.03
    assert one_sided_bounds([1] * 10, level=0.95).lcb == pytest.approx(0.05 ** (1 / 10))


@pytest.mark.parametrize("p", [0.5, 0.8, 0.95])
def test_one_sided_sequence_holds_at_every_look(p):
    """The anytime lower bound exceeds the true mean at some look of 48 in at most ~5 % of
    paths (Ville; measured on 300 seeded paths, mixed 0/1 and fractional values)."""
    rng = np.random.default_rng(3)
    looks, misses = (4, 8, 16, 32, 48), 0
    for _ in range(300):
        x = np.where(rng.random(48) < 0.5, rng.random(48) < p, rng.binomial(4, p, 48) / 4)
        misses += any(one_sided_bounds(x[:n], level=0.95, anytime=True).lcb > p for n in looks)
    assert misses / 300 <= 0.07, misses


def test_a_sequence_keeps_its_method_when_a_fractional_value_arrives():
    """Item 4: the first non-0/1 value used to move the run onto a fresh betting sequence
    (the error bound became 2 alpha); one method now, and each look's interval lies within
    the last (the running intersection of one sequence)."""
    x = [1, 1, 1, 1, 1, 1, 0.5, 1, 0.75, 1, 1, 1]
    cis = [mean_interval(x[:n], anytime=True) for n in range(4, len(x) + 1)]
    assert {ci.method for ci in cis} == {"beta-binomial-cs+betting-cs"}
    for before, after in zip(cis, cis[1:], strict=False):
        assert before.low <= after.low and after.high <= before.high


def test_an_empty_running_intersection_is_no_interval_not_0_to_1():
    """Passes first, then as many fails: the early sequence excludes 0.5, the late one
    contains only values near 0.5. It used to return [0, 1], which a gate read as decided
    by neither side only by luck; now no interval, with the reason."""
    x = [1] * 20 + [0] * 20
    ci = mean_interval(x, anytime=True)
    assert math.isnan(ci.low) and math.isnan(ci.high)
    assert ci.method == "none (empty running intersection)" and ci.estimate == 0.5
    bounds = one_sided_bounds(x, level=0.95, anytime=True)
    assert math.isnan(bounds.lcb) and bounds.method == "none (empty running intersection)"


@pytest.mark.parametrize("anytime", [False, True])
def test_samples_to_decide_holds_the_mean_and_exceeds_n(anytime):
    for n in (4, 8, 16, 32, 64):
        for k in range(n + 1):
            for bound in (0.5, 0.8, 0.9):
                got = samples_to_decide(k / n, n, bound=bound, level=0.95, anytime=anytime)
                if math.isclose(k / n, bound):
                    assert got is None
                else:
                    assert got is None or got > n
    # 16 passes give the one-sided bound 0.05^(1/16) = 0.829 >= 0.8; 14 give 0.807, 13 0.794
    assert samples_to_decide(1.0, 4, bound=0.8, level=0.95) == 14
    assert samples_to_decide(1.0, 4, bound=0.8, level=0.95, max_n=13) is None
    assert samples_to_decide(1.0, 4, bound=0.8, level=0.95, anytime=True) > 14  # looking costs
    # the estimate below the bound: the n at which the upper bound falls below it
    n = samples_to_decide(0.75, 4, bound=0.9, level=0.95)
    assert one_sided_bounds(np.resize([1, 1, 1, 0], 4 * math.ceil(n / 4)), level=0.95).ucb < 0.9
    assert one_sided_bounds(np.resize([1, 1, 1, 0], 4 * (n // 4 - 1)), level=0.95).ucb >= 0.9


def _share_decided(k: int, n: int, bound: float, alpha: float, big: int) -> float:
    """Simulated: the share of 2,000 continuations of k passes in n (each later sample 0/1 with
    mean k/n) on which the one-sided beta-binomial e-process at alpha crosses 1/alpha, on
    either side, at some look in (n, big]."""
    rng = np.random.default_rng(5)
    walk = k + np.cumsum(rng.random((2000, big - n)) < k / n, axis=1)
    t = np.arange(n + 1, big + 1)
    threshold = math.log(1 / alpha)
    up = log_evalue_above(walk, t, bound) >= threshold
    down = log_evalue_above(t - walk, t, 1 - bound) >= threshold
    return float((up | down).any(axis=1).mean())


@pytest.mark.parametrize(("k", "n", "intersected"), [(28, 32, False), (28, 32, True), (5, 8, True)])
def test_the_anytime_projection_is_the_median_decision_n(k, n, intersected):
    """Sequential looks decide at the first crossing, and a walk that runs ahead of its mean
    crosses before the mean path does: the projection is the n by which half the continuations
    decide (the fraction type: its beta-binomial part at alpha/2), not the mean path's n, which
    was 1.2-1.3x later (281 for 28 of 32 at 0.8, the fraction type: 64 % decided by then)."""
    alpha = 0.05 / (2 if intersected else 1)
    needed = samples_to_decide(
        k / n, n, bound=0.8, level=0.95, anytime=True, intersected=intersected
    )
    assert 0.44 <= _share_decided(k, n, 0.8, alpha, needed) <= 0.56
    assert _share_decided(k, n, 0.8, alpha, int(0.85 * needed)) < 0.44


@pytest.mark.parametrize("n", [4, 15, 16, 66, 700])
def test_the_one_sided_betting_bound_is_its_formula_s(n):
    """The one-sided betting bound (in place, sliced, laid out by rows from 16 values) is the
    bound its formula gives, every (t, m) cell at once, bit for bit."""
    from harness.stats import TRUNCATION, _grid
    from harness.stats.sided import _betting_lcb, _rejected_below

    rng = np.random.default_rng(n)
    for x in (rng.random(n), (rng.random(n) < 0.7).astype(float)):
        for alpha, anytime in ((0.05, False), (0.025, True)):
            t = np.arange(1, n + 1)
            mu = (0.5 + np.cumsum(x)) / (t + 1)
            prev = np.concatenate([[0.25], ((0.25 + np.cumsum((x - mu) ** 2)) / (t + 1))[:-1]])
            scale = t * np.log1p(t) if anytime else np.full(n, float(n))
            lam = np.sqrt(2 * math.log(1 / alpha) / (prev * scale))[:, None]
            m = _grid()[None, :]
            with np.errstate(divide="ignore"):
                bets = np.minimum(lam, TRUNCATION / m)
            capital = np.cumsum(np.log1p(bets * (x[:, None] - m)), axis=0)
            expected = _rejected_below(capital.max(axis=0) >= math.log(1 / alpha))
            assert _betting_lcb(x, alpha, anytime) == expected and 0 < expected < 1
