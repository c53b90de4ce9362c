"""A log's or run's windows.csv rows as passes: one row per decided window of a sample
(`window_passes`), and what covers each position t (`pass_matrix`, `pass_counts`): the rows
every adherence metric (`harness.scoring.adherence`), curve and digest is computed from."""

from __future__ import annotations

import numpy as np
import pandas as pd

from harness import results
from harness.results import cells_are
from harness.scoring.all_rules import missing_verdicts, unit_verdict
from harness.scoring.spill import sorted_runs

# pandas groups by lists: a tuple would be one key
TASK_CONDITION = list(results.TASK_CONDITION)
RUN_SAMPLE = list(results.RUN_SAMPLE)


def window_passes(windows: pd.DataFrame) -> pd.DataFrame:
    """One row per (condition, sample, window) some rule decided: t_start, t_end, passed
    (bool), and g_start, g_end: the generated tokens it covers (1-based among the sample's
    generated tokens; t also counts injected reminders, user turns and chat markup, which
    would push a sample past the horizon in t). A window reaches to the next window's first
    generated token (decided or not); the last one spans t_end - t_start + 1 tokens.

    Every rule counts (all rules, as `harness.scoring.all_rules` defines a unit's verdict):
    a window is judged by its window-scope checks and the whole-reply checks of its reply
    (windows.csv's window -1 rows: the response of a single reply, each reply of a
    conversation). A reply with whole-reply rows and no window row is one window of its own
    (its span)."""
    keep = (windows["scope"] == "window") & (windows["window"] >= 0)
    whole = windows["window"] < 0
    # the columns read here, not the whole frame: a chat log's windows are ~100 MiB at 10,000
    needed = [*TASK_CONDITION, *RUN_SAMPLE, "window", "t_start", "t_end", "t_gen_start", "passed"]
    needed += ["turn"]
    w = windows.loc[keep, [c for c in windows.columns if c in needed]].copy()
    if "turn" not in w.columns:  # frames from before whole-reply rules were judged per reply
        w["turn"] = 1
    # a window-scope rule with no verdict (too few letters, a judge's abstention): missing
    w["missing"] = missing_verdicts(windows.loc[keep])
    out = _window_verdicts(w)
    if whole.any():
        out = _with_whole_replies(out, windows.loc[whole])
    else:
        passed, decided = unit_verdict(~out["passed"], out["decided"], out["missing"])
        out = out.assign(passed=passed, decided=decided)
    out = out.drop(columns="missing")
    # undecided checks are ignored: `passed` is over the checks that decided
    following = _next_in_sample(out)
    last = out["g_start"] + out["t_end"] - out["t_start"]
    out["g_end"] = following.sub(1).fillna(last).astype(out["g_start"].dtype)
    out = out[out["decided"]].drop(columns=["decided", "turn"])
    return out.reset_index(drop=True)


def generated_clock(passes: pd.DataFrame) -> pd.DataFrame:
    """`window_passes` rows on the generated-token clock: t_start, t_end replaced by g_start,
    g_end. Half-life and survival are read on it, as AUC and final are: a policy's injected
    reminders (counted in t) are its cost (summary.csv's tokens_injected, token_overhead), not
    time the rule survived, so policies with and without reminders compare on one clock."""
    return passes.assign(t_start=passes["g_start"], t_end=passes["g_end"])


def _window_verdicts(w: pd.DataFrame) -> pd.DataFrame:
    """Per window of `w` (window-scope rows): its t columns, turn, whether every check that
    decided passed (`passed`), whether any decided (`decided`) and whether a rule's verdict
    is missing (`missing`: `harness.scoring.all_rules`)."""
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
            turn=("turn", "first"),
            passed=("passed", "all"),
            decided=("decided", "any"),
            missing=("missing", "any"),
        ).reset_index()
    return out


REPLY = TASK_CONDITION + RUN_SAMPLE + ["turn"]


def _with_whole_replies(out: pd.DataFrame, whole: pd.DataFrame) -> pd.DataFrame:
    """`out`'s windows with their reply's whole-reply verdicts joined in, each window's
    all-rules verdict (`harness.scoring.all_rules.unit_verdict`: a whole-reply rule cut off
    at the token limit is missing evidence, never a pass), plus one window for each reply
    that has no window row."""
    r = whole.loc[
        :, [c for c in whole.columns if c in [*REPLY, "t_start", "t_end", "t_gen_start", "passed"]]
    ]
    if "turn" not in r.columns:
        r = r.assign(turn=1)
    decided = r["passed"].notna()
    r = r.assign(
        ok=cells_are(r["passed"], True) | ~decided, decided=decided, missing=missing_verdicts(whole)
    )
    per = r.groupby(REPLY, sort=False, dropna=False).agg(
        reply_ok=("ok", "all"),
        reply_decided=("decided", "any"),
        reply_missing=("missing", "any"),
        t_start=("t_start", "first"),
        t_end=("t_end", "first"),
        g_start=("t_gen_start", "first"),
    )
    per = per.reset_index()
    columns = [*REPLY, "reply_ok", "reply_decided", "reply_missing"]
    joined = out.merge(per[columns], on=REPLY, how="left")
    ok = joined["reply_ok"].astype("boolean").fillna(True).to_numpy(bool)
    reply_decided = joined["reply_decided"].astype("boolean").fillna(False).to_numpy(bool)
    missing = joined["reply_missing"].astype("boolean").fillna(False).to_numpy(bool)
    passed, decided = unit_verdict(
        ~(out["passed"].to_numpy(bool) & ok),
        out["decided"].to_numpy(bool) | reply_decided,
        missing | out["missing"].to_numpy(bool),
    )
    out = out.assign(passed=passed, decided=decided)
    seen = out[REPLY].drop_duplicates()
    alone = per.merge(seen, on=REPLY, how="left", indicator=True)
    alone = alone[alone["_merge"] == "left_only"]
    if alone.empty:
        return out
    # a reply no window-scope check scored: its whole-reply verdict covers its span
    passed, decided = unit_verdict(
        ~alone["reply_ok"].to_numpy(bool),
        alone["reply_decided"].to_numpy(bool),
        alone["reply_missing"].to_numpy(bool),
    )
    extra = alone.assign(window=-alone["turn"], passed=passed, decided=decided, missing=False)
    extra = extra[[*out.columns]].astype(
        {c: out[c].dtype for c in out.columns if c in ("passed", "decided")}
    )
    merged = pd.concat([out, extra], ignore_index=True)
    return merged.sort_values(
        TASK_CONDITION + RUN_SAMPLE + ["t_start"], kind="stable", ignore_index=True
    )


def _sorted_window_groups(w: pd.DataFrame, keys: list[str]) -> pd.DataFrame | None:
    """`window_passes`' groupby of `w` where its rows are in key order (a chunk of a chat log,
    a run's windows.csv): each window a run of rows, its first row's t columns, its checks'
    verdicts reduced per run, without the groupby's ~8 keys factorized and sorted again. None
    where they are not (or a t column could be null: `first` skips nulls)."""
    starts = sorted_runs(w, keys)
    columns = ["t_start", "t_end", "t_gen_start"]
    if starts is None or any(w[c].dtype.kind not in "iu" for c in columns):
        return None
    out = w.iloc[starts][[*keys, *columns, "turn"]].reset_index(drop=True)
    out = out.rename(columns={"t_gen_start": "g_start"})
    out["passed"] = np.logical_and.reduceat(w["passed"].to_numpy(bool), starts)
    out["decided"] = np.logical_or.reduceat(w["decided"].to_numpy(bool), starts)
    out["missing"] = np.logical_or.reduceat(w["missing"].to_numpy(bool), starts)
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
