"""Adherence over the turns of a conversation, from `turns.csv` (docs/architecture.md,
"Estimators: conversations").

Per condition (model, task, item, policy): a reply's all-rules verdict is
`harness.scoring.all_rules`' (the one definition the window AUC shares; an undecided reply is
left out); a(k) = share of samples whose reply k passes;
survival over turns = Kaplan-Meier of the first failing turn (censored at the last scored
turn); pressure effect = adherence on the replies from the first pressure turn on minus on
the replies before it. Intervals (harness.stats), the sample (one conversation) being the unit:
a(k) pointwise exact binomial; S(k) and the first failing turn's median from exact binomial
bounds on the share failed by turn k (`harness.scoring.survival.survival_median_interval`);
mean adherence the bounded-mean interval of the per-sample means; the pressure change the
paired interval of each sample's after - before. The pooled pressure row averages the items'
intervals at level 1 - alpha/I (Bonferroni over its I items).

A condition here is also split by turns.csv's `history` (docs/architecture.md, "Replay"):
a replay's logged, reference-history and own-history replies are never pooled. Under the
reference history every record is one replayed turn (its own unit), so there is no survival
over turns and no first failing turn (NaN, the method says why).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd

from harness import results
from harness.analysis.turn_verdicts import CONDITION_HISTORY, TurnDigest
from harness.analysis.turn_verdicts import TurnMatrix as TurnMatrix
from harness.analysis.turn_verdicts import merge_turn_digests as merge_turn_digests
from harness.analysis.turn_verdicts import turn_digest as turn_digest
from harness.analysis.turn_verdicts import turn_verdicts as turn_verdicts
from harness.results import ConversationRow, TurnAdherenceRow
from harness.scoring.corrected import CheckRates, corrected_bounds, deciding_rates, sampling_level
from harness.scoring.survival import survival_median_interval
from harness.stats import (
    DEFAULT_LEVEL,
    Interval,
    binomial_interval,
    mean_interval,
    none_interval,
    paired_interval,
)

# the verdicts' layout (turns, samples, the digest a chat log merges): harness.analysis.
# turn_verdicts; re-exported here, where the stages have always imported it from
REFERENCE = "reference"
NO_SURVIVAL = "none (reference history: each turn is replayed alone)"
NO_VERDICT = "none (no reply of this turn has a verdict: see undecided)"


def _corrected_turns(a, n, passed, deciders: set, rates, level: float):
    """a(k) corrected for the deciding check (harness.scoring.corrected): (estimate, low,
    high, method) per turn."""
    check_rates, why = deciding_rates(deciders, rates)
    if check_rates is None:
        nan = np.full(len(a), np.nan)
        return nan, nan, nan, f"none ({why})"
    low, high = binomial_interval(passed, n, level=sampling_level(level))
    return corrected_bounds(a, low, high, check_rates, level)


def _nanmean(x: np.ndarray, axis) -> np.ndarray:
    """np.nanmean, NaN where every value is NaN without numpy's warning on stderr."""
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


def _first_failures(ks: np.ndarray, matrix: np.ndarray, replied: np.ndarray | None = None):
    """Per sample (S,): its first failing turn, else its last decided turn; whether it
    failed; and the first turn it may have failed (a reply with no verdict, or a turn with no
    reply, before that turn is missing evidence, never a pass; else the same turn). Samples
    with no decided reply are left out. replied: `TurnMatrix.replied` (None: every NaN is
    no reply)."""
    fail = np.nan_to_num(1.0 - matrix, nan=0.0) > 0
    scored = ~np.isnan(matrix)
    keep = scored.any(axis=1)
    last = len(ks) - 1 - scored[:, ::-1].argmax(axis=1)
    event = fail.any(axis=1)
    at = np.where(event, fail.argmax(axis=1), last)
    # no verdict, or no reply at all, before the sample's last reply: either may hide a failure
    unknown = fail
    if replied is not None:
        last_reply = replied.shape[1] - 1 - replied[:, ::-1].argmax(axis=1)
        before = np.arange(replied.shape[1])[None, :] <= last_reply[:, None]
        unknown = fail | (~scored & before & replied.any(axis=1)[:, None])
    maybe = np.where(unknown.any(axis=1), unknown.argmax(axis=1), at)
    earliest = ks[np.minimum(maybe, at)][keep].astype(float)
    return ks[at][keep].astype(float), event[keep], earliest


def turn_curves(
    turns: pd.DataFrame | TurnDigest,
    *,
    level: float = DEFAULT_LEVEL,
    rates: dict[str, CheckRates] | None = None,
) -> pd.DataFrame:
    """a(k) and S(k) with pointwise intervals per condition, history and turn
    (turn_adherence.csv), the replies no check decided, and a(k) corrected for the deciding
    check where `rates` (by check id) has it. `turns`: the rows, or their `TurnDigest`."""
    digest = turns if isinstance(turns, TurnDigest) else turn_digest(turns)
    verdicts, abstain, deciders = digest.verdicts, digest.abstain, digest.deciders
    rows = []
    for key, verdict in verdicts.items():
        ks, matrix = verdict.ks, verdict.matrix
        n = (~np.isnan(matrix)).sum(axis=0)
        a_lo, a_hi = binomial_interval(np.nansum(matrix, axis=0), n, level=level)
        durations, events, earliest = _first_failures(ks, matrix, verdict.replied)
        surely = ((durations[None, :] <= ks[:, None]) & events[None, :]).sum(axis=1)
        # censored before k, or a reply with no verdict by k: may have failed by k
        maybe = (earliest[None, :] <= ks[:, None]).sum(axis=1)
        total = np.full(len(ks), len(durations))
        s_lo = 1 - binomial_interval(maybe, total, level=level)[1]
        s_hi = 1 - binomial_interval(surely, total, level=level)[0]
        a, surv = _nanmean(matrix, axis=0), _survival(matrix)
        # a turn no reply has a verdict on: no S(k) estimate (the band still says what it can)
        surv = np.where(n > 0, surv, np.nan)
        s_method = "binomial bounds (clopper-pearson)"
        if key[-1] == REFERENCE:
            surv, s_lo, s_hi = (np.full(len(ks), np.nan) for _ in range(3))
            s_method = NO_SURVIVAL
        pressure = verdict.pressure
        passed = np.nansum(matrix, axis=0)
        fixed = _corrected_turns(a, n, passed, deciders.get(key, set()), rates, level)
        for i, k in enumerate(ks):
            undecided = int(abstain.loc[(*key, k), "undecided"])
            a_method = "clopper-pearson" if n[i] else NO_VERDICT
            rows.append(
                [*key, int(k), bool(pressure[k]), a[i], a_lo[i], a_hi[i], int(n[i])]
                + [a_method, surv[i], s_lo[i], s_hi[i], s_method]
                + [undecided, undecided / (undecided + int(n[i]))]
                + [fixed[0][i], fixed[1][i], fixed[2][i], fixed[3]]
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


def _per_sample_split(ks: np.ndarray, matrix: np.ndarray, first: float):
    """Each sample's (before, after) adherence around the first pressure turn -> (S,), (S,)."""
    if math.isnan(first) or not (ks < first).any() or not (ks >= first).any():
        empty = np.full(matrix.shape[0], np.nan)
        return empty, empty
    return _nanmean(matrix[:, ks < first], axis=1), _nanmean(matrix[:, ks >= first], axis=1)


def _pressure_interval(ks, matrix, first: float, level: float) -> Interval:
    before_s, after_s = _per_sample_split(ks, matrix, first)
    if np.isnan(before_s).all():
        return none_interval(math.nan, 0, "no pressure turn with replies before and after")
    return paired_interval(after_s, before_s, level=level)


def _condition_row(
    key, verdict: TurnMatrix, tokens: dict, pressure_turn: float, level: float
) -> tuple[dict, tuple]:
    """One conversations.csv row, and what its pooled row needs (ks, matrix, first)."""
    ks, matrix = verdict.ks, verdict.matrix
    a = _nanmean(matrix, axis=0)
    first = pressure_turn
    before, after = (float(x) for x in _pressure_split(ks, matrix, first))
    mean = mean_interval(_nanmean(matrix, axis=1), level=level)
    durations, events, earliest = _first_failures(ks, matrix, verdict.replied)
    if key[-1] == REFERENCE:
        median = none_interval(math.nan, matrix.shape[0], NO_SURVIVAL)
    else:
        median = survival_median_interval(durations, events, level=level, earliest=earliest)
    delta = _pressure_interval(ks, matrix, first, level)
    generated, injected = tokens.get(tuple(key), (0, 0))
    row = dict(zip(CONDITION_HISTORY, key, strict=True)) | {
        "n_samples": matrix.shape[0],
        "n_turns": int(ks.max()),
        "a_first": a[0],
        "a_last": a[-1],
        **mean.row("mean"),
        "mean": float(_nanmean(a, axis=0)),  # the curve's mean (the samples' when complete)
        **median.row("first_fail_median"),
        "pressure_turn": first,
        "before": before,
        "after": after,
        **delta.row("pressure_delta"),
        "pressure_delta": after - before,
        "tokens_generated": generated,
        "tokens_injected": injected,
        "token_overhead": injected / generated if generated else math.nan,
    }
    return row, (ks, matrix, first)


def _pooled_delta(parts: list[tuple], level: float) -> Interval:
    """Mean of the items' pressure intervals, each at level 1 - alpha/I (Bonferroni)."""
    items = [_pressure_interval(*p, 1 - (1 - level) / len(parts)) for p in parts]
    return Interval(
        float(np.mean([c.estimate for c in items])),
        float(np.mean([c.low for c in items])),
        float(np.mean([c.high for c in items])),
        int(sum(c.n for c in items)),
        f"mean of item intervals ({items[0].method}; bonferroni over {len(items)} items)",
    )


def _token_sums(tokens: pd.DataFrame) -> dict[tuple, tuple[int, int]]:
    """(generated, injected) summed per (model, item, policy[, history])."""
    if tokens.empty:
        return {}
    keys = ["model", "item", "policy", *(["history"] if "history" in tokens.columns else [])]
    tk = tokens.groupby(keys)[["generated", "injected"]].sum()
    return {k: (int(v["generated"]), int(v["injected"])) for k, v in tk.iterrows()}


def conversation_summary(
    turns: pd.DataFrame | TurnDigest, tokens: pd.DataFrame, *, level: float = DEFAULT_LEVEL
) -> pd.DataFrame:
    """conversations.csv: one row per (condition, history), then per (model, policy, history)
    a pooled row (task = item = `all`) over the items with a pressure turn: before/after/delta
    averaged over items, the interval the mean of the items' (Bonferroni). `tokens`: per-sample
    counts (summary.token_frame, or sums of them), split by history where it has the column.
    `turns`: the rows, or their `TurnDigest`."""
    digest = turns if isinstance(turns, TurnDigest) else turn_digest(turns)
    verdicts, first_pressure = digest.verdicts, digest.first_pressure
    sums = _token_sums(tokens)
    abstain = digest.abstain.groupby(CONDITION_HISTORY, sort=True).sum()
    rows, pooled = [], {}
    for key, verdict in verdicts.items():
        model, _task, item, policy, history = key
        found = sums.get((model, item, policy, history), sums.get((model, item, policy)))
        token_sums = {tuple(key): found or (0, 0)}
        pressure = float(first_pressure.get(tuple(key), math.nan))
        row, part = _condition_row(key, verdict, token_sums, pressure, level)
        replies, undecided = (int(abstain.loc[key, c]) for c in ("replies", "undecided"))
        row |= {"undecided_turns": undecided, "undecided_turn_share": undecided / replies}
        rows.append(row)
        if not math.isnan(row["pressure_turn"]):
            pooled.setdefault((model, policy, history), []).append((row, part))
    for (model, policy, history), parts in sorted(pooled.items()):
        # an item whose pressure comes at turn 1 has no `before`: NaN when none has one
        mean = {
            c: float(_nanmean(np.array([r[c] for r, _ in parts]), axis=None))
            for c in ("before", "after")
        }
        delta = _pooled_delta([p for _, p in parts], level)
        rows.append(
            {"model": model, "task": "all", "item": "all", "policy": policy, "history": history}
            | {"n_samples": sum(r["n_samples"] for r, _ in parts), **mean}
            | delta.row("pressure_delta")
            | {"pressure_delta": mean["after"] - mean["before"]}
        )
    frame = pd.DataFrame(rows, columns=ConversationRow.columns())
    return results.result_frame(ConversationRow, frame)
