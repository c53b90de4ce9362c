"""A conversation's replies as all-rules verdicts (`harness.scoring.all_rules`), the layout
every figure over turns reads (`harness.analysis.conversations`: turn_adherence.csv,
conversations.csv): one verdict per (condition, history, sample, turn), the undecided
replies counted, and a `TurnDigest` of (samples x turns) matrices that a chat log's chunks
merge. A reply with no verdict stays in the matrix as NaN (its turn keeps its column); a
turn with no reply at all is NaN too, told apart by `TurnMatrix.replied`."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

import numpy as np
import pandas as pd

from harness import results
from harness.results import cells_are
from harness.scoring.all_rules import missing_verdicts, unit_verdict
from harness.scoring.spill import key_groups, sorted_runs

# pandas groups by lists: a tuple would be one key. Logged, replayed and generated replies of
# one condition are aggregated apart (`history`); a logged conversation is a sample of its own.
TASK_CONDITION = list(results.TASK_CONDITION)
CONDITION_HISTORY = [*TASK_CONDITION, "history"]
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
