"""What a reduced-precision probe can resolve (numpy only: the analysis reads it).

A probe in bfloat16 or float16 carries, per pair, the rounding floor measured by
`harness.probes.floor` (per hidden-state index, in rel_l2's units, and for the next-token KL
and delta_logp). A curve is cut where it reaches FLOOR_MULTIPLE x its floor: from the first
position at which its running median over +-SMOOTH_DECADES of log t falls to that level (the
window's first position), every later position is marked (divergence.csv's `below_floor`) and
left out of the alpha fits and the laws (`resolved`). One cut, not a position-by-position
test: keeping the single values that happen to lie above the level would keep exactly the
ones rounding pushed up (a selection bias that flattens the tail, the false "settles" the cut
is there to prevent). A curve that rises again later (a conversation's next turn) stays cut.
A cut curve whose kept fit positions (from the fits' t_min up to the cut) span less than
MIN_KEPT_DECADES of t is dropped whole (all NaN): fits.csv says "cannot tell" and laws.csv
fits no law there, rather than give an alpha. The values just above the cut still carry up
to 1/FLOOR_MULTIPLE of rounding (a log error up to ln(4/3) = 0.29 where the rounding vector is
aligned with the divergence); an error growing to that across half a decade (ln 10^0.5 =
1.15) tilts an OLS slope by ~0.25 at most, across the few positions a curve keeps just past
t_min by more than alpha itself.
A float32 probe carries no floor and nothing is masked.
"""

from __future__ import annotations

import numpy as np

# a value counts as resolved above this multiple of its measured rounding floor
FLOOR_MULTIPLE = 3.0
SMOOTH_DECADES = 0.1  # the running median's half-width in log10 t
HIDDEN = ("l2", "rel_l2", "cos_dist")  # masked together, by rel_l2 against its floor
FLOOR_KEYS = ("floor_rel_l2", "floor_kl", "floor_delta_logp")
MIN_KEPT_DECADES = 0.5  # a cut curve keeps its fit only over at least this span of log10 t


def has_floor(arrays: dict) -> bool:
    return "floor_rel_l2" in arrays


def hidden_below_floor(arrays: dict) -> np.ndarray:
    """(n_layers, T) bool: positions whose rel_l2 is within FLOOR_MULTIPLE x the layer's
    floor (all False without a floor)."""
    rel = np.asarray(arrays["rel_l2"], dtype=np.float64)
    if not has_floor(arrays):
        return np.zeros(rel.shape, dtype=bool)
    floor = np.asarray(arrays["floor_rel_l2"], dtype=np.float64)
    return cut_below(rel, FLOOR_MULTIPLE * floor)


def next_below_floor(arrays: dict, metric: str) -> np.ndarray:
    """(T,) bool for "kl" or "delta_logp" (|delta_logp| against its floor)."""
    values = np.abs(np.asarray(arrays[metric], dtype=np.float64))
    key = f"floor_{metric}"
    if key not in arrays:
        return np.zeros(values.shape, dtype=bool)
    return cut_below(values[None], FLOOR_MULTIPLE * np.asarray(arrays[key]).reshape(1))[0]


def cut_below(curves: np.ndarray, levels: np.ndarray) -> np.ndarray:
    """(n, T) bool: per curve, True from the first position whose running median (over
    t / 10^SMOOTH_DECADES .. t x 10^SMOOTH_DECADES, at 256 log-spaced t) is at or under its
    level, counted from that window's first position."""
    n, total = curves.shape
    out = np.zeros((n, total), dtype=bool)
    if total == 0:
        return out
    grid = np.unique(np.round(np.geomspace(1, total, 256)).astype(int))
    lo = np.maximum(1, np.floor(grid / 10**SMOOTH_DECADES).astype(int))
    hi = np.minimum(total, np.ceil(grid * 10**SMOOTH_DECADES).astype(int))
    for row in range(n):
        medians = np.array([np.median(curves[row, a - 1 : b]) for a, b in zip(lo, hi, strict=True)])
        under = np.flatnonzero(medians <= levels[row])
        if under.size:
            out[row, lo[under[0]] - 1 :] = True
    return out


def resolved(arrays: dict, t_min: int | None = None) -> dict:
    """`arrays` with every position below its floor set to NaN (the fits and laws skip NaN);
    the arrays themselves when there is no floor. With `t_min` (the fits' first position), a
    cut curve whose kept positions from t_min span under MIN_KEPT_DECADES is NaN throughout."""
    if not has_floor(arrays):
        return arrays
    hidden = _too_short(hidden_below_floor(arrays), t_min)
    out = dict(arrays)
    for metric in HIDDEN:
        out[metric] = np.where(hidden, np.nan, np.asarray(arrays[metric], dtype=np.float64))
    for metric in ("kl", "delta_logp"):
        values = np.asarray(arrays[metric], dtype=np.float64)
        below = _too_short(next_below_floor(arrays, metric)[None], t_min)[0]
        out[metric] = np.where(below, np.nan, values)
    return out


def kept_decades(below: np.ndarray, t_min: int) -> np.ndarray:
    """(n,) the span in log10 t of each cut curve's positions from t_min up to its cut (the
    first below-floor position); inf where a curve is not cut, -inf where nothing is kept."""
    cut = np.where(below.any(axis=1), np.argmax(below, axis=1), -1)  # kept: t = 1 .. cut
    with np.errstate(divide="ignore", invalid="ignore"):
        span = np.log10(np.maximum(cut, 0) / t_min)
    span = np.where(cut >= t_min, span, -np.inf)
    return np.where(cut < 0, np.inf, span)


def _too_short(below: np.ndarray, t_min: int | None) -> np.ndarray:
    """`below` with every row whose kept span is under MIN_KEPT_DECADES set True throughout."""
    if t_min is None:
        return below
    short = kept_decades(below, t_min) < MIN_KEPT_DECADES
    return np.where(short[:, None], True, below)


def key_params(dtype: str) -> dict:
    """A cached unit's precision entry for its key: {} for float32, so every key written
    before the dtype was a setting (float32 runs all) stays valid; {"dtype": name} below it,
    so a bf16 unit is never served to a float32 run or the other way round."""
    return {} if dtype == "float32" else {"dtype": dtype}
