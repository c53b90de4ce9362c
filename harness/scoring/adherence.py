"""Adherence metrics per condition (model, task, item, policy) from `windows.csv` rows.

Definitions (docs/architecture.md, "Adherence"): a window passes when every window-scope
check that could decide passed (undetermined checks are ignored; a window where none decided
is left out).
a(t) = share of samples whose window covering t passes, evaluated at the window starts seen in
the condition; AUC = mean of a over those points; half-life = first t where
a(t) < a(first window)/2 (censored if never), with a percentile-bootstrap CI over samples;
final = mean a over the last quarter of the
points; survival = time (t_start) to the first failing window, Kaplan-Meier, censored at the
last window's t_end for samples that never fail.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from harness import results
from harness.results import AdherenceCurveRow, AdherenceRow, SurvivalRow, result_frame

# pandas groups by lists: a tuple would be one key
TASK_CONDITION = list(results.TASK_CONDITION)
RUN_SAMPLE = list(results.RUN_SAMPLE)


def window_passes(windows: pd.DataFrame) -> pd.DataFrame:
    """One row per (condition, sample, window): t_start, t_end, passed (bool)."""
    w = windows[(windows["scope"] == "window") & (windows["window"] >= 0)]
    w = w[w["passed"].notna()].copy()
    w["passed"] = w["passed"].map(lambda v: v is True or str(v).lower() == "true")
    keys = TASK_CONDITION + RUN_SAMPLE + ["window"]
    grouped = w.groupby(keys, sort=True, dropna=False)
    out = grouped.agg(
        t_start=("t_start", "first"), t_end=("t_end", "first"), passed=("passed", "all")
    )
    return out.reset_index()


def _pass_matrix(cond: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(grid t (G,), matrix (S, G) of 1/0/NaN: sample s's window covering t passes)."""
    grid = np.sort(cond["t_start"].unique())
    samples = list(cond.groupby(RUN_SAMPLE, sort=True))
    matrix = np.full((len(samples), len(grid)), np.nan)
    for s, (_, rows) in enumerate(samples):
        for start, end, ok in rows[["t_start", "t_end", "passed"]].itertuples(index=False):
            covered = (grid >= start) & (grid <= end)
            matrix[s, covered] = float(ok)
    return grid, matrix


def _bootstrap(matrix: np.ndarray, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """(n_boot, G) a(t) curves from samples drawn with replacement."""
    picks = rng.integers(0, matrix.shape[0], size=(n_boot, matrix.shape[0]))  # (B, S)
    draws = matrix[picks]  # (B, S, G)
    with np.errstate(invalid="ignore"), _quiet():
        return np.nanmean(draws, axis=1)  # (B, G)


class _quiet:
    def __enter__(self):
        import warnings

        self._ctx = warnings.catch_warnings()
        self._ctx.__enter__()
        warnings.simplefilter("ignore", RuntimeWarning)

    def __exit__(self, *exc):
        return self._ctx.__exit__(*exc)


def adherence_curves(
    windows: pd.DataFrame, n_boot: int = 1000, ci: float = 0.95, seed: int = 0
) -> pd.DataFrame:
    """a(t) per condition with percentile-bootstrap bands over samples.

    Columns: AdherenceCurveRow's (n: samples with a window covering t).
    """
    rng = np.random.default_rng(seed)
    frames = []
    for key, cond in window_passes(windows).groupby(TASK_CONDITION, sort=True):
        grid, matrix = _pass_matrix(cond)
        with _quiet():
            a = np.nanmean(matrix, axis=0)
            boots = _bootstrap(matrix, n_boot, rng)
            low, high = np.nanpercentile(boots, [50 * (1 - ci), 50 * (1 + ci)], axis=0)
        n = (~np.isnan(matrix)).sum(axis=0)
        frame = pd.DataFrame({"t": grid, "a": a, "a_low": low, "a_high": high, "n": n})
        for col, value in zip(TASK_CONDITION, key, strict=True):
            frame.insert(TASK_CONDITION.index(col), col, value)
        frames.append(frame)
    return result_frame(AdherenceCurveRow, pd.concat(frames, ignore_index=True) if frames else ())


def curve_metrics(t: np.ndarray, a: np.ndarray) -> dict[str, float | bool]:
    """AUC, half-life (censored flag) and final adherence of one a(t) curve."""
    keep = ~np.isnan(a)
    t, a = t[keep], a[keep]
    if len(a) == 0:
        nan = math.nan
        return dict(a_first=nan, auc=nan, half_life=nan, half_life_censored=True, final=nan)
    below = np.nonzero(a < a[0] / 2)[0]
    quarter = max(1, math.ceil(len(a) / 4))
    return dict(
        a_first=float(a[0]),
        auc=float(a.mean()),
        half_life=float(t[below[0]]) if len(below) else math.nan,
        half_life_censored=not len(below),
        final=float(a[-quarter:].mean()),
    )


def half_life_draws(t: np.ndarray, curves: np.ndarray) -> np.ndarray:
    """The half-life of each of many a(t) curves (B, G), NaN where undetermined -> (B,).

    inf for a curve that never falls below half its first determined value (it never halved
    within the run: larger than any t seen), NaN for an empty curve or one whose first value
    is 0 (nothing to halve), as `curve_metrics` leaves those censored.
    """
    valid = ~np.isnan(curves)
    a = np.where(valid, curves, 0.0)
    first = np.take_along_axis(a, valid.argmax(axis=1)[:, None], axis=1)[:, 0]
    below = valid & (a < first[:, None] / 2)
    half = np.where(below.any(axis=1), t[below.argmax(axis=1)], np.inf)
    return np.where(valid.any(axis=1) & (first > 0), half, np.nan)


def half_life_band(t: np.ndarray, curves: np.ndarray, ci: float) -> tuple[float, float]:
    """Percentile CI of the half-life over bootstrap curves. The bounds are drawn values
    (method lower/higher: a half-life is a grid t, and inf, a draw that never halved, must not
    enter an interpolation)."""
    draws = half_life_draws(t, curves)
    if np.isnan(draws).all():
        return math.nan, math.nan
    low = np.nanpercentile(draws, 50 * (1 - ci), method="lower")
    high = np.nanpercentile(draws, 50 * (1 + ci), method="higher")
    return float(low), float(high)


def first_failures(passes: pd.DataFrame) -> pd.DataFrame:
    """Per sample: duration (t_start of its first failing window, else last t_end) and event."""
    rows = []
    for key, sample in passes.groupby(TASK_CONDITION + RUN_SAMPLE, sort=True):
        sample = sample.sort_values("t_start")
        failed = sample[~sample["passed"]]
        if len(failed):
            rows.append((*key, float(failed["t_start"].iloc[0]), True))
        else:
            rows.append((*key, float(sample["t_end"].max()), False))
    return pd.DataFrame(rows, columns=[*TASK_CONDITION, *RUN_SAMPLE, "duration", "event"])


def _kaplan_meier(durations: pd.Series, events: pd.Series, ci: float):
    from lifelines import KaplanMeierFitter

    kmf = KaplanMeierFitter(alpha=1 - ci)
    kmf.fit(durations, event_observed=events)
    return kmf


def survival_curves(windows: pd.DataFrame, ci: float = 0.95) -> pd.DataFrame:
    """Kaplan-Meier S(t) per condition: SurvivalRow's columns."""
    frames = []
    for key, cond in first_failures(window_passes(windows)).groupby(TASK_CONDITION, sort=True):
        kmf = _kaplan_meier(cond["duration"], cond["event"], ci)
        band = kmf.confidence_interval_survival_function_
        frame = pd.DataFrame(
            {
                "t": kmf.survival_function_.index.to_numpy(),
                "survival": kmf.survival_function_.iloc[:, 0].to_numpy(),
                "survival_low": band.iloc[:, 0].to_numpy(),
                "survival_high": band.iloc[:, 1].to_numpy(),
            }
        )
        for col, value in zip(TASK_CONDITION, key, strict=True):
            frame.insert(TASK_CONDITION.index(col), col, value)
        frames.append(frame)
    return result_frame(SurvivalRow, pd.concat(frames, ignore_index=True) if frames else ())


def adherence_summary(
    windows: pd.DataFrame, n_boot: int = 1000, ci: float = 0.95, seed: int = 0
) -> list[AdherenceRow]:
    """AUC and half-life (with bootstrap CIs), final adherence and survival median per condition."""
    from lifelines.utils import median_survival_times

    rng = np.random.default_rng(seed)
    passes = window_passes(windows)
    durations = first_failures(passes)
    out = []
    for key, cond in passes.groupby(TASK_CONDITION, sort=True):
        grid, matrix = _pass_matrix(cond)
        with _quiet():
            metrics = curve_metrics(grid, np.nanmean(matrix, axis=0))
            boots = _bootstrap(matrix, n_boot, rng)  # (B, G)
            auc_low, auc_high = np.nanpercentile(
                np.nanmean(boots, axis=1), [50 * (1 - ci), 50 * (1 + ci)]
            )
            half_life_low, half_life_high = half_life_band(grid, boots, ci)
        surv = durations.set_index(TASK_CONDITION).loc[[key]]
        kmf = _kaplan_meier(surv["duration"], surv["event"], ci)
        median_ci = median_survival_times(kmf.confidence_interval_).to_numpy().ravel()
        out.append(
            AdherenceRow(
                **dict(zip(TASK_CONDITION, map(str, key), strict=True)),
                n_samples=matrix.shape[0],
                n_points=len(grid),
                auc_low=float(auc_low),
                auc_high=float(auc_high),
                half_life_low=half_life_low,
                half_life_high=half_life_high,
                survival_median=float(kmf.median_survival_time_),
                survival_median_low=float(median_ci[0]),
                survival_median_high=float(median_ci[1]),
                failures=int(surv["event"].sum()),
                censored=int((~surv["event"].astype(bool)).sum()),
                **metrics,
            )
        )
    return out


def summary_frame(summaries: list[AdherenceRow]) -> pd.DataFrame:
    return result_frame(AdherenceRow, summaries)
