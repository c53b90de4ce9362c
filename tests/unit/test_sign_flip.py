"""The sign-flip test over units: exact p-values by hand and its level under a symmetric null."""

from __future__ import annotations

import numpy as np
import pytest

from harness.stats.sign_flip import EXACT_MAX_UNITS, sign_flip_p


def test_exact_p_values_count_the_assignments_by_hand():
    # all 4 positive: only the observed assignment reaches its mean, 1 of 16
    assert sign_flip_p(np.array([1.0, 2.0, 3.0, 4.0])) == pytest.approx(1 / 16)
    # [3, -1, 1]: the sums of +-3 +-1 +-1 at or above the observed 3 are 5, 3, 3 (a tie counts
    # as extreme): 3 of 8
    assert sign_flip_p(np.array([3.0, -1.0, 1.0])) == pytest.approx(3 / 8)
    assert sign_flip_p(np.array([1.0, np.inf, 2.0])) == 1.0  # a law that cannot predict
    assert sign_flip_p(np.array([])) == 1.0


def test_its_level_holds_under_skewed_heavy_tailed_differences():
    """Symmetric about 0 but heavy-tailed (Student-t, df 1.5): where a t-test's tail is off,
    the sign flip's P(p <= q) stays at most q (Monte-Carlo error ~ sqrt(q / 4000))."""
    rng = np.random.default_rng(0)
    for n in (6, 12):
        p = np.array([sign_flip_p(rng.standard_t(1.5, n), seed=i) for i in range(2000)])
        for q in (0.05, 0.01):
            assert np.mean(p <= q) <= q + 3 * np.sqrt(q / 2000)


def test_a_clear_shift_is_found_and_random_draws_stay_valid_above_the_exact_range():
    rng = np.random.default_rng(1)
    p = sign_flip_p(rng.normal(1.0, 0.5, EXACT_MAX_UNITS + 4))
    assert 1 / (1 + 2**16) <= p < 1e-3
    # random draws under the null: P(p <= 0.1) near 0.1, never below the draws' resolution
    null = np.array([sign_flip_p(rng.normal(0, 1, EXACT_MAX_UNITS + 2), seed=i) for i in range(60)])
    assert null.min() >= 1 / (1 + 2**16) and np.mean(null <= 0.1) <= 0.25


def test_meeting_in_the_middle_counts_as_enumerating_every_assignment():
    rng = np.random.default_rng(2)
    for n in (1, 5, 9):
        d = np.round(rng.normal(0.2, 1.0, n), 1)  # rounded: ties on the observed mean occur
        signs = 1 - 2 * ((np.arange(2**n)[:, None] >> np.arange(n)) & 1)
        brute = np.mean(signs @ d >= d.sum() - 1e-9)
        assert sign_flip_p(d) == pytest.approx(brute)
