"""The stage protocol: every step of a run is a `Stage` over one shared `RunContext`.

A stage declares what it `reads` and what it `writes`: result row models (`harness.results`,
one per CSV) and the few `Product`s that are no CSV (the records, the probe curves, the fork
arms, the manifest, junit.xml, the report). `check_order` refuses a stage list in which a
stage reads what no stage before it writes, before anything runs. A stage reads an earlier
stage's CSV as `ctx.frame(WindowRow)`: checked against the row model, booleans as booleans,
and only if it declared it. It computes its units through the run's store (so a killed run
resumes) and returns its files as `{filename: value}`, each one it declared; the pipeline
writes each once, through `write_output`, and keeps it in `ctx.outputs` for the stages after
it. A new stage is one module with one class and one line in `harness.pipeline.STAGES`.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from harness.config import ChatOptions, RunConfig, TaskSuite
from harness.engines.pool import EnginePool
from harness.engines.units import PositionUnits, t_unit_name
from harness.models import ResolvedModel
from harness.records import GenerationRecord
from harness.results import RESULT_FILES, ResultRow, result_frame, typed_frame
from harness.results.base import typed_chunks
from harness.run_units import GENERATE, Unit, generation_units
from harness.selection import Selected
from harness.sequential import SampleBatch, fixed_batches
from harness.store import RunStore, atomic_write_text, write_csv

if TYPE_CHECKING:  # annotations only: pandas and rich load where frames and bars are made
    import pandas as pd
    from rich.progress import Progress


# What a stage may return per file: a DataFrame (CSV), a list of pydantic models (JSON lines),
# a dict (JSON), a str (text) or a `WrittenFile`. `write_output` picks the writer from the
# value's type.
Output = Any


@dataclass(frozen=True)
class WrittenFile:
    """An Output the stage wrote itself, a chunk at a time, because it never holds it whole
    (a scored log's windows.csv: `harness.scoring.spill`): a file on the same filesystem as
    the run folder, through the same CSV writer, that `write_output` moves into place. Later
    stages read it from the run folder (`ctx.frame`, `ctx.frames`)."""

    path: Path


class Product:
    """What a stage leaves for later stages that is no result CSV; `file`: the run-folder
    file it is also written to ("" where it stays in the context)."""

    file: ClassVar[str] = ""


class Records(Product):
    """`ctx.records`, the generation records (generations.jsonl)."""

    file = "generations.jsonl"


class Curves(Product):
    """`ctx.curves`: each probed record's divergence, next-token and attention arrays."""


class ForkArms(Product):
    """The fork arms' texts (forks.jsonl)."""

    file = "forks.jsonl"


class Manifest(Product):
    file = "manifest.json"


class JUnit(Product):
    file = "junit.xml"


class Report(Product):
    """report.html, which the report stage writes itself."""

    file = "report.html"


# What a stage reads and writes: a result row model (a CSV) or a Product.
Artifact = type[ResultRow] | type[Product]


def artifact_name(artifact: Artifact) -> str:
    return artifact.file or artifact.__name__


@dataclass
class ProgressBars:
    """Progress bars for the stages; `None` progress (tests, library use) draws nothing."""

    progress: Progress | None = None

    def bar(self, label: str, total: float) -> Bar:
        task = self.progress.add_task(label, total=total) if self.progress else None
        return Bar(self.progress, task, total)


@dataclass
class Bar:
    progress: Progress | None
    task: Any
    total: float

    def update(self, completed: float) -> None:
        if self.progress is not None:
            self.progress.update(self.task, completed=completed)

    def advance(self, amount: float = 1) -> None:
        if self.progress is not None:
            self.progress.advance(self.task, amount)

    def finish(self) -> None:
        self.update(self.total)


class StageTimings:
    """`timed`, which the pipeline wraps each stage in, for a context with a `timings` dict
    (stage -> seconds) that manifest.json reports: `harness run`'s, `score`'s and `probe`'s."""

    timings: dict[str, float]

    @contextmanager
    def timed(self, name: str):
        start = time.perf_counter()
        try:
            yield
        finally:
            # summed: a sequential run runs its first stages once per look
            self.timings[name] = round(self.timings.get(name, 0) + time.perf_counter() - start, 2)


@dataclass
class RunContext(StageTimings):
    """Everything a stage may read: the validated inputs, then what earlier stages produced."""

    config: RunConfig
    store: RunStore
    out_dir: Path
    run_id: str
    suites: list[TaskSuite]
    items: list[Selected]
    models: list[ResolvedModel]
    twins: dict[str, ResolvedModel]  # trained model name -> its untrained twin
    probe_backends: dict[str, str] = field(default_factory=dict)  # probe model -> vllm | hf
    progress: ProgressBars = field(default_factory=ProgressBars)
    records: list[GenerationRecord] = field(default_factory=list)
    curves: dict[tuple[str, str], dict] = field(default_factory=dict)  # (model, record key)
    outputs: dict[str, Output] = field(default_factory=dict)  # file name -> value written
    timings: dict[str, float] = field(default_factory=dict)  # stage -> seconds
    started: str = ""
    # the samples to generate (sequential runs, harness.sequential); empty: config.samples
    batches: list[SampleBatch] = field(default_factory=list)
    sequential: dict = field(default_factory=dict)  # manifest.json's record of the looks
    engines: EnginePool = field(default_factory=lambda: _engine_pool())
    stage: Stage | None = None  # the stage running now: `frame` reads only what it declared
    # the checks' error measured on the labelled sets (AnalyseStage.measured), once per run
    measured_rates: dict | None = None
    # engine chat: each model's requests, tokens and served identity (manifest.json)
    hosted: dict = field(default_factory=dict)
    # the plan's units (harness.run_units); None: a context built without a plan (a test's)
    units: list[Unit] | None = None
    _tokenizers: dict[str, Any] = field(default_factory=dict)

    def generation_units(self, model: ResolvedModel) -> list[Unit]:
        """The model's generation units: the plan's, or in a sequential run those of the
        batches so far (each look adds one)."""
        if self.batches or self.units is None:
            batches = self.batches or fixed_batches(self.config)
            return generation_units(self.config, model, self.items, batches, self.run_id)
        return [u for u in self.units if u.stage == GENERATE and u.model == model.name]

    @property
    def t_unit(self) -> str:
        """The unit of every position t the run's files hold (`t_unit_name`)."""
        gen = self.config.generation
        chat = gen.chat or ChatOptions()
        return t_unit_name(gen.engine, chat.positions, chat.tokenizer)

    @property
    def probe_models(self) -> list[ResolvedModel]:
        return self.models + list(self.twins.values())

    def records_of(self, model_name: str) -> list[GenerationRecord]:
        return [r for r in self.records if r.model == model_name]

    def tokenizer(self, model: ResolvedModel):
        """The model's tokenizer, loaded once per run."""
        if model.name not in self._tokenizers and model.source == "hosted":
            chat = self.config.generation.chat or ChatOptions()
            self._tokenizers[model.name] = PositionUnits(chat.positions, chat.tokenizer)
        if model.name not in self._tokenizers:
            from transformers import AutoTokenizer

            self._tokenizers[model.name] = AutoTokenizer.from_pretrained(model.path)
        return self._tokenizers[model.name]

    def frame(self, row: type[ResultRow]) -> pd.DataFrame:
        """An earlier stage's CSV, checked against `row` (booleans as booleans); an empty
        frame when that stage wrote none. The running stage must declare it in `reads`."""
        if self.stage is not None and row not in self.stage.reads:
            raise RuntimeError(f"stage {self.stage.name} reads {row.file} without declaring it")
        value = self.outputs.get(row.file)
        return output_frame(row, value)


def output_frame(row: type[ResultRow], value: Output) -> pd.DataFrame:
    """An earlier stage's CSV as one typed frame (read from disk when kept as its path);
    an empty frame when no stage wrote it."""
    import pandas as pd

    frames = list(output_frames(row, value, rows=None))
    if len(frames) > 1:
        return pd.concat(frames, ignore_index=True)
    return frames[0] if frames else pd.DataFrame()


def _engine_pool() -> EnginePool:
    return EnginePool()


class Stage(Protocol):
    """One step of a run. `name` labels its timing in manifest.json; `reads`: what stages
    before it must write; `writes`: every file it may return (it may return none of them)."""

    name: str
    reads: tuple[Artifact, ...]
    writes: tuple[Artifact, ...]

    def run(self, ctx: RunContext) -> dict[str, Output]: ...


def check_order(stages: list[Stage]) -> None:
    """Raise ValueError when a stage reads what no stage before it writes."""
    written: set[Artifact] = set()
    for stage in stages:
        missing = [artifact_name(a) for a in stage.reads if a not in written]
        if missing:
            raise ValueError(
                f"stage {stage.name} reads {', '.join(missing)}, which no stage before it writes"
            )
        written.update(stage.writes)


def check_outputs(stage: Stage, outputs: dict[str, Output]) -> None:
    """Raise RuntimeError when a stage returned a file it does not declare in `writes`."""
    declared = {a.file for a in stage.writes}
    undeclared = sorted(set(outputs) - declared)
    if undeclared:
        raise RuntimeError(f"stage {stage.name} wrote undeclared {', '.join(undeclared)}")


def declared_row(stage: Stage, name: str) -> type[ResultRow] | None:
    """The row model `stage` declares for its file `name` (None for a Product)."""
    rows = [a for a in stage.writes if a.file == name and issubclass(a, ResultRow)]
    return rows[0] if rows else None


def kept_output(path: Path, value: Output) -> Output:
    """What `ctx.outputs` keeps of a written file: its value, or its path in the run folder
    where the value was a `WrittenFile` (moved there)."""
    return path if isinstance(value, WrittenFile) else value


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
    else:
        yield from typed_chunks(row, Path(value), rows)


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
