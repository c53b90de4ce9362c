"""What a reduced-precision probe can resolve (numpy only: the analysis reads it).

A probe in bfloat16 or float16 carries, per pair, the rounding floor measured by
`harness.probes.floor`: per hidden-state index the `FLOOR_QUANTILE` of |rel_l2(dtype) -
rel_l2(float32)| over the first FLOOR_SPAN positions, and the same for the next-token KL and
delta_logp. A position whose value lies within FLOOR_MULTIPLE x its floor is below what the
dtype can tell from rounding: it is marked (divergence.csv's `below_floor`) and left out of the
alpha fits and the laws (`resolved`), so a curve that flattens onto its own rounding floor
cannot read as "settles" or bias alpha toward 0. A float32 probe carries no floor and nothing
is masked.
"""

from __future__ import annotations

import numpy as np

# a value counts as resolved above this multiple of its measured rounding floor
FLOOR_MULTIPLE = 3.0
HIDDEN = ("l2", "rel_l2", "cos_dist")  # masked together, by rel_l2 against its floor
FLOOR_KEYS = ("floor_rel_l2", "floor_kl", "floor_delta_logp")


def has_floor(arrays: dict) -> bool:
    return "floor_rel_l2" in arrays


def hidden_below_floor(arrays: dict) -> np.ndarray:
    """(n_layers, T) bool: positions whose rel_l2 is within FLOOR_MULTIPLE x the layer's
    floor (all False without a floor)."""
    rel = np.asarray(arrays["rel_l2"], dtype=np.float64)
    if not has_floor(arrays):
        return np.zeros(rel.shape, dtype=bool)
    floor = np.asarray(arrays["floor_rel_l2"], dtype=np.float64).reshape(-1, 1)
    return rel <= FLOOR_MULTIPLE * floor


def next_below_floor(arrays: dict, metric: str) -> np.ndarray:
    """(T,) bool for "kl" or "delta_logp" (|delta_logp| against its floor)."""
    values = np.abs(np.asarray(arrays[metric], dtype=np.float64))
    key = f"floor_{metric}"
    if key not in arrays:
        return np.zeros(values.shape, dtype=bool)
    return values <= FLOOR_MULTIPLE * float(np.asarray(arrays[key]))


def resolved(arrays: dict) -> dict:
    """`arrays` with every position below its floor set to NaN (the fits and laws skip NaN);
    the arrays themselves when there is no floor."""
    if not has_floor(arrays):
        return arrays
    hidden = hidden_below_floor(arrays)
    out = dict(arrays)
    for metric in HIDDEN:
        out[metric] = np.where(hidden, np.nan, np.asarray(arrays[metric], dtype=np.float64))
    for metric in ("kl", "delta_logp"):
        values = np.asarray(arrays[metric], dtype=np.float64)
        out[metric] = np.where(next_below_floor(arrays, metric), np.nan, values)
    return out


def key_params(dtype: str) -> dict:
    """A cached unit's precision entry for its key: {} for float32, so every key written
    before the dtype was a setting (float32 runs all) stays valid; {"dtype": name} below it,
    so a bf16 unit is never served to a float32 run or the other way round."""
    return {} if dtype == "float32" else {"dtype": dtype}
