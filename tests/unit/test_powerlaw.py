"""alpha estimator: exact and noisy synthetic power laws, CIs, degenerate input."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.analysis.powerlaw import (
    fit_alpha,
    fit_positions,
    local_exponent,
    reference_curves,
)

T = 2048
t = np.arange(1, T + 1)


def test_fit_positions_are_unique_rounded_geomspace():
    pos = fit_positions(16, 2048)
    assert pos.dtype.kind == "i"
    assert pos[0] == 16 and pos[-1] == 2048
    assert np.all(np.diff(pos) > 0)
    assert len(pos) == len(np.unique(np.round(np.geomspace(16, 2048, 64))))
    # Rounding merges neighbours at small t: fewer than 64 points on a short range.
    assert len(fit_positions(16, 64)) < 64
    assert len(fit_positions(20, 10)) == 0


@pytest.mark.parametrize("alpha", [0.3, 1.0, 1.7])
def test_exact_power_law_recovered(alpha):
    fit = fit_alpha(t, 3.0 * t ** (-alpha))
    assert abs(fit.alpha - alpha) < 0.01
    assert fit.r2 == pytest.approx(1.0, abs=1e-9)
    assert fit.reason == ""
    assert fit.t_min == 16 and fit.t_max == T
    assert fit.n_points == len(fit_positions(16, T))
    # An exact curve has no spread to bootstrap.
    assert fit.ci_low == pytest.approx(alpha, abs=1e-6)
    assert fit.ci_high == pytest.approx(alpha, abs=1e-6)


def test_exact_power_law_several_pairs_and_t_range():
    d = np.array([a * t**-0.8 for a in (0.5, 1.0, 2.0)])  # (3, T)
    fit = fit_alpha(t, d, t_min=32, t_max=512)
    assert abs(fit.alpha - 0.8) < 0.01
    assert (fit.t_min, fit.t_max) == (32, 512)
    assert fit.n_points == len(fit_positions(32, 512))


def test_only_fit_range_matters():
    d = t**-0.5
    d[t > 1000] = 1.0  # outside [16, 1000]: must not change the fit
    assert abs(fit_alpha(t, d, t_max=1000).alpha - 0.5) < 1e-9


def test_noisy_pairs_alpha_within_ci():
    # One fixed draw (seed 1 happens to land just outside its 95% CI, as 1 in 20 draws must);
    # the coverage tests below check the CI statistically.
    rng = np.random.default_rng(2)
    n_pairs = 20
    amp = rng.lognormal(0.0, 0.5, size=(n_pairs, 1))
    d = amp * t**-0.7 * rng.lognormal(0.0, 0.5, size=(n_pairs, T))
    fit = fit_alpha(t, d)
    assert fit.ci_low < 0.7 < fit.ci_high
    assert fit.ci_high - fit.ci_low < 0.1
    assert abs(fit.alpha - 0.7) < 0.05


def test_ci_covers_truth_in_most_seeds_pairs():
    covered = 0
    for seed in range(40):
        rng = np.random.default_rng(100 + seed)
        # Pairs differ in amplitude and noise; the mean curve decays exactly like t^-1. (Pairs
        # with different slopes would not do: the mean of power laws is no power law.)
        amp = rng.lognormal(0.0, 0.5, size=(8, 1))
        d = amp * t**-1.0 * rng.lognormal(0.0, 0.5, size=(8, T))
        fit = fit_alpha(t, d, n_boot=300, seed=seed)
        covered += fit.ci_low <= 1.0 <= fit.ci_high
    assert covered >= 32  # nominal 95%, ~91% measured with 8 pairs: at least 80% of 40 seeds


def test_ci_covers_truth_in_most_seeds_one_curve():
    covered = 0
    widths = []
    for seed in range(40):
        rng = np.random.default_rng(200 + seed)
        d = t**-1.2 * rng.lognormal(0.0, 0.3, size=T)
        fit = fit_alpha(t, d, n_boot=300, seed=seed)
        covered += fit.ci_low <= 1.2 <= fit.ci_high
        widths.append(fit.ci_high - fit.ci_low)
    assert covered >= 28  # block bootstrap with 8 bins runs a little under nominal
    assert 0.0 < np.median(widths) < 0.2


def test_same_seed_same_ci():
    rng = np.random.default_rng(5)
    d = t**-1.0 * rng.lognormal(0.0, 0.3, size=(4, T))
    a, b = fit_alpha(t, d, seed=3), fit_alpha(t, d, seed=3)
    assert (a.ci_low, a.ci_high) == (b.ci_low, b.ci_high)


def test_identical_prompts():
    fit = fit_alpha(t, np.zeros((3, T)))
    assert math.isnan(fit.alpha) and math.isnan(fit.ci_low) and math.isnan(fit.r2)
    assert fit.reason == "identical prompts"


def test_nans_dropped():
    d = t**-0.9
    d[::3] = np.nan
    fit = fit_alpha(t, d)
    assert abs(fit.alpha - 0.9) < 0.01
    assert fit.n_points < len(fit_positions(16, T))


def test_nan_in_one_pair_uses_the_others():
    d = np.array([t**-0.9, t**-0.9])
    d[0, 100:] = np.nan
    fit = fit_alpha(t, d)
    assert abs(fit.alpha - 0.9) < 1e-9
    assert fit.n_points == len(fit_positions(16, T))


def test_fewer_than_three_usable_points():
    d = np.zeros(T)
    d[:17] = 1.0  # positive only at t <= 17: two fit positions (16, 17)
    fit = fit_alpha(t, d)
    assert math.isnan(fit.alpha)
    assert fit.reason == "fewer than 3 usable points"
    fit = fit_alpha(t, np.where(t < 40, np.nan, 0.0) + np.where(t < 40, 0.0, np.nan))
    assert fit.reason in ("fewer than 3 usable points", "identical prompts")


def test_all_nan_or_negative_is_few_points():
    assert fit_alpha(t, np.full(T, np.nan)).reason == "fewer than 3 usable points"
    assert fit_alpha(t, -(t**-1.0)).reason == "fewer than 3 usable points"


def test_continuation_shorter_than_t_min():
    short = np.arange(1, 11)
    fit = fit_alpha(short, short**-1.0)
    assert math.isnan(fit.alpha)
    assert fit.reason == "continuation shorter than t_min"
    assert fit_alpha(t, t**-1.0, t_min=100, t_max=50).reason == "continuation shorter than t_min"


def test_bad_shape_is_a_programming_error():
    with pytest.raises(ValueError):
        fit_alpha(t, np.ones(T - 1))


def test_sparse_log_grid_input():
    # t given only on a log grid (as in relay.csv): every point inside the range is used.
    tg = fit_positions(1, 10**6, 200)
    fit = fit_alpha(tg, tg**-0.6)
    assert abs(fit.alpha - 0.6) < 1e-9
    assert fit.n_points == int(((tg >= 16) & (tg <= 10**6)).sum())


def test_local_exponent_of_exact_power_law():
    loc = local_exponent(t, 5.0 * t**-1.3)
    assert loc.shape == (T,)
    assert np.allclose(loc[2:], 1.3, atol=1e-9)
    assert np.isnan(loc[0])  # t = 1 alone in its window: fewer than 3 points


def test_local_exponent_tracks_changing_slope():
    # D = t^-0.5 below t0 and t^-1.5 above: the local exponent moves from 0.5 to 1.5 near t0.
    t0 = 100.0
    d = np.where(t < t0, t**-0.5, t0 * t**-1.5)
    loc = local_exponent(t, d)
    assert abs(loc[t == 30][0] - 0.5) < 1e-9
    assert abs(loc[t == 1000][0] - 1.5) < 1e-9
    mid = loc[t == 100][0]
    assert 0.5 < mid < 1.5


def test_local_exponent_window_and_nan():
    tg = fit_positions(1, 10**6, 60)
    d = tg**-1.0
    d[10:] = np.nan
    loc = local_exponent(tg, d, half_width_decades=0.25)
    assert np.all(np.isnan(loc[12:]))
    assert np.isfinite(loc[3])


def test_reference_curves_scaled_to_data():
    d = 7.0 / t
    ref = reference_curves(t, d, prompt_len=32, n_layers=3)
    assert np.allclose(ref["inv_t"], d)
    # The bound scaled in log space: its log gap to D averages to zero over the fit range.
    pos = fit_positions(16, T)
    gap = np.log(d[pos - 1]) - np.log(ref["bound"][pos - 1])
    assert abs(gap.mean()) < 1e-12
    shape = 32 * np.log(t.astype(float)) ** 2 / t
    assert np.allclose(ref["bound"][1:] / shape[1:], ref["bound"][100] / shape[100])
    assert ref["bound"][0] == 0.0  # log 1 = 0


def test_reference_curves_degenerate():
    ref = reference_curves(t, np.zeros(T), prompt_len=8, n_layers=2)
    assert np.all(np.isnan(ref["inv_t"])) and np.all(np.isnan(ref["bound"]))


def test_batched_fits_equal_one_by_one_fits():
    """fits.csv fits ~100 curves per pair in one batch: every result must be exactly the one
    fit_alpha gives alone (same draws, same arithmetic), whatever mix of curves shares a batch."""
    from harness.analysis.powerlaw import BATCH_CURVES, fit_alpha_batch

    rng = np.random.default_rng(3)
    t = np.arange(1, 401)
    curves = [t ** -rng.uniform(0.2, 1.0) * np.exp(rng.normal(0, 0.2, t.size)) for _ in range(40)]
    holed = curves[0].copy()
    holed[100:150] = np.nan  # other usable points: other block-bootstrap draws
    pairs = np.vstack([curves[1], curves[2], curves[3]])
    curves += [holed, pairs, np.zeros(t.size)]
    assert len(curves) > BATCH_CURVES  # chunks too
    batched = fit_alpha_batch(t, curves, t_min=16, n_boot=200, seed=7)
    alone = [fit_alpha(t, c, t_min=16, n_boot=200, seed=7) for c in curves]
    assert [b.model_dump() for b in batched] == [a.model_dump() for a in alone]
    assert batched[-1].reason == "identical prompts"
    assert np.isfinite(batched[40].ci_low) and batched[40].ci_low != batched[0].ci_low
