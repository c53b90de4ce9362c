"""Simulated truths of laws.csv's benches (bench/laws.py, bench/law_calibration.py): mechanism
curves of known law under four noise models, and behaviour a(t) as 0/1 windows of samples."""

from __future__ import annotations

import numpy as np

from harness.analysis import laws as L
from harness.analysis.law_sets import CurveSet

# measured on the quickstart (bench/laws.py --measure); overridable
POINT_SD, RHO, UNIT_SD = 0.36, 0.3, 0.25


def truth(law: str, t: np.ndarray, rate: float, floor: float) -> np.ndarray:
    if law == L.LAW_EQUILIBRIUM:
        return floor + (1 - floor) * np.exp(-rate * (t - 1.0))
    return floor + (1 - floor) * t**-rate


NOISE_MODELS = ("iid", "correlated", "student-t", "own-law")
CORR_TOKENS = 32.0  # correlated noise: corr exp(-|t_i - t_j| / 32) in token distance
STUDENT_DF = 3
OWN_RATE_SD, OWN_FLOOR_SD = 0.25, 0.3  # own-law pairs: log-normal spread of rate and floor


def model_units(kind, law, rate, floor, n, rng, x, point_sd=POINT_SD, unit_sd=UNIT_SD):
    """(n, len(x)) units of one truth under one of the audit's four noise models, each a
    per-pair level (sd unit_sd) times log noise of sd point_sd: `iid` per position;
    `correlated` Gaussian with correlation exp(-|t_i - t_j| / CORR_TOKENS) in token distance;
    `student-t` iid Student-t (df 3, heavy tails) scaled to point_sd; `own-law` iid noise
    around each pair's own truth (its rate times e^N(0, 0.25), its floor times e^N(0, 0.3))."""
    level = rng.normal(0.0, unit_sd, (n, 1))
    if kind == "own-law":
        rates = rate * np.exp(rng.normal(0.0, OWN_RATE_SD, n))
        floors = floor * np.exp(rng.normal(0.0, OWN_FLOOR_SD, n))
        y = np.stack([truth(law, x, r, f) for r, f in zip(rates, floors, strict=True)])
        return y * np.exp(level + rng.normal(0.0, point_sd, y.shape))
    y = truth(law, x, rate, floor)[None, :]
    if kind == "iid":
        e = rng.normal(0.0, point_sd, (n, len(x)))
    elif kind == "student-t":
        e = (
            rng.standard_t(STUDENT_DF, (n, len(x)))
            * point_sd
            / np.sqrt(STUDENT_DF / (STUDENT_DF - 2))
        )
    elif kind == "correlated":
        cov = np.exp(-np.abs(x[:, None] - x[None, :]) / CORR_TOKENS)
        e = rng.normal(0.0, 1.0, (n, len(x))) @ np.linalg.cholesky(cov + 1e-9 * np.eye(len(x))).T
        e *= point_sd
    else:
        raise ValueError(f"unknown noise model {kind!r}")
    return y * np.exp(level + e)


def _set(units, x, i=0):
    ident = {"model": "m", "item": f"i{i}", "policy": "none"}
    return CurveSet(ident, "rel_l2", "late", "t", "relative", x, units, "pair")


# behaviour: a(t), one sample's 1/0 per scoring window, at the windows' middles (index + 1/2)
# x WINDOW generated tokens, as law_sets places them; 48 windows of 32 tokens: the audit's 16
# samples x 48 windows
WINDOW, WINDOWS = 32, 48
ADHERENCE_START = 0.9  # a(t) at the first window
ADHERENCE_SHAPES = ("power", "exp", "rise", "flat")


def windows_x(windows: int = WINDOWS) -> np.ndarray:
    return (np.arange(windows) + 0.5) * WINDOW


def adherence_curve(shape: str, x: np.ndarray, rate: float, floor: float) -> np.ndarray:
    """a(t) from ADHERENCE_START: to `floor` as a power law (x / x0)^-rate or an exponential
    e^(-rate (x - x0) / (x_max - x0)) (rate: e-folds over the run); `rise`: a line from `floor`
    to `rate` x floor; `flat`: `floor` throughout."""
    x0, span = float(x.min()), float(x.max() - x.min())
    if shape == "rise":
        return floor + (rate - 1.0) * floor * (x - x0) / span
    if shape == "flat":
        return np.full_like(x, floor)
    g = (x / x0) ** -rate if shape == "power" else np.exp(-rate * (x - x0) / span)
    return floor + (ADHERENCE_START - floor) * g


def adherence_units(shape, rate, floor, n, rng, x) -> np.ndarray:
    """(n, len(x)) samples' 1/0 verdicts per window, each window passing with a(t)."""
    return (rng.random((n, len(x))) < adherence_curve(shape, x, rate, floor)[None, :]) * 1.0


def adherence_set(units: np.ndarray, x: np.ndarray, i: int = 0) -> CurveSet:
    ident = {"model": "m", "item": f"b{i}", "policy": "none"}
    return CurveSet(ident, "a_t", "behaviour", "t", "absolute", x, units, "sample")


# an exponential drop to zero by 10x over the mechanism fit range [16, 320] (issue 54's audit)
EXP_TENFOLD = float(np.log(10.0) / 304.0)
