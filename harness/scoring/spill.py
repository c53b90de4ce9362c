"""Result CSVs written a chunk at a time ("spilled") and joined in key order, so a scored
chat log's windows.csv and turns.csv never stand in memory whole (issue 31: peak memory flat
in the number of conversations).

Each chunk is written through its row model by `store.write_csv`, the writer of every run
file, into a part file of its own, stably sorted by the file's keys. The parts are then
joined: copied one after the other when they already follow each other in key order (a log
of one item, or of items one after the other), else merged row by row (`heapq.merge`, which
prefers the earlier part on equal keys: a stable sort of the whole). A merged row is the
part's CSV fields as read back, written by the same `csv` writer pandas writes with, so the
bytes are those of the whole frame written at once.
"""

from __future__ import annotations

import csv
import heapq
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from harness.results import ResultRow, result_frame
from harness.results.base import column_kind
from harness.store import write_csv

WINDOW_KEYS = ("model", "item", "policy", "sample", "window", "turn")  # windows.csv's row order
TURN_KEYS = ("model", "item", "policy", "history", "sample", "turn")  # turns.csv's


def in_key_order(frame: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    """The frame stably sorted by `keys`; itself when already in that order (the sort would
    copy every column to return the same rows)."""
    keys = list(keys)
    if not keys or frame.empty or sorted_runs(frame, keys) is not None:
        return frame
    return frame.sort_values(keys, kind="stable", ignore_index=True)


def sorted_runs(frame: pd.DataFrame, keys: Sequence[str]) -> np.ndarray | None:
    """The first row of each run of equal `keys` where the frame is sorted by them; None
    where it is not (or a key is empty). Neighbours compared a key at a time: a few bools per
    row, where a MultiIndex or a groupby over a 100,000-conversation log's ~1.3 million
    passes would factorize every key (~150 MiB)."""
    if frame.empty or any(frame[k].isna().any() for k in keys):
        return None
    same = np.ones(len(frame) - 1, dtype=bool)  # row i + 1 has row i's keys so far
    for key in keys:
        values = frame[key].to_numpy()
        after, before = values[1:], values[:-1]
        if (same & (after < before)).any():
            return None
        same &= after == before
    return np.concatenate([[0], np.nonzero(~same)[0] + 1])


def key_groups(frame: pd.DataFrame, keys: Sequence[str]) -> Iterator[tuple[tuple, pd.DataFrame]]:
    """`frame.groupby(keys, sort=True)`'s (key, rows) pairs; the frame itself when it holds
    one group (a log of one item: its digest is one condition, whose copy would be ~130 MiB
    per 100,000 conversations)."""
    keys = list(keys)
    if len(frame) and all(frame[k].nunique(dropna=False) == 1 for k in keys):
        yield tuple(frame[k].iloc[0] for k in keys), frame
        return
    yield from frame.groupby(keys, sort=True)


class SpilledCsv:
    """One result CSV of `row`, its chunks written to part files under `folder` as they come
    and joined by `finish` into one file in the stable order of `keys` (none: chunk order)."""

    def __init__(self, folder: Path, row: type[ResultRow], keys: Sequence[str] = ()) -> None:
        self.folder, self.row, self.keys = Path(folder), row, list(keys)
        self.parts: list[Path] = []
        self.last: tuple | None = None  # the last key of the last part
        self.in_order = True  # every part starts after the part before it ends

    def add(self, frame: pd.DataFrame) -> None:
        """Write one chunk's rows, a frame `result_frame` made of `row` (checked there, not
        again here: a second check of every column cost ~0.4 s per 10,000 conversations);
        none: nothing is written."""
        if frame.empty:
            return
        frame = in_key_order(frame, self.keys)
        if self.keys:
            first = tuple(frame[self.keys].iloc[0])
            if self.last is not None and first < self.last:
                self.in_order = False
            self.last = tuple(frame[self.keys].iloc[-1])
        self.folder.mkdir(parents=True, exist_ok=True)
        part = self.folder / f"{Path(self.row.file).stem}.{len(self.parts)}.csv"
        write_csv(frame, part)
        self.parts.append(part)

    def finish(self, out: Path) -> Path:
        """The parts joined into `out` (returned); the part files are removed. No rows at all:
        the header alone, as the empty frame's CSV."""
        if not self.parts:
            write_csv(result_frame(self.row, []), out)
        elif self.in_order:
            _concatenate(self.parts, out)
        else:
            _merge(self.parts, out, self._key_of)
        for part in self.parts:
            part.unlink()
        self.parts = []
        return out

    def _key_of(self, header: list[str]):
        """A function from a row's CSV fields to its sort key (ints compared as ints)."""
        at = [header.index(k) for k in self.keys]
        ints = [column_kind(self.row, k)[0] == "int" for k in self.keys]

        def key(fields: list[str]) -> tuple:
            return tuple(int(fields[i]) if n else fields[i] for i, n in zip(at, ints, strict=True))

        return key


def _concatenate(parts: list[Path], out: Path) -> None:
    """The parts one after the other, the first one's header only."""
    with out.open("wb") as handle:
        for index, part in enumerate(parts):
            with part.open("rb") as source:
                header = source.readline()  # column names: one line, never quoted across lines
                if index == 0:
                    handle.write(header)
                shutil.copyfileobj(source, handle)


def _rows(part: Path) -> Iterator[list[str]]:
    with part.open(newline="", encoding="utf-8") as handle:
        reader = csv.reader(handle)
        next(reader)
        yield from reader


def _merge(parts: list[Path], out: Path, key_of) -> None:
    """The parts' rows merged by key, a row of each part in memory at a time."""
    with parts[0].open(newline="", encoding="utf-8") as handle:
        header = next(csv.reader(handle))
    # pandas' to_csv: the csv module's writer, minimal quoting, "\n" line ends
    with out.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(heapq.merge(*(_rows(p) for p in parts), key=key_of(header)))
