"""Prompt or text? forks.csv -> carried.csv: adherence with and without the system prompt after
the same first t tokens, and their difference, the prompt's behavioural dependence.

An arm draw passes when every decided window-scope check of its item passes on the arm's text
(the window rule of windows.csv; items with response-scope checks only use those), fails when
one fails, and is left out when no check decides. Per (model, item, policy, fork_t):
the unit is the record: each record's draws are aggregated first (its share of passing draws
per arm), adherence_with / adherence_without = the mean of those shares over the records where
both arms decided (n), dependence = with - without, with the paired bounded-mean interval of
the per-record differences in [-1, 1] (`harness.stats.paired_interval`: exact binomial when
every difference is -1 or 1, a betting interval otherwise), at the run's family level: each
row's interval at 1 - (1 - level) / m over the m rows (conditions x fork positions) of the
run (Bonferroni), so with probability >= level every row's interval holds at once and no
verdict of carried.csv is wrong (95 % pointwise intervals over 12 rows would give a "depends"
on prompt-independent text in up to 46 % of runs). verdict: "depends" when the CI excludes 0,
"within band" when it lies within +-BAND (0.25), else "cannot tell". kl and
abs_delta_logp: the mean next-token KL(p_with || p_without) and |delta log p| at the fork
(nexttoken.csv row t = fork_t + 1, the first token the arms choose) over the forked records
that were probed; NaN when none was.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from harness import results
from harness.results import CarriedRow, as_bool, result_frame
from harness.stats import DEFAULT_LEVEL, Interval, paired_interval

CARRIED_COLUMNS = CarriedRow.columns()
RECORD = list(results.RECORD)
# |dependence| below this is "no longer changes behaviour": the band an interval must lie in
# before the report says so (a CI containing 0 alone is not evidence of no effect)
BAND = 0.25


def fork_verdict(low: float, high: float, band: float = BAND) -> str:
    """depends (the CI excludes 0), within band (it lies in [-band, band]) or cannot tell."""
    if np.isnan(low) or np.isnan(high):
        return "cannot tell"
    if low > 0 or high < 0:
        return "depends"
    return "within band" if -band <= low and high <= band else "cannot tell"


def family_level(level: float, rows: int) -> float:
    """Each of `rows` intervals' level so that all hold at once with probability >= level."""
    return 1 - (1 - level) / max(rows, 1)


def arm_passes(forks: pd.DataFrame) -> pd.DataFrame:
    """One row per (record, fork_t, arm, draw): passed as 1.0 / 0.0 / NaN (undecided)."""
    keys = [*RECORD, "fork_t", "arm", "draw"]
    if forks.empty:
        return pd.DataFrame(columns=[*keys, "passed"])
    frame = forks.copy()
    frame["decided"] = frame["passed"].map(as_bool)
    window_items = set(frame.loc[frame["scope"] == "window", "item"])
    use = (frame["scope"] == "window") | ~frame["item"].isin(window_items)
    frame = frame[use]

    def verdict(values: pd.Series) -> float:
        decided = [v for v in values if v is not None]
        return np.nan if not decided else float(all(decided))

    out = frame.groupby(keys, sort=True)["decided"].agg(verdict).reset_index()
    return out.rename(columns={"decided": "passed"})


def record_points(forks: pd.DataFrame, nexttoken: pd.DataFrame | None) -> pd.DataFrame:
    """Per (record, fork_t): the record's own dependence (share of passing draws with - without;
    NaN where an arm never decided) and its next-token KL at the fork (nexttoken.csv at
    t = fork_t + 1; NaN unprobed): linkage's kl-vs-dependence points, the record their unit."""
    cols = [*RECORD, "fork_t", "dependence", "kl"]
    passes = arm_passes(forks)
    if passes.empty:
        return pd.DataFrame(columns=cols)
    share = passes.groupby([*RECORD, "fork_t", "arm"])["passed"].mean().unstack("arm")
    share = share.reindex(columns=["with", "without"])  # an arm never drawn: NaN
    points = (share["with"] - share["without"]).rename("dependence").reset_index()
    if nexttoken is None or nexttoken.empty:
        return points.assign(kl=np.nan)[cols]
    at = nexttoken.assign(fork_t=nexttoken["t"] - 1)[[*RECORD, "fork_t", "kl"]]
    return points.merge(at, on=[*RECORD, "fork_t"], how="left")[cols]


def dependence_interval(
    with_arm: np.ndarray, without_arm: np.ndarray, *, level: float = DEFAULT_LEVEL
) -> Interval:
    """Interval of the mean per-record dependence for (records, draws) matrices of 1/0/NaN:
    draws aggregated within each record first; records where an arm never decided drop out."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a record with undecided draws only
        return paired_interval(
            np.nanmean(with_arm, axis=1), np.nanmean(without_arm, axis=1), level=level
        )


def carried_frame(
    forks: pd.DataFrame,
    lengths: dict[tuple, int],
    positions: list[int],
    nexttoken: pd.DataFrame | None = None,
    *,
    level: float = DEFAULT_LEVEL,
) -> pd.DataFrame:
    """carried.csv. `lengths`: continuation length per forked record (model, item, policy,
    sample); a position past a record's length is counted in `reason`."""
    passes = arm_passes(forks)
    conditions = sorted({key[:3] for key in lengths})
    family = family_level(level, len(conditions) * len(positions))
    rows = []
    for cond in conditions:
        members = sorted(k for k in lengths if k[:3] == cond)
        for t in positions:
            inside = [k for k in members if t <= lengths[k]]
            row = _row(passes, cond, t, inside, family)
            row.update(_nexttoken_at(nexttoken, inside, t))
            row["reason"] = _skip_reason(len(members) - len(inside), len(members), members, lengths)
            rows.append(row)
    return result_frame(CarriedRow, pd.DataFrame(rows, columns=CARRIED_COLUMNS))


def _row(passes, cond, t, inside, level) -> dict:
    row = dict(zip(["model", "item", "policy"], cond, strict=True))
    row.update(fork_t=t, records=len(inside), draws=0)
    sel = passes[(passes["fork_t"] == t) & passes[RECORD].apply(tuple, axis=1).isin(inside)]
    if sel.empty:
        return {**row, **dict.fromkeys(CARRIED_COLUMNS[6:11], np.nan), "n": 0,
                "method": "none (no decided draw)", "verdict": "cannot tell"}  # fmt: skip
    table = sel.pivot_table(
        index=[*RECORD, "draw"], columns="arm", values="passed", aggfunc="first", dropna=False
    )
    mats = {}
    for arm in ("with", "without"):
        col = table[arm] if arm in table else pd.Series(np.nan, index=table.index)
        mats[arm] = col.unstack("draw").to_numpy(dtype=np.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an arm that never decided: NaN
        shares = {arm: np.nanmean(m, axis=1) for arm, m in mats.items()}  # per record
    both = np.isfinite(shares["with"]) & np.isfinite(shares["without"])
    ci = dependence_interval(mats["with"], mats["without"], level=level)
    mean = {arm: float(v[both].mean()) if both.any() else np.nan for arm, v in shares.items()}
    return {
        **row,
        "draws": int(table.index.get_level_values("draw").nunique()),
        "adherence_with": mean["with"],
        "adherence_without": mean["without"],
        "dependence": ci.estimate,
        "dependence_low": ci.low,
        "dependence_high": ci.high,
        "n": ci.n,
        "method": ci.method,
        "verdict": fork_verdict(ci.low, ci.high),
    }


def _nexttoken_at(nexttoken: pd.DataFrame | None, inside: list[tuple], t: int) -> dict:
    empty = {"kl": np.nan, "abs_delta_logp": np.nan}
    if nexttoken is None or nexttoken.empty:
        return empty
    at = nexttoken[nexttoken["t"] == t + 1]
    at = at[at[RECORD].apply(tuple, axis=1).isin(inside)] if len(at) else at
    if at.empty:
        return empty
    return {"kl": float(at["kl"].mean()), "abs_delta_logp": float(at["delta_logp"].abs().mean())}


def _skip_reason(skipped: int, total: int, members, lengths) -> str:
    if not skipped:
        return ""
    longest = max(lengths[k] for k in members)
    return (
        f"past the continuation of {skipped} of {total} records "
        f"(longest: {longest} tokens); forked on the rest"
        if skipped < total
        else f"past the continuation of every record (longest: {longest} tokens)"
    )


def settled_from(carried: pd.DataFrame, band: float = BAND) -> float:
    """The first fork_t from which the dependence CI lies within [-band, band] at every later
    position (the prompt no longer changes behaviour by more than the band); NaN when the last
    position's CI does not (it depends, or there are too few records to tell)."""
    rows = carried.dropna(subset=["dependence_low", "dependence_high"]).sort_values("fork_t")
    settled = np.nan
    bounds = zip(rows["fork_t"], rows["dependence_low"], rows["dependence_high"], strict=True)
    for t, low, high in bounds:
        within = fork_verdict(low, high, band) == "within band"
        settled = (t if np.isnan(settled) else settled) if within else np.nan
    return float(settled)
