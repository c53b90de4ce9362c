"""Adherence metrics per condition (model, task, item, policy) from `windows.csv` rows.

Definitions (docs/architecture.md, "Adherence"): a window passes when every window-scope
check that could decide passed (undetermined checks are ignored; a window where none decided
is left out). a(t) = share of samples whose window covering t passes, at the window starts seen
in the condition (a picture; no per-sample metric uses that grid). Over a fixed t-range [1, T]
(T = the run's max_tokens, fixed before the data; else each sample's own span), in generated
positions (reminders and user turns do not count): each sample's
AUC = the share of its own decided positions that pass (token-weighted, its own windows only),
final = the same over (floor(3T/4), T]; the condition's values are their means. half-life =
first of 8 fixed checkpoints where a(t) < a(1)/2 (censored if never); survival = time
(t_start) to the first failing window, censored at the last window's t_end for samples that
never fail; its median is the Kaplan-Meier median. pass^r, aptitude, unreliability:
`harness.scoring.reliability`.

Intervals (harness.stats; docs/architecture.md, "Statistics"), the sample being the unit:
a(t) pointwise exact binomial; AUC and final the bounded-mean interval of the per-sample
values (exact binomial when each is 0 or 1, a betting interval otherwise); half-life by
inverting a band of a(t) simultaneous over the 8 checkpoints; survival median from exact
binomial bounds on the share failed by t. `anytime=True` makes each a confidence sequence
(valid under optional stopping, samples in the order of their index).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from harness import results
from harness.results import AdherenceRow, cells_are, result_frame
from harness.scoring import corrected as instrument
from harness.scoring.reliability import reliability_fields
from harness.scoring.spill import key_groups, sorted_runs
from harness.scoring.survival import first_failures, survival_median_interval
from harness.stats import (
    BINARY_CS,
    DEFAULT_LEVEL,
    Interval,
    binomial_interval,
    mean_interval,
    none_interval,
)
from harness.stats.sided import one_sided_bounds

# pandas groups by lists: a tuple would be one key
TASK_CONDITION = list(results.TASK_CONDITION)
RUN_SAMPLE = list(results.RUN_SAMPLE)


def window_passes(windows: pd.DataFrame) -> pd.DataFrame:
    """One row per (condition, sample, window) some check decided: t_start, t_end, passed
    (bool), and g_start, g_end: the generated tokens it covers (1-based among the sample's
    generated tokens; t also counts injected reminders, user turns and chat markup, which
    would push a sample past the horizon in t). A window reaches to the next window's first
    generated token (decided or not); the last one spans t_end - t_start + 1 tokens."""
    keep = (windows["scope"] == "window") & (windows["window"] >= 0)
    # the columns read here, not the whole frame: a chat log's windows are ~100 MiB at 10,000
    needed = [*TASK_CONDITION, *RUN_SAMPLE, "window", "t_start", "t_end", "t_gen_start", "passed"]
    w = windows.loc[keep, [c for c in windows.columns if c in needed]].copy()
    decided = w["passed"].notna()
    w["passed"] = cells_are(w["passed"], True) | ~decided
    w["decided"] = decided
    keys = TASK_CONDITION + RUN_SAMPLE + ["window"]
    out = _sorted_window_groups(w, keys)
    if out is None:
        grouped = w.groupby(keys, sort=True, dropna=False)
        out = grouped.agg(
            t_start=("t_start", "first"),
            t_end=("t_end", "first"),
            g_start=("t_gen_start", "first"),
            passed=("passed", "all"),
            decided=("decided", "any"),
        ).reset_index()
    # undecided checks are ignored: `passed` is over the checks that decided
    following = _next_in_sample(out)
    last = out["g_start"] + out["t_end"] - out["t_start"]
    out["g_end"] = following.sub(1).fillna(last).astype(out["g_start"].dtype)
    out = out[out["decided"]].drop(columns="decided")
    return out.reset_index(drop=True)


def _sorted_window_groups(w: pd.DataFrame, keys: list[str]) -> pd.DataFrame | None:
    """`window_passes`' groupby of `w` where its rows are in key order (a chunk of a chat log,
    a run's windows.csv): each window a run of rows, its first row's t columns, its checks'
    verdicts reduced per run, without the groupby's ~8 keys factorized and sorted again. None
    where they are not (or a t column could be null: `first` skips nulls)."""
    starts = sorted_runs(w, keys)
    columns = ["t_start", "t_end", "t_gen_start"]
    if starts is None or any(w[c].dtype.kind not in "iu" for c in columns):
        return None
    out = w.iloc[starts][[*keys, *columns]].reset_index(drop=True)
    out = out.rename(columns={"t_gen_start": "g_start"})
    out["passed"] = np.logical_and.reduceat(w["passed"].to_numpy(bool), starts)
    out["decided"] = np.logical_or.reduceat(w["decided"].to_numpy(bool), starts)
    return out


def _next_in_sample(out: pd.DataFrame) -> pd.Series:
    """Each window's next window's g_start within its sample (NaN for a sample's last), as
    `groupby(sample).shift(-1)` gives it; by runs where `out` is in key order (it is, from
    either path of `window_passes`, unless a key is null)."""
    samples = TASK_CONDITION + RUN_SAMPLE
    starts = sorted_runs(out, samples)
    if starts is None:
        return out.groupby(samples, sort=False)["g_start"].shift(-1)
    following = np.empty(len(out))
    following[:-1] = out["g_start"].to_numpy()[1:]
    following[np.r_[starts[1:], len(out)] - 1] = np.nan  # each sample's last window
    return pd.Series(following, index=out.index)


_ROWS = 8192  # windows placed in the pass matrix per step


def pass_matrix(
    cond: pd.DataFrame, grid: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(grid t (G,), matrix (S, G) of 1/0/NaN: sample s's window covering t passes; where a
    sample's windows overlap, its later row wins). grid: the window starts seen, unless given."""
    grid, codes = _pass_codes(cond, grid)
    return grid, np.where(codes < 0, np.nan, codes.astype(float))


def _pass_codes(
    cond: pd.DataFrame, grid: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """`pass_matrix` as int8 codes, 1 pass, 0 fail, -1 no window (NaN there): a byte per
    cell, where the float matrix and the copies nansum and nanmean make of it take 8 each
    (10,000 samples x ~700 points: ~55 MiB per copy)."""
    grid = np.sort(cond["t_start"].unique()) if grid is None else np.asarray(grid, float)
    groups = cond.groupby(RUN_SAMPLE, sort=True)
    sample = groups.ngroup().to_numpy()
    first = np.searchsorted(grid, cond["t_start"].to_numpy(), side="left")
    stop = np.searchsorted(grid, cond["t_end"].to_numpy(), side="right")
    span = np.maximum(stop - first, 0)
    passed = cond["passed"].to_numpy(dtype=np.int8)
    matrix = np.full((groups.ngroups, len(grid)), -1, dtype=np.int8)
    # rows in order, a slice at a time: the (row, point) pairs of a chat log's thousands of
    # windows, each covering dozens of dense points, would be hundreds of MiB at once
    for lo in range(0, len(cond), _ROWS):
        part = span[lo : lo + _ROWS]
        rows = np.repeat(np.arange(lo, lo + len(part)), part)
        starts = np.repeat(first[lo : lo + _ROWS], part)
        cols = starts + np.arange(part.sum()) - np.repeat(np.cumsum(part) - part, part)
        matrix[sample[rows], cols] = passed[rows]
    return grid, matrix


_SAMPLES = 4096  # samples whose pass codes are counted per step


def pass_counts(
    cond: pd.DataFrame, grid: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(grid t, passes k (float), samples n) per point: `_pass_codes`' 1s and cells >= 0
    counted per column, `_SAMPLES` samples' rows at a time (the codes of a log of 100,000
    conversations over ~1,500 points are ~150 MiB at once; sums of 0s and 1s are exact in
    any order, so the counts are the same). grid: the window starts seen, unless given (a
    cell depends on t alone, so counts at a t are the same on any grid holding it)."""
    grid = np.sort(cond["t_start"].unique()) if grid is None else grid
    sample = cond.groupby(RUN_SAMPLE, sort=True).ngroup().to_numpy()
    k, n = np.zeros(len(grid)), np.zeros(len(grid), dtype=np.int64)
    # `window_passes` leaves a condition's rows in sample order: a step is whole samples
    steps = (
        np.searchsorted(sample, np.arange(0, sample.max() + _SAMPLES + 1, _SAMPLES))
        if len(sample) and (np.diff(sample) >= 0).all()
        else np.array([0, len(sample)])
    )
    for lo, hi in zip(steps[:-1], steps[1:], strict=True):
        if hi > lo:
            codes = _pass_codes(cond.iloc[lo:hi], grid)[1]
            k += (codes == 1).sum(axis=0)
            n += (codes >= 0).sum(axis=0)
    return grid, k, n


def _nanmean(x: np.ndarray, axis: int) -> np.ndarray:
    with warnings.catch_warnings():  # all-NaN slices are expected NaNs here
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmean(x, axis=axis)


def point_band(
    matrix: np.ndarray, *, level: float, anytime: bool = False, points: int = 1
) -> tuple[np.ndarray, np.ndarray, str]:
    """(low (G,), high (G,), method) of a(t) at each point, over the samples covering it;
    `points` > 1: Bonferroni over that many points, so the band holds at all of them at once."""
    adjusted = 1 - (1 - level) / points
    if not anytime:
        k, n = np.nansum(matrix, axis=0), (~np.isnan(matrix)).sum(axis=0)
        low, high = _clopper_band(k, n, level, points)
        method = "clopper-pearson"
    else:
        # a window passes or fails: the value type is binary, whatever the data
        cis = [
            mean_interval(col, level=adjusted, anytime=True, value_type="binary")
            for col in matrix.T
        ]
        low, high = np.array([c.low for c in cis]), np.array([c.high for c in cis])
        method = BINARY_CS
    return low, high, method if points == 1 else f"{method}, bonferroni over {points} points"


def _clopper_band(k: np.ndarray, n: np.ndarray, level: float, points: int = 1):
    """Clopper-Pearson at each point from its passes k and samples n, Bonferroni over
    `points` (point_band's fixed-sample band, for callers that count k and n themselves)."""
    return binomial_interval(k, n, level=1 - (1 - level) / points)


HALF_LIFE_POINTS = 8  # checkpoints of the half-life: a count fixed before the data


def checkpoints(horizon: float) -> np.ndarray:
    """The half-life's fixed points t_j = 1 + floor(j T / K), j < K (K = HALF_LIFE_POINTS)."""
    return 1 + np.floor(np.arange(HALF_LIFE_POINTS) * float(horizon) / HALF_LIFE_POINTS)


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


def _columns(matrix: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """matrix[:, keep] without copying the (samples x points) matrix when every column is kept
    (the usual case: each point is some window's start, so some sample decides it)."""
    return matrix if keep.all() else matrix[:, keep]


def _share(weights: np.ndarray, passed: np.ndarray, sample: np.ndarray, samples: int):
    """Per sample: the weighted share of passing positions, NaN where it has none."""
    total = np.bincount(sample, weights, minlength=samples)
    hits = np.bincount(sample, weights * passed, minlength=samples)
    return np.where(total > 0, hits / np.where(total > 0, total, 1.0), np.nan)


def sample_values(cond: pd.DataFrame, horizon: float | None = None):
    """Per-sample AUC and final (S,), samples in `pass_matrix`'s order, each from the sample's
    own windows alone: the share of its decided generated positions that pass, over g in
    [1, T] (AUC) and over g in (floor(3T/4), T] (final), a window weighing the generated
    positions it covers there (`window_passes`' g_start..g_end). T = `horizon`, fixed before
    the data (the run's max_tokens, a budget of generated tokens); None: each sample's own
    last g_end. A sample that stopped before T counts over the positions it has (NaN final when it
    has none in the last quarter: it leaves final's n)."""
    groups = cond.groupby(RUN_SAMPLE, sort=True)
    sample = groups.ngroup().to_numpy()
    # generated positions: the horizon is the run's max_tokens, a budget of generated tokens
    start, end = cond["g_start"].to_numpy(float), cond["g_end"].to_numpy(float)
    passed = cond["passed"].to_numpy(float)
    top = (
        groups["g_end"].transform("max").to_numpy(float)
        if horizon is None
        else np.full(len(cond), float(horizon))
    )
    values = []
    for low in (np.ones(len(cond)), np.floor(3 * top / 4) + 1):
        weights = np.clip(np.minimum(end, top) - np.maximum(start, low) + 1, 0, None)
        values.append(_share(weights, passed, sample, groups.ngroups))
    return values[0], values[1]


def half_life_interval(
    t: np.ndarray, matrix: np.ndarray, *, level: float, anytime: bool = False
) -> Interval:
    """Half-life interval by inverting a simultaneous band [L, U] of a(t) over the fixed
    points t0 < t1 < ... (`checkpoints`; the band is Bonferroni over all of them, determined
    or not, so the set is fixed before the data): on the band, a(t) cannot have halved before
    the first t with L(t) < U(t0)/2 (the low end), and has surely halved by the first t with
    U(t) < L(t0)/2 (the high end; inf when no t is sure). inf at the low end: the band says it
    never halved within the run."""
    points = len(t)
    a = _nanmean(matrix, 0)
    keep = ~np.isnan(a)
    t, m = t[keep], _columns(matrix, keep)
    est = curve_metrics(t, a[keep])["half_life"] if len(t) else math.nan
    n = int((~np.isnan(m)).any(axis=1).sum()) if len(t) else 0
    if len(t) == 0:
        return none_interval(math.nan, 0, "no determined window")
    low, high, method = point_band(m, level=level, anytime=anytime, points=points)
    maybe = np.nonzero(low[1:] < high[0] / 2)[0]
    surely = np.nonzero(high[1:] < low[0] / 2)[0]
    lo = float(t[1:][maybe[0]]) if len(maybe) else math.inf
    hi = float(t[1:][surely[0]]) if len(surely) else math.inf
    return Interval(float(est), lo, hi, n, f"band inversion ({method})")


def half_life_points(cond: pd.DataFrame, horizon: float | None) -> tuple[np.ndarray, np.ndarray]:
    """(checkpoints (K,), matrix (S, K)): a(t) at the half-life's fixed points over [1, T]
    (T = horizon, else the condition's last t_end)."""
    top = float(cond["t_end"].max()) if horizon is None else float(horizon)
    return pass_matrix(cond, checkpoints(top))


@dataclass
class ConditionValues:
    """What a condition's adherence.csv row reads of its windows' passes: the per-sample AUC
    and final (`sample_values`), survival durations and events (`first_failures`), a(t) at
    the half-life's checkpoints (`half_life_points`), and how many window starts it saw.
    Samples in `pass_matrix`'s order. A chat log's are gathered a chunk at a time
    (`harness.scoring.digest`): every one of them is per sample, but the checkpoints."""

    auc: np.ndarray
    final: np.ndarray
    durations: np.ndarray
    events: np.ndarray
    points: np.ndarray
    at_points: np.ndarray
    n_points: int


def condition_values(cond: pd.DataFrame, horizon: float | None) -> ConditionValues:
    """One condition's `ConditionValues` from its `window_passes` rows."""
    auc, final = sample_values(cond, horizon)
    failures = first_failures(cond)
    points, at_points = half_life_points(cond, horizon)
    durations, events = failures["duration"].to_numpy(float), failures["event"].to_numpy(bool)
    return ConditionValues(
        auc, final, durations, events, points, at_points, int(cond["t_start"].nunique())
    )


def _condition_summary(
    key, values: ConditionValues, level: float, anytime: bool, gate_level: float,
    abstain: dict, rates: dict | None,
) -> AdherenceRow:  # fmt: skip
    auc_s, final_s = values.auc, values.final
    auc = mean_interval(auc_s, level=level, anytime=anytime)
    deciders = abstain.get("deciders")
    corrected = instrument.corrected_mean(auc_s, auc, deciders, rates, level, anytime)
    final = mean_interval(final_s, level=level, anytime=anytime)
    points, at_points = values.points, values.at_points
    half = half_life_interval(points, at_points, level=level, anytime=anytime)
    durations, events = values.durations, values.events
    median = survival_median_interval(durations, events, level=level, anytime=anytime)
    fields: dict = {}
    for name, ci in (
        ("auc", auc),
        ("final", final),
        ("half_life", half),
        ("survival_median", median),
        ("auc_corrected", corrected),
    ):
        fields.update(ci.row(name))
    # auc and final: the means of the per-sample values (the intervals' estimates); a_first
    # and the half-life: the mean curve's at the checkpoints
    curve = curve_metrics(points, _nanmean(at_points, 0))
    fields.update(a_first=curve["a_first"], half_life_censored=curve["half_life_censored"])
    fields.update(reliability_fields(auc_s, level=level, anytime=anytime))
    for name, sample in (("auc", auc_s), ("final", final_s)):  # what the gates read
        bounds = one_sided_bounds(sample, level=gate_level, anytime=anytime)
        fields.update({f"{name}_lcb": bounds.lcb, f"{name}_ucb": bounds.ucb})
    return AdherenceRow(
        **dict(zip(TASK_CONDITION, map(str, key), strict=True)),
        # `pass_matrix`'s shape, without building its (samples x points) floats
        n_samples=len(auc_s),
        n_points=values.n_points,
        failures=int(events.sum()),
        censored=int((~events).sum()),
        **instrument.abstention_fields(abstain),
        **fields,
    )


def adherence_summary(
    windows: pd.DataFrame,
    *,
    level: float = DEFAULT_LEVEL,
    anytime: bool = False,
    horizon: float | None = None,
    rates: dict[str, instrument.CheckRates] | None = None,
    gate_level: float | None = None,
    passes: pd.DataFrame | None = None,
    abstain: pd.DataFrame | None = None,
    conditions: dict[tuple, ConditionValues] | None = None,
) -> list[AdherenceRow]:
    """AUC, final, half-life and survival median with their intervals, per condition, the
    windows no check decided, and the AUC corrected for the check's error where `rates` (by
    check id) has the deciding check (harness.scoring.corrected).
    anytime=True: every interval a confidence sequence (for sampling until decided).
    horizon: the fixed t-range [1, T] of AUC, final and the half-life's checkpoints (the
    run's max_tokens); None: each sample's own span (`sample_values`). gate_level: the level
    of the one-sided bounds auc/final_lcb/ucb that gates read (`harness.gate_specs.gate_level`;
    None: `level`). passes, abstain: the windows' `window_passes` and `window_abstentions`,
    where the caller has them (with both, `windows` is not read); conditions: the passes'
    `ConditionValues` by condition, in key order, instead of the passes (a chat log's, made
    with this `horizon`)."""
    if conditions is None:
        passes = window_passes(windows) if passes is None else passes
        groups = key_groups(passes, TASK_CONDITION)
        conditions = {key: condition_values(cond, horizon) for key, cond in groups}
    abstain = instrument.window_abstentions(windows) if abstain is None else abstain
    args = (level, anytime, level if gate_level is None else gate_level)
    return [
        _condition_summary(key, values, *args, abstain.loc[key].to_dict(), rates)
        for key, values in conditions.items()
    ]


def summary_frame(summaries: list[AdherenceRow]) -> pd.DataFrame:
    return result_frame(AdherenceRow, summaries)
