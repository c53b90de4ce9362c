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
from dataclasses import dataclass
from itertools import pairwise

import numpy as np
import pandas as pd

from harness import results
from harness.results import ConversationRow, TurnAdherenceRow, cells_are
from harness.scoring.all_rules import missing_verdicts, unit_verdict
from harness.scoring.corrected import CheckRates, corrected_bounds, deciding_rates, sampling_level
from harness.scoring.spill import key_groups, sorted_runs
from harness.scoring.survival import survival_median_interval
from harness.stats import (
    DEFAULT_LEVEL,
    Interval,
    binomial_interval,
    mean_interval,
    none_interval,
    paired_interval,
)

# pandas groups by lists: a tuple would be one key. Logged, replayed and generated replies of
# one condition are aggregated apart (`history`); a logged conversation is a sample of its own.
TASK_CONDITION = list(results.TASK_CONDITION)
CONDITION_HISTORY = [*TASK_CONDITION, "history"]
REFERENCE = "reference"
NO_SURVIVAL = "none (reference history: each turn is replayed alone)"
NO_VERDICT = "none (no reply of this turn has a verdict: see undecided)"
SAMPLE = [*results.SAMPLE, "conversation_id"]


def _labelled(turns: pd.DataFrame) -> pd.DataFrame:
    """turns with `history` and `conversation_id` filled in (rows built without them: a run's
    own, generated conversations); groupby would drop rows with an empty key."""
    labels = {}
    for column, default in (("history", "generated"), ("conversation_id", "")):
        values = turns[column] if column in turns.columns else pd.Series(index=turns.index)
        labels[column] = values.where(values.notna() & (values != ""), default)
    return turns.assign(**labels)


def turn_verdicts(turns: pd.DataFrame, *, undecided: bool = False) -> pd.DataFrame:
    """One row per (condition, history, sample, turn) whose all-rules verdict was decided
    (`harness.scoring.all_rules`: a rule with no verdict is missing evidence): pressure,
    passed. undecided=True: every scored reply, `passed` NaN where it was not decided (the
    turns a(k) must show as NaN, never leave out or read as 0)."""
    turns = _labelled(turns)
    decided = turns["passed"].notna() & (turns["passed"].astype(str) != "")
    missing = missing_verdicts(turns)
    rows = np.ones(len(turns), bool) if undecided else decided.to_numpy() | missing
    t = turns[rows].copy()
    t["decided"] = decided[rows]
    t["missing"] = missing[rows]
    t["failed"] = cells_are(t["passed"], False)
    t["pressure"] = cells_are(t["pressure"], True)
    keys = [*CONDITION_HISTORY, *SAMPLE, "turn"]
    starts = sorted_runs(t, keys)
    if starts is not None:  # in key order (a chunk of a chat log): each reply a run of rows
        out = t.iloc[starts][keys].reset_index(drop=True)
        out["pressure"] = t["pressure"].to_numpy(bool)[starts]
        anyof = {c: np.logical_or.reduceat(t[c].to_numpy(bool), starts) for c in
                 ("failed", "decided", "missing")}  # fmt: skip
    else:
        grouped = t.groupby(keys, sort=True)
        out = grouped.agg(pressure=("pressure", "first")).reset_index()
        anyof = {c: grouped[c].any().to_numpy(bool) for c in ("failed", "decided", "missing")}
    passed, judged = unit_verdict(anyof["failed"], anyof["decided"], anyof["missing"])
    if undecided:
        out["passed"] = np.where(judged, passed, np.nan)
        return out
    out["passed"] = passed
    return out[judged].reset_index(drop=True)


def turn_abstentions(turns: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    """Per (condition, history, turn): replies (samples with that reply scored) and those whose
    all-rules verdict is undecided (no check decided, or a verdict is missing:
    `harness.scoring.all_rules`); and per (condition, history) the set of check ids that
    decided a reply."""
    turns = _labelled(turns)
    decided = turns["passed"].notna() & (turns["passed"].astype(str) != "")
    keys = [*CONDITION_HISTORY, *SAMPLE, "turn"]
    flags = (
        turns.assign(
            decided=decided,
            missing=missing_verdicts(turns),
            failed=cells_are(turns["passed"], False),
        )
        .groupby(keys, sort=True)[["failed", "decided", "missing"]]
        .any()
    )
    judged = unit_verdict(*(flags[c].to_numpy(bool) for c in ("failed", "decided", "missing")))[1]
    per_reply = pd.Series(judged, index=flags.index)
    counts = per_reply.groupby([*CONDITION_HISTORY, "turn"], sort=True).agg(["size", "sum"])
    counts = pd.DataFrame({"replies": counts["size"], "undecided": counts["size"] - counts["sum"]})
    checks = turns[decided].groupby(CONDITION_HISTORY, sort=True)["check"]
    return counts, {k: set(map(str, c)) for k, c in checks}


@dataclass
class TurnMatrix:
    """One (condition, history)'s verdicts as `_matrix` lays them out: its turns (K,), the
    (S, K) matrix of 1/0/NaN (samples in SAMPLE order; NaN: no reply, or no verdict on it),
    each turn's pressure flag (its first sample's), its first and last samples' keys (the
    order of a log's chunks), and the (S, K) mask of the replies there are (decided or not:
    where a NaN is missing evidence rather than no reply)."""

    ks: np.ndarray
    matrix: np.ndarray
    pressure: dict
    first: tuple
    last: tuple
    replied: np.ndarray


@dataclass
class TurnDigest:
    """What turn_adherence.csv and conversations.csv read of a set of turns rows: their
    `turn_verdicts` as a `TurnMatrix` per (condition, history) in key order,
    `turn_abstentions` (counts, deciding checks) and each condition's first pressure turn
    over every row. A chat log's turns are scored a chunk at a time and no conversation
    spans two chunks, so the chunks' digests merge (`merge_turn_digests`): a few floats per
    reply, never the verdict rows."""

    verdicts: dict[tuple, TurnMatrix]
    abstain: pd.DataFrame
    deciders: dict
    first_pressure: dict


def turn_digest(turns: pd.DataFrame) -> TurnDigest:
    turns = _labelled(turns)
    abstain, deciders = turn_abstentions(turns)
    # the first pressure turn from every row: its reply may be undetermined and left out
    flags = turns[cells_are(turns["pressure"], True)]
    first_pressure = flags.groupby(CONDITION_HISTORY)["turn"].min().to_dict()
    matrices = {}
    # every scored reply: a turn no sample has a verdict on keeps its column (NaN)
    for key, cond in key_groups(turn_verdicts(turns, undecided=True), CONDITION_HISTORY):
        ks, matrix, replied = _matrix(cond)
        pressure = cond.groupby("turn")["pressure"].first().to_dict()
        first, last = cond[SAMPLE].iloc[[0, -1]].itertuples(index=False, name=None)
        matrices[tuple(key)] = TurnMatrix(ks, matrix, pressure, first, last, replied)
    return TurnDigest(matrices, abstain, deciders, first_pressure)


def merge_turn_digests(parts: list[TurnDigest]) -> TurnDigest:
    """The digest of the chunks' turns together: each (condition, history)'s matrices stacked
    in chunk order (the samples' order: a log's are numbered in file order) over the turns of
    them all, counts summed, deciding checks united, first pressure turns the earliest."""
    if not parts:
        return turn_digest(results.result_frame(results.TurnRow, []))
    matrices = {}
    for key in sorted({key for part in parts for key in part.verdicts}):
        chunks = [part.verdicts[key] for part in parts if key in part.verdicts]
        if any(after.first <= before.last for before, after in pairwise(chunks)):
            raise ValueError(f"{key}: a chunk's samples come before an earlier chunk's")
        ks = np.unique(np.concatenate([c.ks for c in chunks]))
        matrix = np.full((sum(len(c.matrix) for c in chunks), len(ks)), np.nan)
        replied = np.zeros(matrix.shape, bool)
        pressure: dict = {}
        row = 0
        for chunk in chunks:
            rows, cols = slice(row, row + len(chunk.matrix)), np.searchsorted(ks, chunk.ks)
            matrix[rows, cols], replied[rows, cols] = chunk.matrix, chunk.replied
            row += len(chunk.matrix)
            for turn, flag in chunk.pressure.items():  # the first sample with that turn's
                pressure.setdefault(turn, flag)
        matrices[key] = TurnMatrix(ks, matrix, pressure, chunks[0].first, chunks[-1].last, replied)
    abstain = pd.concat([p.abstain for p in parts])
    abstain = abstain.groupby(level=list(range(abstain.index.nlevels)), sort=True).sum()
    deciders: dict = {}
    first_pressure: dict = {}
    for part in parts:
        for key, checks in part.deciders.items():
            deciders.setdefault(key, set()).update(checks)
        for key, turn in part.first_pressure.items():
            first_pressure[key] = min(turn, first_pressure.get(key, turn))
    return TurnDigest(matrices, abstain, deciders, first_pressure)


def _corrected_turns(a, n, passed, deciders: set, rates, level: float):
    """a(k) corrected for the deciding check (harness.scoring.corrected): (estimate, low,
    high, method) per turn."""
    check_rates, why = deciding_rates(deciders, rates)
    if check_rates is None:
        nan = np.full(len(a), np.nan)
        return nan, nan, nan, f"none ({why})"
    low, high = binomial_interval(passed, n, level=sampling_level(level))
    return corrected_bounds(a, low, high, check_rates, level)


def _matrix(cond: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(turns (K,), (S, K) of 1/0/NaN: sample s's reply k passed, (S, K): it has reply k)."""
    turns = np.sort(cond["turn"].unique())
    groups = cond.groupby(SAMPLE, sort=True)  # one row per (sample, turn) in `cond`
    matrix = np.full((groups.ngroups, len(turns)), np.nan)
    replied = np.zeros(matrix.shape, bool)
    rows, cols = groups.ngroup().to_numpy(), np.searchsorted(turns, cond["turn"].to_numpy())
    matrix[rows, cols] = cond["passed"].to_numpy(dtype=float)
    replied[rows, cols] = True
    return turns, matrix, replied


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
