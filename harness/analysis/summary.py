"""One row per condition (model, item, policy): alpha, adherence and token cost -> summary.csv.

alpha comes from the pooled rows (pair = "all", metric = rel_l2) of `fits.csv`; a condition
probed with a single pair has no pooled row, so its one pair row is used instead.

alpha_mean is the mean over hidden-state indices 1..L of the layers' alphas (NaN layers are
skipped). fits.csv stores no bootstrap draws, so its CI is propagated, not re-bootstrapped:
alpha_mean_low/high = the mean of the layers' alpha_low/alpha_high. That is the exact percentile
interval of the mean when the layers' bootstrap errors are perfectly correlated (they share
the resampled pairs, so they are strongly correlated) and wider than the truth otherwise, i.e.
conservative. Re-fitting from divergence.csv would re-derive what the probe stage stored.

Adherence metrics (AUC and half-life with CIs, final, Kaplan-Meier median) are those of
`harness.scoring.adherence` (docs/architecture.md, "Adherence"); this module only joins them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from harness import results
from harness.scoring.adherence import GateLevels, adherence_summary, summary_frame
from harness.scoring.passes import window_passes
from harness.stats import DEFAULT_LEVEL

CONDITION = list(results.CONDITION)
POOLED = "all"
ALPHA_METRIC = "rel_l2"
TOKEN_KINDS = ("generated", "injected", "restated")
RELIABILITY = ("pass_1", "pass_3", "pass_5", "aptitude", "unreliability")
ALPHA = ["alpha", "alpha_low", "alpha_high"]  # fits.csv's alpha and its interval
# each interval with its n (the samples it rests on) and its method (harness.stats)
BEHAVIOUR_COLUMNS = [
    "n",
    "auc", "auc_low", "auc_high", "auc_n", "auc_method", "auc_lcb", "auc_ucb",
    "auc_passes",
    "half_life", "half_life_low", "half_life_high", "half_life_n", "half_life_method",
    "half_life_censored",
    "final", "final_low", "final_high", "final_n", "final_method", "final_lcb", "final_ucb",
    "final_passes", "holm_bounds",
    *(f"{m}{part}" for m in RELIABILITY for part in ("", "_low", "_high", "_n", "_method")),
    "survival_median", "survival_median_low", "survival_median_high", "survival_median_n",
    "survival_median_method", "survival_censored_share",
    "auc_corrected", "auc_corrected_low", "auc_corrected_high", "auc_corrected_n",
    "auc_corrected_method", "undecided_window_share",
]  # fmt: skip
ALPHA_UNITS = ["alpha_mean_n", "alpha_mean_method"]  # fits.csv's n and method, per condition
TEXT_COLUMNS = ["alpha_mean_method", "holm_bounds"] + [
    c for c in BEHAVIOUR_COLUMNS if c.endswith("_method")
]
COUNT_COLUMNS = ["n", "alpha_mean_n"] + [c for c in BEHAVIOUR_COLUMNS if c.endswith("_n")]
TOKEN_COLUMNS = ["tokens_generated", "tokens_injected", "tokens_restated", "token_overhead"]


def alpha_columns(layers: Sequence[int]) -> list[str]:
    cols = ["alpha_mean", "alpha_mean_low", "alpha_mean_high", *ALPHA_UNITS]
    for k in layers:
        cols += [f"alpha_L{k}", f"alpha_L{k}_low", f"alpha_L{k}_high"]
    return cols


def summary_columns(layers: Sequence[int]) -> list[str]:
    """SummaryRow's columns with the alpha_L<k> columns of `layers`."""
    return results.frame_columns(results.SummaryRow, alpha_columns(layers)[3 + len(ALPHA_UNITS) :])


# ---------------------------------------------------------------------------- shared inputs
def scoring_rows(windows: pd.DataFrame) -> pd.DataFrame:
    """windows.csv rows in the shape `harness.scoring.adherence` reads.

    Keeps only the per-window all-checks rows (check = "all") when windows.csv has them (a
    window passes when every check that decided passed), else every check row. Fills in the
    columns the scoring stage adds but the schema does not promise (task, run_id, scope).
    """
    w = windows.copy()
    for col, default in (("task", ""), ("run_id", ""), ("seed", 0)):
        if col not in w.columns:
            w[col] = default
    has_all = "check" in w.columns and bool((w["check"] == "all").any())
    if has_all:
        w = w[w["check"] == "all"].copy()
    if has_all or "scope" not in w.columns:
        w["scope"] = np.where(w["window"] >= 0, "window", "response")
    return w


def window_verdicts(windows: pd.DataFrame) -> pd.DataFrame:
    """One row per (condition, sample, window) that some check could decide: model, task,
    item, policy, run_id, seed, sample, window, t_start, t_end, passed (bool)."""
    return window_passes(scoring_rows(windows))


def token_frame(records: Iterable) -> pd.DataFrame:
    """Per-sample token counts from GenerationRecord objects (or their dicts): model, item,
    policy, seed, sample, history (`generated` unless replayed or logged), generated, injected,
    restated. The `generations_tokens` input."""
    rows = []
    for rec in records:
        rec = rec if isinstance(rec, dict) else rec.model_dump()
        tokens = rec.get("tokens") or {}
        row = {k: rec.get(k) for k in (*CONDITION, "seed", "sample")}
        row["history"] = rec.get("history") or "generated"  # a replay's sums stay apart
        row.update({k: int(tokens.get(k, 0) or 0) for k in TOKEN_KINDS})
        rows.append(row)
    return pd.DataFrame(rows, columns=[*CONDITION, "seed", "sample", "history", *TOKEN_KINDS])


def tokens_by_condition(tokens: pd.DataFrame) -> pd.DataFrame:
    """Summed token counts per condition (columns TOKEN_COLUMNS): overhead is the ratio of the
    sums, (injected + restated) / generated, NaN when nothing was generated."""
    t = tokens.rename(columns={f"tokens_{k}": k for k in TOKEN_KINDS})
    for k in TOKEN_KINDS:
        if k not in t.columns:
            t[k] = 0
    sums = t.groupby(CONDITION, sort=True)[list(TOKEN_KINDS)].sum().reset_index()
    sums = sums.rename(columns={k: f"tokens_{k}" for k in TOKEN_KINDS})
    with np.errstate(divide="ignore", invalid="ignore"):
        extra = sums["tokens_injected"] + sums["tokens_restated"]
        gen = sums["tokens_generated"].astype(float)
        sums["token_overhead"] = np.where(gen > 0, extra / gen.where(gen > 0, 1.0), math.nan)
    return sums


# ---------------------------------------------------------------------------- alpha
def _alpha_rows(fits: pd.DataFrame) -> pd.DataFrame:
    """rel_l2 alpha per (condition, layer): the pooled row, or the only pair's row."""
    cols = [*CONDITION, "layer", *ALPHA, "n", "method"]
    if fits is None or fits.empty:
        return pd.DataFrame(columns=cols)
    fits = fits.reindex(columns=[*fits.columns, *({"n", "method"} - set(fits.columns))])
    f = fits[(fits["metric"] == ALPHA_METRIC) & (fits["layer"] >= 1)]
    if "lam" in f.columns:  # attention-bias sweeps are not conditions of a run
        f = f[f["lam"].isna()]
    f = f[f["item"].astype(str) != POOLED]  # rows pooled over a whole model are no condition
    pooled = f[f["pair"].astype(str) == POOLED]
    single = f[f["pair"].astype(str) != POOLED]
    n_pairs = single.groupby(CONDITION)["pair"].transform("nunique")
    single = single[n_pairs == 1]
    have = pooled.set_index(CONDITION).index.unique()
    single = single[~single.set_index(CONDITION).index.isin(have)]
    out = pd.concat([pooled, single], ignore_index=True)[cols]
    return out.astype(dict.fromkeys(ALPHA, float))


def default_layers(fits: pd.DataFrame) -> list[int]:
    """Middle and last hidden-state index of the deepest model in fits.csv."""
    rows = _alpha_rows(fits)
    if rows.empty:
        return []
    top = int(rows["layer"].max())
    return sorted({max(1, top // 2), top})


def _alpha_table(fits: pd.DataFrame, layers: Sequence[int]) -> pd.DataFrame:
    rows = _alpha_rows(fits)
    cols = [*CONDITION, *alpha_columns(layers)]
    if rows.empty:
        return pd.DataFrame(columns=cols)
    with np.errstate(all="ignore"):
        mean = rows.groupby(CONDITION, sort=True)[ALPHA].mean()
    mean.columns = ["alpha_mean", "alpha_mean_low", "alpha_mean_high"]
    grouped = rows.groupby(CONDITION, sort=True)
    # the layers of one condition share their pairs, so one n and one method hold for all
    table = mean.join(grouped["n"].max().rename("alpha_mean_n"))
    table = table.join(grouped["method"].first().rename("alpha_mean_method"))
    for k in layers:
        at = rows[rows["layer"] == k].set_index(CONDITION)[ALPHA]
        at.columns = [f"alpha_L{k}", f"alpha_L{k}_low", f"alpha_L{k}_high"]
        table = table.join(at, how="left")
    return table.reset_index().reindex(columns=cols)


# ---------------------------------------------------------------------------- behaviour
def _behaviour_table(
    windows: pd.DataFrame, level: float, anytime: bool, horizon: float | None, rates=None,
    gate_level: GateLevels | None = None,
) -> pd.DataFrame:  # fmt: skip
    cols = [*CONDITION, *BEHAVIOUR_COLUMNS]
    if windows is None or windows.empty:
        return pd.DataFrame(columns=cols)
    w = scoring_rows(windows)
    frame = summary_frame(
        adherence_summary(
            w, level=level, anytime=anytime, horizon=horizon, rates=rates, gate_level=gate_level
        )
    )
    if frame.empty:
        return pd.DataFrame(columns=cols)
    frame = frame.rename(columns={"n_samples": "n"})  # the samples every interval rests on
    n = (frame["failures"] + frame["censored"]).astype(float)
    frame["survival_censored_share"] = frame["censored"] / n.where(n > 0, math.nan)
    # Items are unique across suites, so dropping `task` merges nothing.
    return frame[cols]


def summarise_conditions(
    fits: pd.DataFrame | None,
    windows: pd.DataFrame | None,
    generations_tokens: pd.DataFrame | None,
    layers: Sequence[int] | None = None,
    *,
    level: float = DEFAULT_LEVEL,
    anytime: bool = False,
    horizon: float | None = None,
    rates: dict | None = None,
    gate_level: GateLevels | None = None,
) -> pd.DataFrame:
    """summary.csv: one row per condition seen in any input, columns `summary_columns(layers)`.
    horizon: the fixed t-range [1, T] of the per-sample values (the run's max_tokens).
    anytime: intervals valid at every look of a sequential run (harness.units.sequential).
    rates: the checks' measured error by check id, for the corrected AUC.
    gate_level: the level of the one-sided bounds the gates read (None: level).

    layers: hidden-state indices reported as alpha_L<k> (default: middle and last). A condition
    with no divergence (probe off, or the untrained twin which generates nothing) keeps NaN in
    the columns it lacks. anytime: the adherence intervals are confidence sequences.
    """
    fits = fits if fits is not None else pd.DataFrame()
    layers = list(default_layers(fits) if layers is None else layers)
    tables = [
        _alpha_table(fits, layers),
        _behaviour_table(windows, level, anytime, horizon, rates, gate_level),
        tokens_by_condition(generations_tokens)
        if generations_tokens is not None and not generations_tokens.empty
        else pd.DataFrame(columns=[*CONDITION, *TOKEN_COLUMNS]),
    ]
    keys = pd.concat([t[CONDITION] for t in tables], ignore_index=True).drop_duplicates()
    out = keys.astype(str).sort_values(CONDITION).reset_index(drop=True)
    for t in tables:
        out = out.merge(t.astype({c: str for c in CONDITION}), on=CONDITION, how="left")
    out = out.reindex(columns=summary_columns(layers))
    if not out.empty:
        counts = TOKEN_COLUMNS[:-1] + COUNT_COLUMNS
        kept = (*CONDITION, "half_life_censored", *TEXT_COLUMNS, *counts)
        floats = [c for c in out.columns if c not in kept]
        out = out.astype({**{c: float for c in floats}, **{c: "Int64" for c in counts}})
    return results.result_frame(results.SummaryRow, out)
