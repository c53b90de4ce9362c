"""Survival of adherence: time to a sample's first failing window (or turn) and the
Kaplan-Meier median with an interval from binomial bounds on the share failed by t
(docs/architecture.md, "Adherence"; used by `harness.scoring.adherence` for windows and by
`harness.analysis.conversations` for turns)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from harness import results
from harness.results import SurvivalRow, result_frame
from harness.scoring.passes import generated_clock
from harness.scoring.spill import sorted_runs
from harness.stats import DEFAULT_LEVEL, Interval, binomial_interval, mean_interval, none_interval

TASK_CONDITION = list(results.TASK_CONDITION)
RUN_SAMPLE = list(results.RUN_SAMPLE)


def first_failures(passes: pd.DataFrame) -> pd.DataFrame:
    """Per sample: duration (t_start of its first failing window, else last t_end) and event."""
    keys = TASK_CONDITION + RUN_SAMPLE
    starts = sorted_runs(passes, keys)
    if starts is not None:  # in key order (window_passes'): each sample a run of rows
        fail = np.where(passes["passed"].to_numpy(bool), np.nan, passes["t_start"].to_numpy(float))
        first = np.fmin.reduceat(fail, starts)  # NaN only where no window failed
        end = np.maximum.reduceat(passes["t_end"].to_numpy(), starts)
        event = ~np.isnan(first)
        agg = pd.DataFrame({k: passes[k].to_numpy()[starts] for k in keys})
        agg["duration"] = np.where(event, first, end).astype(float)
        agg["event"] = event
        return agg
    # a min and a max per sample: the rows' order does not matter, so they are not sorted
    p = passes
    fail_start = p["t_start"].where(~p["passed"])
    grouped = pd.DataFrame({"fail": fail_start, "end": p["t_end"]}).groupby(
        [p[k] for k in keys], sort=True, dropna=False
    )
    agg = grouped.agg(fail=("fail", "min"), end=("end", "max")).reset_index()
    event = agg["fail"].notna()
    agg["duration"] = np.where(event, agg["fail"], agg["end"]).astype(float)
    agg["event"] = event.to_numpy()
    return agg[[*TASK_CONDITION, *RUN_SAMPLE, "duration", "event"]]


def kaplan_meier(durations: np.ndarray, events: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(event times, S(t) just after each) of the product-limit estimator."""
    times = np.unique(durations[events])
    # counted on sorted copies: the (times x samples) comparisons were ~150 MiB per matrix
    # for a log of 100,000 conversations; the counts (so every float after them) are the same
    ordered, failed = _sorted_numbers(durations), _sorted_numbers(durations[events])
    at_risk = len(ordered) - np.searchsorted(ordered, times, side="left")
    died = np.searchsorted(failed, times, side="right") - np.searchsorted(failed, times, "left")
    return times, np.cumprod(1 - died / at_risk)


def failed_bounds(durations, events, times, earliest=None) -> tuple[np.ndarray, np.ndarray]:
    """Per t: samples surely failed by t, and those that may have (a sample censored before t
    may or may not have failed by t; nor may one whose `earliest` possible failure, a unit
    with no verdict before its observed failure or censoring, is by t) -> (k_low, k_high) of
    shape (T,)."""
    durations, events = np.asarray(durations, float), np.asarray(events, bool)
    may = durations if earliest is None else np.fmin(durations, np.asarray(earliest, float))
    surely, maybe = _sorted_numbers(durations[events]), _sorted_numbers(may)
    return _at_most(surely, times), _at_most(maybe, times)


# Turns and generated positions count from 1: no failure, so no median, comes before it.
FIRST_TIME = 1.0


def samples_to_bound_median(level: float, anytime: bool = False, max_n: int = 10_000) -> int:
    """The fewest samples with which `survival_median_interval` can bound a median at all: the
    n at which n samples that all fail (or all survive) at one time put the share failed by
    then on one side of 1/2 (6 at 95 %, exact binomial: 2 x 0.5^n <= 5 %). Below it the
    interval is [FIRST_TIME, inf] whatever the data."""
    for n in range(1, max_n + 1):
        if anytime:
            ones = np.ones(n)
            high = mean_interval(1 - ones, level=level, anytime=True, value_type="binary").high
        else:
            high = float(binomial_interval(np.array([0]), np.array([n]), level=level)[1][0])
        if high < 0.5:
            return n
    return max_n


def _sorted_numbers(values: np.ndarray) -> np.ndarray:
    """The values sorted, NaN left out (no comparison with NaN holds; np.sort puts it last)."""
    ordered = np.sort(np.asarray(values, float))
    return ordered[: len(ordered) - int(np.isnan(ordered).sum())]


def _at_most(ordered: np.ndarray, times: np.ndarray) -> np.ndarray:
    """Per t: how many of the sorted `ordered` are <= t (none for a NaN t)."""
    times = np.asarray(times, float)
    return np.where(np.isnan(times), 0, np.searchsorted(ordered, times, side="right"))


def survival_median_interval(
    durations: np.ndarray,
    events: np.ndarray,
    *,
    level: float,
    anytime: bool = False,
    earliest: np.ndarray | None = None,
) -> Interval:
    """Kaplan-Meier median with an interval from bounds on F(t) = P(fail by t) at each observed
    time: F(t) >= L(t) (failures counted, censored as not failed) and F(t) <= U(t) (censored
    before t as failed). The median is > every t with U(t) < 1/2 and <= the first t with
    L(t) >= 1/2 (inf if none). Fixed n: exact binomial bounds; the counts only grow with t,
    so one pointwise interval suffices (the order-statistic interval when nothing is censored
    early). anytime: confidence sequences at the same level, made monotone in t (U a running
    max, L a running min), so again only the bound at the true median matters: the correction
    set is that one point, fixed before the data, however many times are observed.
    earliest: per sample, the first time it may have failed (a turn with no verdict before
    its observed failure or censoring: missing evidence, never a pass), else its duration.
    The low end is never below FIRST_TIME (below `samples_to_bound_median` it is that, and
    the high end inf: nothing is bounded)."""
    durations, events = np.asarray(durations, float), np.asarray(events, bool)
    n = len(durations)
    if n == 0:
        return none_interval(math.nan, 0, "no sample")
    times, surv = kaplan_meier(durations, events)
    below = np.nonzero(surv <= 0.5 + 1e-12)[0]  # a float product of exactly 1/2
    est = float(times[below[0]]) if len(below) else math.inf
    may = durations if earliest is None else np.fmin(durations, np.asarray(earliest, float))
    grid = np.unique(np.concatenate([durations, may]))
    k_low, k_high = failed_bounds(durations, events, grid, may)
    if anytime:  # samples in their given (arrival) order
        f_low = [_cs(durations <= t, events, level, True) for t in grid]
        f_high = [_cs(may <= t, events, level, False) for t in grid]
        # monotone envelopes (U: running max from the left, L: running min from the right):
        # then each end needs its bound at one point fixed by the truth, the median itself
        high_f = np.maximum.accumulate(np.array(f_high))
        low_f = np.minimum.accumulate(np.array(f_low)[::-1])[::-1]
        method = "binomial bounds (beta-binomial-cs, monotone envelope)"
    else:
        low_f = binomial_interval(k_low, np.full(len(grid), n), level=level)[0]
        high_f = binomial_interval(k_high, np.full(len(grid), n), level=level)[1]
        method = "binomial bounds (clopper-pearson)"
    # the last time before U(t) first reaches 1/2 (all of them if it never does), else the
    # first time a failure can have
    reach = np.nonzero(high_f >= 0.5)[0]
    first = reach[0] if len(reach) else len(grid)
    lo = max(float(grid[first - 1]), FIRST_TIME) if first > 0 else FIRST_TIME
    over = np.nonzero(low_f >= 0.5)[0]
    hi = float(grid[over[0]]) if len(over) else math.inf
    return Interval(est, lo, hi, n, method)


def _cs(by_t: np.ndarray, events: np.ndarray, level: float, surely: bool) -> float:
    """One end of the CS of F(t): low end from sure failures, high end from possible ones."""
    share = (by_t & events) if surely else by_t  # failed by t or not: binary
    ci = mean_interval(share, level=level, anytime=True, value_type="binary")
    return ci.low if surely else ci.high


def survival_curves(
    passes: pd.DataFrame | None, *, level: float = DEFAULT_LEVEL, failures: dict | None = None
) -> pd.DataFrame:
    """Kaplan-Meier S(t) per condition: model, task, item, policy, t, survival, survival_low,
    survival_high, n, method. The band is pointwise: 1 - the binomial bounds on F(t) of
    `survival_median_interval` (exact when no sample is censored before t). passes: the
    windows' `harness.scoring.passes.window_passes`; failures: instead, each condition's
    `first_failures` as (durations, events), in key order (a chat log's, a chunk at a time)."""
    if failures is None:
        failures = {
            key: (cond["duration"].to_numpy(float), cond["event"].to_numpy(bool))
            for key, cond in first_failures(generated_clock(passes)).groupby(
                TASK_CONDITION, sort=True
            )
        }
    frames = []
    for key, (d, e) in failures.items():
        times, surv = kaplan_meier(d, e)
        times, surv = np.concatenate([[0.0], times]), np.concatenate([[1.0], surv])
        k_low, k_high = failed_bounds(d, e, times)
        n = np.full(len(times), len(d))
        low = 1 - binomial_interval(k_high, n, level=level)[1]
        high = 1 - binomial_interval(k_low, n, level=level)[0]
        frame = pd.DataFrame(
            {
                "t": times,
                "survival": surv,
                "survival_low": low,
                "survival_high": high,
                "n": n,
                "method": "binomial bounds (clopper-pearson)",
            }  # fmt: skip
        )
        for col, value in zip(TASK_CONDITION, key, strict=True):
            frame.insert(TASK_CONDITION.index(col), col, value)
        frames.append(frame)
    return result_frame(SurvivalRow, pd.concat(frames, ignore_index=True) if frames else ())
