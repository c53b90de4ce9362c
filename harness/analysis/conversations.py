"""Adherence over the turns of a conversation, from `turns.csv` (docs/architecture.md,
"Estimators: conversations").

Per condition (model, task, item, policy): a turn passes when every check that could decide
passed (a turn where none decided is left out); a(k) = share of samples whose reply k passes;
survival over turns = Kaplan-Meier of the first failing turn (censored at the last scored
turn); pressure effect = adherence on the replies from the first pressure turn on minus on
the replies before it. CIs: percentile bootstrap over samples (1000 draws, seed 0).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd

from harness import results
from harness.results import ConversationRow, TurnAdherenceRow

# pandas groups by lists: a tuple would be one key
TASK_CONDITION = list(results.TASK_CONDITION)
SAMPLE = list(results.SAMPLE)
N_BOOT = 1000


def turn_verdicts(turns: pd.DataFrame) -> pd.DataFrame:
    """One row per (condition, sample, turn) that some check decided: pressure, passed."""
    t = turns[turns["passed"].notna() & (turns["passed"].astype(str) != "")].copy()
    t["passed"] = t["passed"].map(lambda v: v is True or str(v).lower() == "true")
    t["pressure"] = t["pressure"].map(lambda v: v is True or str(v).lower() == "true")
    grouped = t.groupby([*TASK_CONDITION, *SAMPLE, "turn"], sort=True)
    return grouped.agg(pressure=("pressure", "first"), passed=("passed", "all")).reset_index()


def _matrix(cond: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(turns (K,), (S, K) of 1/0/NaN: sample s's reply k passed)."""
    turns = np.sort(cond["turn"].unique())
    samples = list(cond.groupby(SAMPLE, sort=True))
    matrix = np.full((len(samples), len(turns)), np.nan)
    col = {k: i for i, k in enumerate(turns)}
    for s, (_, rows) in enumerate(samples):
        for k, ok in rows[["turn", "passed"]].itertuples(index=False):
            matrix[s, col[k]] = float(ok)
    return turns, matrix


def _nanmean(x: np.ndarray, axis) -> np.ndarray:
    with warnings.catch_warnings(), np.errstate(invalid="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmean(x, axis=axis)


def _survival(matrix: np.ndarray) -> np.ndarray:
    """Kaplan-Meier S(k) per turn column of a (..., S, K) stack of matrices: event = the
    first failing reply, censored after the last scored reply. Returns (..., K)."""
    k_all = matrix.shape[-1]
    fail = np.nan_to_num(1.0 - matrix, nan=0.0) > 0  # (..., S, K)
    scored = ~np.isnan(matrix)
    first = np.where(fail.any(axis=-1), fail.argmax(axis=-1), k_all)  # (..., S)
    last_rev = scored[..., ::-1].argmax(axis=-1)
    last = np.where(scored.any(axis=-1), k_all - 1 - last_rev, -1)
    out = np.empty(matrix.shape[:-2] + (k_all,))
    s = np.ones(matrix.shape[:-2])
    for k in range(k_all):
        at_risk = np.sum((first >= k) & (last >= k), axis=-1)
        events = np.sum(first == k, axis=-1)
        s = s * np.where(at_risk > 0, 1.0 - events / np.maximum(at_risk, 1), 1.0)
        out[..., k] = s
    return out


def _draws(matrix: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return rng.integers(0, matrix.shape[0], size=(N_BOOT, matrix.shape[0]))  # (B, S)


def _band(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanpercentile(values, 2.5, axis=0), np.nanpercentile(values, 97.5, axis=0)


def turn_curves(turns: pd.DataFrame) -> pd.DataFrame:
    """a(k) and S(k) with bootstrap bands per condition and turn (turn_adherence.csv)."""
    verdicts = turn_verdicts(turns)
    rows = []
    for key, cond in verdicts.groupby(TASK_CONDITION, sort=True):
        ks, matrix = _matrix(cond)
        picks = _draws(matrix, np.random.default_rng(0))
        a_draws = _nanmean(matrix[picks], axis=1)  # (B, K)
        s_draws = _survival(matrix[picks])  # (B, K)
        a_low, a_high = _band(a_draws)
        s_low, s_high = _band(s_draws)
        a, surv = _nanmean(matrix, axis=0), _survival(matrix)
        pressure = cond.groupby("turn")["pressure"].first()
        for i, k in enumerate(ks):
            n = int(np.sum(~np.isnan(matrix[:, i])))
            rows.append(
                [*key, int(k), bool(pressure[k]), a[i], a_low[i], a_high[i], n, surv[i]]
                + [s_low[i], s_high[i]]
            )
    frame = pd.DataFrame(rows, columns=TurnAdherenceRow.columns())
    return results.result_frame(TurnAdherenceRow, frame)


def _pressure_split(ks: np.ndarray, matrix: np.ndarray, first: float):
    """(before, after) adherence over samples x replies around the first pressure turn, for
    a (..., S, K) stack; NaN without a pressure turn."""
    shape = matrix.shape[:-2]
    if math.isnan(first) or not (ks < first).any() or not (ks >= first).any():
        return np.full(shape, np.nan), np.full(shape, np.nan)
    before, after = matrix[..., ks < first], matrix[..., ks >= first]
    return _nanmean(before, axis=(-2, -1)), _nanmean(after, axis=(-2, -1))


def _condition_row(
    key, cond: pd.DataFrame, tokens: dict, pressure_turn: float
) -> tuple[dict, np.ndarray]:
    """One conversations.csv row, and its pressure-delta bootstrap draws (for pooling)."""
    ks, matrix = _matrix(cond)
    picks = _draws(matrix, np.random.default_rng(0))
    a = _nanmean(matrix, axis=0)
    mean_draws = _nanmean(_nanmean(matrix[picks], axis=1), axis=1)  # (B,)
    first = pressure_turn
    before, after = (float(x) for x in _pressure_split(ks, matrix, first))
    draws_before, draws_after = _pressure_split(ks, matrix[picks], first)
    delta_draws = draws_after - draws_before  # (B,)
    surv = _survival(matrix)
    below = np.nonzero(surv <= 0.5)[0]
    generated, injected = tokens.get(tuple(key), (0, 0))
    row = dict(zip(TASK_CONDITION, key, strict=True)) | {
        "n_samples": matrix.shape[0],
        "n_turns": int(ks.max()),
        "a_first": a[0],
        "a_last": a[-1],
        "mean": float(_nanmean(a, axis=0)),
        "mean_low": _band(mean_draws)[0],
        "mean_high": _band(mean_draws)[1],
        "first_fail_median": float(ks[below[0]]) if below.size else math.inf,
        "pressure_turn": first,
        "before": before,
        "after": after,
        "pressure_delta": after - before,
        "pressure_delta_low": _band(delta_draws)[0],
        "pressure_delta_high": _band(delta_draws)[1],
        "tokens_generated": generated,
        "tokens_injected": injected,
        "token_overhead": injected / generated if generated else math.nan,
    }
    return row, delta_draws


def conversation_summary(turns: pd.DataFrame, tokens: pd.DataFrame) -> pd.DataFrame:
    """conversations.csv: one row per condition, then per (model, policy) a pooled row (task =
    item = `all`) over the items with a pressure turn: before/after/delta averaged over
    items, draws averaged per draw index (stratified by item)."""
    verdicts = turn_verdicts(turns)
    # the first pressure turn from every row: its reply may be undetermined and left out
    flags = turns[turns["pressure"].map(lambda v: v is True or str(v).lower() == "true")]
    first_pressure = flags.groupby(TASK_CONDITION)["turn"].min().to_dict()
    sums = {}
    if not tokens.empty:
        tk = tokens.groupby(["model", "item", "policy"])[["generated", "injected"]].sum()
        sums = {k: (int(v["generated"]), int(v["injected"])) for k, v in tk.iterrows()}
    rows, pooled = [], {}
    for key, cond in verdicts.groupby(TASK_CONDITION, sort=True):
        model, _task, item, policy = key
        token_sums = {tuple(key): sums.get((model, item, policy), (0, 0))}
        pressure = float(first_pressure.get(tuple(key), math.nan))
        row, draws = _condition_row(key, cond, token_sums, pressure)
        rows.append(row)
        if not math.isnan(row["pressure_turn"]):
            pooled.setdefault((model, policy), []).append((row, draws))
    for (model, policy), parts in sorted(pooled.items()):
        draws = _nanmean(np.stack([d for _, d in parts]), axis=0)
        low, high = _band(draws)
        mean = {c: float(np.nanmean([r[c] for r, _ in parts])) for c in ("before", "after")}
        rows.append(
            {"model": model, "task": "all", "item": "all", "policy": policy}
            | {"n_samples": sum(r["n_samples"] for r, _ in parts), **mean}
            | {"pressure_delta": mean["after"] - mean["before"]}
            | {"pressure_delta_low": low, "pressure_delta_high": high}
        )
    frame = pd.DataFrame(rows, columns=ConversationRow.columns())
    return results.result_frame(ConversationRow, frame)
