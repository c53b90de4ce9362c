"""The digest of a set of scored windows that the adherence files are computed from
(`harness.scoring.io.adherence_frames`): a chat log's windows are scored a chunk at a time,
and each chunk leaves its digest, not its rows (issue 31: memory flat in the conversations).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from harness.results import WindowRow, result_frame
from harness.scoring.adherence import RUN_SAMPLE, TASK_CONDITION, window_passes
from harness.scoring.corrected import window_abstentions
from harness.scoring.spill import in_key_order


@dataclass
class WindowDigest:
    """What the adherence files read of a set of windows: their `window_passes` and, per
    condition, `corrected.window_abstentions`. A chat log's windows are scored a chunk at a
    time and no sample spans two chunks, so the chunks' digests merge (`merge_window_digests`)
    into the digest of all the windows, without ever holding them all."""

    passes: pd.DataFrame
    abstain: pd.DataFrame


def window_digest(windows: pd.DataFrame) -> WindowDigest:
    return WindowDigest(window_passes(windows), window_abstentions(windows))


def merge_window_digests(parts: list[WindowDigest]) -> WindowDigest:
    """The digest of the chunks' windows together: passes in key order (as `window_passes`'
    groupby leaves them), abstention counts summed and deciding checks united per condition."""
    passes = [p.passes for p in parts if not p.passes.empty]
    abstains = [p.abstain for p in parts if not p.abstain.empty]
    if not passes or not abstains:
        empty = window_digest(result_frame(WindowRow, []))
        passes, abstains = passes or [empty.passes], abstains or [empty.abstain]
    keys = TASK_CONDITION + RUN_SAMPLE + ["window"]
    merged = in_key_order(pd.concat(passes, ignore_index=True), keys)  # one item: no copy
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
    return WindowDigest(merged.reset_index(drop=True), counts)
