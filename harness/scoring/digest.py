"""The digest of a set of scored windows that the adherence files are computed from
(`harness.scoring.io.adherence_frames`): a chat log's windows are scored a chunk at a time,
and each chunk leaves its digest, not its rows (issue 31: memory flat in the conversations).
A chunk's digest keeps, per condition, what is per sample (AUC, final, survival) and a(t)'s
counts on a dense grid of t; its passes go to a spill file, read back once the log's last t
(hence the half-life's checkpoints) is known.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

import numpy as np
import pandas as pd

from harness.results import WindowRow, result_frame
from harness.scoring.adherence import (
    RUN_SAMPLE,
    TASK_CONDITION,
    ConditionValues,
    checkpoints,
    sample_values,
)
from harness.scoring.corrected import window_abstentions
from harness.scoring.passes import generated_clock, pass_counts, pass_matrix, window_passes
from harness.scoring.spill import key_groups
from harness.scoring.survival import first_failures


@dataclass
class WindowDigest:
    """What the adherence files read of a set of windows: their `window_passes` and, per
    condition, `corrected.window_abstentions`; or, for a chat log's chunks merged
    (`merge_chunk_digests`), no passes but each condition's `ConditionValues` and a(t)'s
    (t, passes k, samples n), in key order (fixed-sample intervals, each sample's own span:
    what a log's analysis reads)."""

    passes: pd.DataFrame | None
    abstain: pd.DataFrame
    conditions: dict[tuple, ConditionValues] | None = None
    counts: dict[tuple, tuple] | None = None


def window_digest(windows: pd.DataFrame) -> WindowDigest:
    return WindowDigest(window_passes(windows), window_abstentions(windows))


@dataclass
class ChunkCondition:
    """One condition's windows in one chunk of a log: per sample (in `pass_matrix`'s order)
    AUC, final (`sample_values`, each sample's own span), duration and event
    (`first_failures`); the window starts seen; a(t)'s passes k and samples n at every t of
    0..its last t_end; its passes spilled to `parts` (one file per chunk gathered, in sample
    order) for the half-life, on the generated-token clock (`generated_clock`), and `top` its
    last g_end, where the half-life's checkpoints end."""

    auc: np.ndarray
    final: np.ndarray
    durations: np.ndarray
    events: np.ndarray
    first: tuple  # its first and last samples' RUN_SAMPLE keys: the order of the chunks
    last: tuple
    starts: np.ndarray
    k: np.ndarray
    n: np.ndarray
    top: float
    parts: list[Path]


@dataclass
class ChunkDigest:
    conditions: dict[tuple, ChunkCondition]
    abstain: pd.DataFrame


PASS_COLUMNS = ["t_start", "t_end", "passed"]  # what `_pass_codes` reads besides the sample


def chunk_digest(windows: pd.DataFrame, spill: Path, name: str) -> ChunkDigest:
    """The digest of one chunk of a log's windows (no sample spans two chunks); its passes
    are written under `spill` as `passes.<name>.<n>.npz`, removed by `merge_chunk_digests`."""
    passes = window_passes(windows)
    conditions = {}
    for index, (key, cond) in enumerate(key_groups(passes, TASK_CONDITION)):
        auc, final = sample_values(cond, None)
        failures = first_failures(generated_clock(cond))  # on AUC's clock
        top = cond["t_end"].max()
        # a cell of the codes depends on its t alone: counted at every integer t, the counts
        # at the log's window starts are those of its whole grid (t are token positions)
        _, k, n = pass_counts(cond, np.arange(int(top) + 1))
        part = Path(spill) / f"passes.{name}.{index}.npz"
        part.parent.mkdir(parents=True, exist_ok=True)
        sample = cond.groupby(RUN_SAMPLE, sort=True).ngroup().to_numpy(np.int32)
        # the half-life's passes, on the generated-token clock as AUC's
        on_generated = generated_clock(cond)
        np.savez(part, sample=sample, **{c: on_generated[c].to_numpy() for c in PASS_COLUMNS})
        ends = cond[RUN_SAMPLE].iloc[[0, -1]].itertuples(index=False, name=None)
        conditions[tuple(key)] = ChunkCondition(
            auc, final, failures["duration"].to_numpy(float), failures["event"].to_numpy(bool),
            *ends, np.unique(cond["t_start"].to_numpy()), k, n, float(cond["g_end"].max()),
            [part],
        )  # fmt: skip
    return ChunkDigest(conditions, window_abstentions(windows))


def _spilled_passes(part: Path) -> pd.DataFrame:
    """A chunk condition's passes as `pass_matrix` reads them (samples by their number)."""
    with np.load(part) as saved:
        frame = pd.DataFrame({c: saved[c] for c in ["sample", *PASS_COLUMNS]})
    part.unlink()
    return frame.assign(run_id="", seed=0)


def gather_chunk_digests(parts: list[ChunkDigest]) -> ChunkDigest:
    """Chunks' digests as one digest of their windows together, spill files still unread (a
    log's are folded so as they come: what is kept per chunk does not pile up): per
    condition the samples' values concatenated in chunk order (the samples' order: a log's
    are numbered in file order), a(t)'s counts summed, window starts united."""
    conditions = {}
    for key in sorted({key for part in parts for key in part.conditions}):
        chunks = [part.conditions[key] for part in parts if key in part.conditions]
        if any(after.first <= before.last for before, after in pairwise(chunks)):
            raise ValueError(f"{key}: a chunk's samples come before an earlier chunk's")
        size = max(len(c.k) for c in chunks)
        k, n = np.zeros(size), np.zeros(size, dtype=np.int64)
        for chunk in chunks:
            k[: len(chunk.k)] += chunk.k  # sums of whole numbers: exact in any order
            n[: len(chunk.n)] += chunk.n
        values = [np.concatenate([getattr(c, f) for c in chunks]) for f in _PER_SAMPLE]
        starts = np.unique(np.concatenate([c.starts for c in chunks]))
        top = max(c.top for c in chunks)
        spilled = [path for c in chunks for path in c.parts]
        ends = (chunks[0].first, chunks[-1].last)
        conditions[key] = ChunkCondition(*values, *ends, starts, k, n, top, spilled)
    return ChunkDigest(conditions, _merged_abstentions([p.abstain for p in parts]))


def merge_chunk_digests(parts: list[ChunkDigest]) -> WindowDigest:
    """The digest of a log's chunks together (`gather_chunk_digests`), their spill files read
    (and removed): per condition a(t)'s counts at the window starts seen, and a(t) at the
    half-life's checkpoints of the condition's last g_end (generated tokens)."""
    whole = gather_chunk_digests(parts)
    conditions, counts = {}, {}
    for key, chunk in whole.conditions.items():
        at = chunk.starts.astype(np.int64)
        counts[key] = (chunk.starts, chunk.k[at], chunk.n[at])
        points = checkpoints(chunk.top)
        at_points = [pass_matrix(_spilled_passes(path), points)[1] for path in chunk.parts]
        values = [getattr(chunk, f) for f in _PER_SAMPLE]
        conditions[key] = ConditionValues(
            *values, points, np.concatenate(at_points), len(chunk.starts)
        )
    return WindowDigest(None, whole.abstain, conditions, counts)


_PER_SAMPLE = ("auc", "final", "durations", "events")


def _merged_abstentions(abstains: list[pd.DataFrame]) -> pd.DataFrame:
    """The chunks' `window_abstentions` together: counts summed and deciding checks united
    per condition."""
    abstains = [a for a in abstains if not a.empty]
    if not abstains:
        abstains = [window_abstentions(result_frame(WindowRow, []))]
    counts = pd.concat([a[["windows", "undecided"]] for a in abstains])
    counts = counts.groupby(level=TASK_CONDITION, sort=True).sum()
    deciders: dict = {}
    for abstain in abstains:
        for key, found in abstain["deciders"].items():
            if isinstance(found, set):
                deciders.setdefault(key, set()).update(found)
    # a condition no check decided in: NaN, as window_abstentions' left join leaves it
    counts["deciders"] = pd.Series(
        [deciders.get(key, math.nan) for key in counts.index], index=counts.index, dtype=object
    )
    return counts
