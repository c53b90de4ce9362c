"""Adherence metrics per condition (model, task, item, policy) from `windows.csv` rows.

Definitions (docs/architecture.md, "Adherence"): a window's all-rules verdict is
`harness.scoring.all_rules`' (the one definition a(k) shares; an undecided window is left
out). a(t) = share of samples whose window covering t passes, at the window starts seen
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

import json
import math
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from harness import results
from harness.results import AdherenceRow, result_frame
from harness.scoring import corrected as instrument
from harness.scoring.passes import generated_clock, pass_matrix, window_passes
from harness.scoring.reliability import reliability_fields
from harness.scoring.spill import key_groups
from harness.scoring.survival import first_failures, survival_median_interval
from harness.stats import (
    BINARY_CS,
    DEFAULT_LEVEL,
    Interval,
    binomial_interval,
    mean_interval,
    none_interval,
)
from harness.stats.group_sequential import binary_count
from harness.stats.sided import one_sided_bounds

# the level of the gates' one-sided bounds, or (that level, Holm's later levels...):
# `harness.config.gate_specs.gate_levels`
GateLevels = float | tuple[float, ...]
# pandas groups by lists: a tuple would be one key
TASK_CONDITION = list(results.TASK_CONDITION)
RUN_SAMPLE = list(results.RUN_SAMPLE)


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
    """(checkpoints (K,), matrix (S, K)): a(g) at the half-life's fixed points over [1, T] of
    generated tokens g (`generated_clock`; T = horizon, the run's max_tokens, else the
    condition's last g_end)."""
    top = float(cond["g_end"].max()) if horizon is None else float(horizon)
    return pass_matrix(generated_clock(cond), checkpoints(top))


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
    failures = first_failures(generated_clock(cond))  # survival in generated tokens, as AUC
    points, at_points = half_life_points(cond, horizon)
    durations, events = failures["duration"].to_numpy(float), failures["event"].to_numpy(bool)
    return ConditionValues(
        auc, final, durations, events, points, at_points, int(cond["t_start"].nunique())
    )


def gate_bounds(samples: dict[str, np.ndarray], gate_level: GateLevels, anytime: bool) -> dict:
    """What the gates read of per-sample values (by metric: auc, final): `<metric>_lcb/_ucb`
    at the first of `gate_level`'s levels, and `holm_bounds` at the later ones (Holm's steps;
    None without)."""
    first, *ladder = (gate_level,) if isinstance(gate_level, (int, float)) else gate_level
    fields: dict = {}
    steps: dict[str, list] = {"levels": ladder}
    for name, sample in samples.items():
        bounds = one_sided_bounds(sample, level=first, anytime=anytime)
        fields.update({f"{name}_lcb": bounds.lcb, f"{name}_ucb": bounds.ucb})
        steps[name] = [_bounds_at(sample, step, anytime) for step in ladder]
    fields["holm_bounds"] = json.dumps(steps) if ladder else None
    return fields


def _bounds_at(sample: np.ndarray, level: float, anytime: bool) -> list[float | None]:
    """[lcb, ucb] at one of Holm's later levels (None for NaN: JSON has no NaN)."""
    bounds = one_sided_bounds(sample, level=level, anytime=anytime)
    return [None if math.isnan(b) else b for b in (bounds.lcb, bounds.ucb)]


def _condition_summary(
    key, values: ConditionValues, level: float, anytime: bool, gate_level: GateLevels,
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
    fields.update(gate_bounds({"auc": auc_s, "final": final_s}, gate_level, anytime))
    for name, sample in (("auc", auc_s), ("final", final_s)):
        # what a sequential run's group-sequential test counts (harness.analysis.gate_sequential)
        coin = "|".join(str(key[TASK_CONDITION.index(c)]) for c in ("model", "item", "policy"))
        fields[f"{name}_passes"] = binary_count(sample[~np.isnan(sample)], f"{name}|{coin}")
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
    gate_level: GateLevels | None = None,
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
    of the one-sided bounds auc/final_lcb/ucb that gates read, or (that level, Holm's later
    levels, whose bounds go to `holm_bounds`: `harness.config.gate_specs.gate_levels`); None:
    `level`. passes, abstain: the windows'
    `window_passes` and `window_abstentions`,
    where the caller has them (with both, `windows` is not read); conditions: the passes'
    `ConditionValues` by condition, in key order, instead of the passes (a chat log's, made
    with this `horizon`)."""
    if conditions is None:
        passes = window_passes(windows) if passes is None else passes
        groups = key_groups(passes, TASK_CONDITION)
        conditions = {key: condition_values(cond, horizon) for key, cond in groups}
    abstain = instrument.window_abstentions(windows) if abstain is None else abstain
    args = (level, anytime, level if gate_level is None else gate_level)
    # a condition whose rules all judge whole replies has no window-scope row to abstain on
    return [
        _condition_summary(key, values, *args, _abstentions(abstain, key), rates)
        for key, values in conditions.items()
    ]


def _abstentions(abstain: pd.DataFrame, key: tuple) -> dict:
    return abstain.loc[key].to_dict() if key in abstain.index else {}


def summary_frame(summaries: list[AdherenceRow]) -> pd.DataFrame:
    return result_frame(AdherenceRow, summaries)
