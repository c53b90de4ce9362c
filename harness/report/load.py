"""Read a run folder's stored files into one `RunData`, validating before anything is written.

The report never re-runs a stage: it reads generations.jsonl, the CSVs and manifest.json as
stored, each CSV checked against its row model (`harness.results`). It reads the files the
run wrote, never whatever a folder holds: the report stage names them (what this run wrote,
through its checked context), a finished folder's manifest.json lists them (`run_files`), so
a file an earlier run with another config left in a reused --out folder is not read. Every
file is optional (its section then says it is missing or why it is not usable), but a folder
with none of them, or a file that cannot be parsed, is a `UserError` naming the file.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from harness.errors import UserError
from harness.results import RESULT_FILES, ResultRow, column_kind, column_problem
from harness.userfiles import user_json_objects

KNOWN_FILES = (*RESULT_FILES, "generations.jsonl", "forks.jsonl", "manifest.json")
# a scored log's files that grow with the log: its report reads them a chunk at a time
CHUNKED = ("windows.csv", "turns.csv", "logged_conversations.csv")
CHUNK_ROWS = 20_000


@dataclass
class RunData:
    run_dir: Path
    frames: dict[str, pd.DataFrame] = field(default_factory=dict)
    generations: list[dict[str, Any]] | None = None
    forks: list[dict[str, Any]] | None = None  # forks.jsonl: the fork arms' texts
    manifest: dict[str, Any] | None = None
    problems: dict[str, str] = field(default_factory=dict)  # file -> why it is not used
    worst: int = 20  # logged conversations shown (`--worst`; harness.report.logs.WORST)
    with_text: bool = True  # False: no text of a log is shown (`--no-text`)
    paths: dict[str, Path] = field(default_factory=dict)  # CSVs read by chunks (`chunks`)

    def frame(self, name: str) -> pd.DataFrame | None:
        """The file's frame (one read whole, where it is kept as a path)."""
        if name in self.paths:
            return pd.concat(self.chunks(name), ignore_index=True)
        return self.frames.get(name)

    def chunks(self, name: str, rows: int | None = None) -> Iterator[pd.DataFrame]:
        """The file's rows as frames of at most `rows` rows, read as they are asked for where
        it is kept as a path (one frame where it is held; none where it is absent)."""
        if name in self.frames:
            yield self.frames[name]
        elif name in self.paths:
            path, row = self.paths[name], RESULT_FILES[name]
            for frame, problem in read_chunks(path, row, rows or CHUNK_ROWS):
                if problem:
                    raise UserError(f"{path}: {problem}")
                yield frame

    @property
    def readable(self) -> list[str]:
        """The result files the report can read (held or kept as paths)."""
        return [*self.frames, *self.paths]

    def missing(self, name: str) -> str:
        """One sentence for a section whose input is absent or unusable."""
        if name in self.problems:
            return f"{name} is not usable: {self.problems[name]}."
        return f"{name} is not in this run folder, so this part is left out."


def read_result(path: Path, row: type[ResultRow]) -> tuple[pd.DataFrame, str | None]:
    """A result CSV read and checked against its row model: (frame, why it is not usable, or
    None). Not usable: no rows, a declared column missing (an older or partial run), or a cell
    that does not fit its column's type. Raises UserError when the file is no readable CSV."""
    return next(read_chunks(path, row))


def read_chunks(
    path: Path, row: type[ResultRow], rows: int | None = None
) -> Iterator[tuple[pd.DataFrame, str | None]]:
    """`read_result` of each `rows` rows of the file in turn (None: the whole file once)."""
    strings = [c for c in row.columns() if column_kind(row, c)[0] == "str"]
    try:
        # Strings stay strings: an item id "1" or a model "nan" must not become a number.
        options = {"dtype": dict.fromkeys(strings, str), "low_memory": False}
        if rows is None:
            yield _checked(pd.read_csv(path, **options), row, strings)
            return
        read = False
        with pd.read_csv(path, chunksize=rows, **options) as chunks:
            for frame in chunks:
                read = True
                yield _checked(frame, row, strings)
        if not read:  # a header alone
            yield pd.DataFrame(), "the file has no rows"
    except pd.errors.EmptyDataError:
        yield pd.DataFrame(), "the file has no rows"
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as exc:
        raise UserError(f"{path}: not a readable CSV ({str(exc).splitlines()[0]})") from exc


def _checked(frame: pd.DataFrame, row: type[ResultRow], strings: list[str]):
    for col in set(strings) & set(frame.columns):
        frame[col] = frame[col].fillna("").astype(object)
    lacking = [c for c in row.columns() if c not in frame.columns]
    if frame.empty:
        return frame, "the file has no rows"
    # a column declared with a default reads as it where a file predates it
    filled = [c for c in lacking if not row.model_fields[c].is_required()]
    for name in filled:
        frame[name] = row.model_fields[name].default
    lacking = [c for c in lacking if c not in filled]
    if lacking:
        return frame, f"missing column(s) {', '.join(sorted(lacking))}"
    for name in [c for c in frame.columns if c in row.model_fields]:
        problem = column_problem(row, name, frame[name])
        if problem:
            return frame, f"column {name}: {problem}"
    return frame, None


def _read_generations(path: Path) -> list[dict[str, Any]]:
    return [record for _, record in user_json_objects(path)]


def _read_manifest(path: Path) -> dict[str, Any]:
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(manifest, dict):
        raise UserError(f"{path}: must hold a JSON object")
    return manifest


def run_files(run_dir: Path) -> dict[str, Path]:
    """name -> path of the files of a finished run folder that its run wrote, for the commands
    that re-read it (`harness report`, `harness gate`): manifest.json and the KNOWN_FILES its
    `files` lists, where they are there, so a file an earlier run with another config left in
    a reused folder is not one of them. A folder whose manifest predates that list (or that
    has none): every known file present."""
    run_dir = Path(run_dir)
    manifest = run_dir / "manifest.json"
    listed = _read_manifest(manifest).get("files") if manifest.is_file() else None
    if listed is not None and not (
        isinstance(listed, list) and all(isinstance(name, str) for name in listed)
    ):
        raise UserError(f"{manifest}: `files` must be a list of file names")
    names = KNOWN_FILES if listed is None else ["manifest.json", *listed]
    # known names only: a hand-edited list cannot point the reader outside the folder
    return {n: run_dir / n for n in KNOWN_FILES if n in names and (run_dir / n).is_file()}


def load_run(
    run_dir: Path,
    worst: int = 20,
    with_text: bool = True,
    chunked: bool = False,
    files: Mapping[str, Path] | None = None,
) -> RunData:
    """Read the run's files in `run_dir`: `files` (name -> path; the report stage gives those
    this run wrote), else `run_files(run_dir)`. Raises UserError on a missing folder, a folder
    with no run files, or a file that cannot be parsed. chunked: a scored log's CHUNKED files
    are checked on their first rows and kept as paths, read later a chunk at a time
    (`chunks`)."""
    run_dir = Path(run_dir)
    if not run_dir.exists():
        raise UserError(f"{run_dir}: no such run folder")
    if not run_dir.is_dir():
        raise UserError(f"{run_dir}: is not a folder")
    files = run_files(run_dir) if files is None else files
    present = {name: Path(files[name]) for name in KNOWN_FILES if name in files}
    if not present:
        raise UserError(
            f"{run_dir}: not a run folder (no generations.jsonl, manifest.json or result CSV)"
        )
    data = RunData(run_dir=run_dir, worst=worst, with_text=with_text)
    if "manifest.json" in present:
        data.manifest = _read_manifest(present["manifest.json"])
    by_chunks = chunked and (data.manifest or {}).get("command") == "score"
    for name, row in RESULT_FILES.items():
        if name not in present:
            continue
        lazy = by_chunks and name in CHUNKED
        frame, problem = next(read_chunks(present[name], row, CHUNK_ROWS if lazy else None))
        if problem:
            data.problems[name] = problem
        elif lazy:
            data.paths[name] = present[name]
        else:
            data.frames[name] = frame
        del frame
    if "generations.jsonl" in present:
        data.generations = _read_generations(present["generations.jsonl"])
    if "forks.jsonl" in present:
        data.forks = _read_generations(present["forks.jsonl"])
    return data
