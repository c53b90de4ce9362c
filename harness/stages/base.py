"""The stage protocol: every step of a pipeline is a `Stage` over one `StageContext`
(harness/stages/context.py; `harness run`'s, `score`'s and `probe`'s alike).

A stage declares what it `reads` and what it `writes`: result row models (`harness.results`,
one per CSV) and the `Product`s that are no CSV (the records, the probe curves, the fork
arms, the manifest, junit.xml, the report, the timings). `check_order` refuses a stage list
in which a stage reads what no stage before it writes, before anything runs. A stage reads
an earlier stage's artifact only through the context's typed map (`ctx.read(Records)`,
`ctx.frame(WindowRow)`: checked against the row model, booleans as booleans), and only what
it declared (an undeclared read raises). It computes its units through the run's store (so
a killed run resumes) and returns what it made as `{name: value}` (`artifact_name`: the file
name, or a Product's class name where it has no file), each one it declared; the pipeline
writes each file once, through `write_output`, and puts every value in the map for the
stages after it. A new stage is one module with one class and one line in
`harness.pipeline.STAGES`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, TypeVar

from harness.atomic import atomic_write_text
from harness.results import RESULT_FILES, ResultRow, result_frame, typed_frame
from harness.results.base import typed_chunks
from harness.store import write_csv
from harness.text.records import GenerationRecord

if TYPE_CHECKING:  # annotations only: pandas loads where frames are made
    import pandas as pd

T = TypeVar("T")

# What a stage returns per artifact: a DataFrame (CSV), a list of pydantic models (JSON
# lines), a dict (JSON), a str (text), a `WrittenFile`, or a file-less Product's value;
# `write_output` picks the writer from the value's type (a Product's `written` first).
Output = object


@dataclass(frozen=True)
class WrittenFile:
    """An Output the stage wrote itself, a chunk at a time, because it never holds it whole
    (a scored log's windows.csv: `harness.scoring.spill`): a file on the same filesystem as
    the run folder, through the same CSV writer, that `write_output` moves into place. Later
    stages read it from the run folder (`ctx.frame`, `ctx.frames`)."""

    path: Path


class Product(Generic[T]):
    """What a stage leaves for later stages that is no result CSV, its value of type `T`;
    `file`: the run-folder file it is also written to ("" where it stays in the map)."""

    file: ClassVar[str] = ""

    @classmethod
    def written(cls, value: T) -> object:
        """What is written to `file` for `value` (by default the value itself)."""
        return value


class Records(Product[list[GenerationRecord]]):
    """The generation records (generations.jsonl)."""

    file = "generations.jsonl"


class Curves(Product[dict[tuple[str, str], dict[str, Any]]]):
    """Each probed record's divergence, next-token and attention arrays, by (model, record
    key)."""


class ForkArms(Product[list[Any]]):
    """The fork arms' texts (forks.jsonl, `stages.forks.ForkArm` lines)."""

    file = "forks.jsonl"


class Hosted(Product[dict[str, Any]]):
    """Engine chat: each model's requests, tokens and served identity (manifest.json)."""


class Timings(Product[dict[str, float]]):
    """Seconds per stage so far: given by the pipeline, which times every stage."""


class Sequential(Product[dict[str, Any]]):
    """A sequential run's record of its looks (given by the pipeline; empty otherwise)."""


class RunFiles(Product[list[str]]):
    """The files this run has written into its folder so far, in the order first written
    (given by the pipeline: `Artifacts.files()`). A stage that reads the folder as written
    (gates, report) reads these and no other file, so a file an earlier run with another
    config left in a reused folder is never read; manifest.json records them (`files`) for
    the commands that re-read a finished folder."""


class Manifest(Product[dict[str, Any]]):
    file = "manifest.json"


class JUnit(Product[str]):
    file = "junit.xml"


class Report(Product[None]):
    """report.html, which the report stage writes itself."""

    file = "report.html"


# What a stage reads and writes: a result row model (a CSV) or a Product.
Artifact = type[ResultRow] | type[Product[Any]]

# Every file a run folder may hold that a reader of the whole folder (the report) reads
# where it is there: each result file and the fork arms.
FILES_OF_A_RUN: tuple[Artifact, ...] = (*RESULT_FILES.values(), ForkArms)

# What every pipeline gives its stages before the first runs (pipeline.run_stages; RunFiles
# is kept by the map itself as files are written).
GIVEN: tuple[Artifact, ...] = (Timings, Sequential, RunFiles)

# The artifact of each file a run folder may hold, by file name (`StageContext.written`).
_FILED: tuple[type[Product[Any]], ...] = (Records, ForkArms, Manifest, JUnit, Report)
FOLDER_FILES: dict[str, Artifact] = {**RESULT_FILES, **{p.file: p for p in _FILED}}


def artifact_name(artifact: Artifact) -> str:
    return artifact.file or artifact.__name__


class Stage(Protocol):
    """One step of a pipeline. `name` labels its timing in manifest.json; `reads`: what stages
    before it must write; `writes`: every artifact it may return (it may return none of them).
    A stage may also declare `reads_if_written`: what it reads where an earlier stage wrote
    it (`optional_reads`)."""

    @property
    def name(self) -> str: ...
    @property
    def reads(self) -> tuple[Artifact, ...]: ...
    @property
    def writes(self) -> tuple[Artifact, ...]: ...

    def run(self, ctx: Any) -> dict[str, Output]: ...


def optional_reads(stage: Stage) -> tuple[Artifact, ...]:
    """What `stage` reads where an earlier stage wrote it (its `reads_if_written`)."""
    optional: tuple[Artifact, ...] = getattr(stage, "reads_if_written", ())
    return optional


def check_order(stages: list[Stage], given: tuple[Artifact, ...] = GIVEN) -> None:
    """Raise ValueError when a stage reads what no stage before it writes."""
    written: set[Artifact] = set(given)
    for stage in stages:
        missing = [artifact_name(a) for a in stage.reads if a not in written]
        if missing:
            raise ValueError(
                f"stage {stage.name} reads {', '.join(missing)}, which no stage before it writes"
            )
        written.update(stage.writes)


def check_outputs(stage: Stage, outputs: dict[str, Output]) -> None:
    """Raise RuntimeError when a stage returned an artifact it does not declare in `writes`."""
    declared = {artifact_name(a) for a in stage.writes}
    undeclared = sorted(set(outputs) - declared)
    if undeclared:
        raise RuntimeError(f"stage {stage.name} wrote undeclared {', '.join(undeclared)}")


def declared_row(stage: Stage, name: str) -> type[ResultRow] | None:
    """The row model `stage` declares for its file `name` (None for a Product)."""
    rows = [a for a in stage.writes if issubclass(a, ResultRow) and a.file == name]
    return rows[0] if rows else None


def declared_product(stage: Stage, name: str) -> type[Product[Any]] | None:
    """The Product `stage` declares under `name` (None for a result file)."""
    products = [a for a in stage.writes if issubclass(a, Product) and artifact_name(a) == name]
    return products[0] if products else None


def kept_output(path: Path, value: Output) -> Output:
    """What the map keeps of a written file: its value, or its path in the run folder where
    the value was a `WrittenFile` (moved there)."""
    return path if isinstance(value, WrittenFile) else value


def output_frame(row: type[ResultRow], value: Output) -> pd.DataFrame:
    """An earlier stage's CSV as one typed frame (read from disk when kept as its path);
    an empty frame when no stage wrote it."""
    import pandas as pd

    frames = list(output_frames(row, value, rows=None))
    if len(frames) > 1:
        return pd.concat(frames, ignore_index=True)
    return frames[0] if frames else pd.DataFrame()


def output_frames(
    row: type[ResultRow], value: Output, rows: int | None = 20_000
) -> Iterator[pd.DataFrame]:
    """An earlier stage's CSV as typed frames of at most `rows` rows (one frame when it is
    held in memory; read from disk a chunk at a time when it was kept as its path; None:
    the whole file at once)."""
    import pandas as pd

    if value is None:
        return
    if isinstance(value, pd.DataFrame):
        yield typed_frame(row, value)
    elif isinstance(value, str | Path):
        yield from typed_chunks(row, Path(value), rows)
    else:
        raise TypeError(f"{row.file}: held as {type(value).__name__}, not a frame or a path")


def with_t_unit(value: Output, row: type[ResultRow] | None, unit: str) -> Output:
    """A result frame whose file has a `t_unit` column, with the run's unit in every row (a
    frame is built with the column's default, `tokens`, wherever it is built)."""
    import pandas as pd

    if isinstance(value, pd.DataFrame) and row is not None and "t_unit" in row.model_fields:
        return value.assign(t_unit=unit)
    return value


def write_output(path: Path, value: Output, row: type[ResultRow] | None = None) -> None:
    """The one writer of every run file, chosen by the value's type; always atomic. A frame
    goes through `row` (the writing stage's declaration), else the run's model of its name."""
    import pandas as pd
    from pydantic import BaseModel

    if isinstance(value, pd.DataFrame):
        row = row or RESULT_FILES.get(path.name)
        # every result file through its row model, whichever stage built it
        write_csv(result_frame(row, value) if row is not None else value, path)
    elif isinstance(value, list) and all(isinstance(v, BaseModel) for v in value):
        atomic_write_text(path, "".join(v.model_dump_json() + "\n" for v in value))
    elif isinstance(value, dict):
        atomic_write_text(path, json.dumps(value, indent=2))
    elif isinstance(value, str):
        atomic_write_text(path, value)
    elif isinstance(value, WrittenFile):
        os.replace(value.path, path)  # atomic: the file was written whole beside the run
    else:
        raise TypeError(f"{path.name}: no writer for {type(value).__name__}")
