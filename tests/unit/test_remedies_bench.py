"""bench/remedies.py's mechanism column: a remedy's alpha is fitted over every probed reply,
each to its own end, so one reply cut short by the remedy does not blank the fit (issue 53:
split-softmax's and SpotLight's alpha read NaN)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from harness.analysis.powerlaw import fit_alpha
from tests.script_module import load_script

BENCH = Path(__file__).parents[2] / "bench" / "remedies.py"


def _bench():
    return load_script(BENCH, "bench_remedies")


def test_a_reply_shorter_than_the_fit_range_leaves_the_others_fit():
    bench = _bench()
    t = np.arange(1, 33)
    rng = np.random.default_rng(0)
    curves = [t**-0.5 * np.exp(rng.normal(0, 0.02, len(t))) for _ in range(4)]
    curves.append(curves[0][:10])  # a reply the remedy ended at t = 10
    fit, short = bench.pooled_alpha(curves)
    assert short == 1
    assert fit.alpha == pytest.approx(0.5, abs=0.05) and fit.ci_low < 0.5 < fit.ci_high
    # the bench's old pooling, every curve cut to the shortest, had no point in [16, 32]
    cut = np.stack([c[:10] for c in curves])
    assert math.isnan(fit_alpha(t[:10], cut, t_min=16).alpha)
