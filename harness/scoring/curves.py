"""a(t) per condition (adherence_curve.csv): the share of samples whose window covering t
passes, at the window starts seen, with pointwise intervals over samples
(docs/architecture.md, "Adherence"; the pass codes and bands of `harness.scoring.adherence`).
From the windows' passes, or from each condition's counts (a chat log's, gathered a chunk at
a time by `harness.scoring.digest`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from harness.results import AdherenceCurveRow, result_frame
from harness.scoring.adherence import TASK_CONDITION, _clopper_band, _nanmean, point_band
from harness.scoring.passes import pass_counts, pass_matrix, window_passes
from harness.scoring.spill import key_groups
from harness.stats import DEFAULT_LEVEL


def adherence_curves(
    windows: pd.DataFrame,
    *,
    level: float = DEFAULT_LEVEL,
    anytime: bool = False,
    passes: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """a(t) per condition with pointwise intervals over samples.

    Columns: AdherenceCurveRow's (n: samples with a window covering t). `passes`: the
    windows' `window_passes`, where the caller has them already.
    """
    passes = window_passes(windows) if passes is None else passes
    curves = (
        (key, _curve(cond, level, anytime)) for key, cond in key_groups(passes, TASK_CONDITION)
    )
    return curves_frame(curves)


def count_curves(counts: dict, level: float = DEFAULT_LEVEL) -> pd.DataFrame:
    """adherence_curves' frame from each condition's (t, passes k, samples n) per point, in
    key order (a chat log's, counted a chunk at a time): the fixed-sample intervals."""
    return curves_frame((key, _count_curve(*c, level)) for key, c in counts.items())


def curves_frame(curves) -> pd.DataFrame:
    """adherence_curve.csv from (condition key, `_curve`'s tuple) pairs in key order."""
    frames = []
    for key, (grid, a, low, high, n, method) in curves:
        frame = pd.DataFrame(
            {"t": grid, "a": a, "a_low": low, "a_high": high, "n": n, "method": method}
        )
        for col, value in zip(TASK_CONDITION, key, strict=True):
            frame.insert(TASK_CONDITION.index(col), col, value)
        frames.append(frame)
    return result_frame(AdherenceCurveRow, pd.concat(frames, ignore_index=True) if frames else ())


def _curve(cond: pd.DataFrame, level: float, anytime: bool) -> tuple:
    """(t, a, a_low, a_high, n, method) of one condition's a(t). Fixed-sample intervals need
    only each point's passes and samples: counted on the int8 codes, the same numbers as
    nansum and nanmean of the float matrix (sums of 0s and 1s are exact in any order)."""
    if anytime:
        grid, matrix = pass_matrix(cond)
        low, high, method = point_band(matrix, level=level, anytime=True)
        return grid, _nanmean(matrix, 0), low, high, (~np.isnan(matrix)).sum(axis=0), method
    return _count_curve(*pass_counts(cond), level)


def _count_curve(grid: np.ndarray, k: np.ndarray, n: np.ndarray, level: float) -> tuple:
    """`_curve`'s fixed-sample tuple from each point's passes k and samples n."""
    low, high = _clopper_band(k, n, level)
    with np.errstate(invalid="ignore", divide="ignore"):  # a point no sample covers: NaN
        a = k / n
    return grid, a, low, high, n, "clopper-pearson"
