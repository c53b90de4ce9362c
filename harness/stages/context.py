"""The one context every pipeline's stages share (`harness run`'s, `score`'s and `probe`'s):
its plan, its unit store, the typed map of what the stages before produced (`Artifacts`), the
timings, the progress bars and the engines open.

A stage reads an earlier stage's artifact only through the map (`ctx.read(Records)`,
`ctx.frame(WindowRow)`, `ctx.frames`, `ctx.path`, `ctx.written`), and only what it declares
in `reads` (or `reads_if_written`): an undeclared read raises `UndeclaredRead`, so a stage
cannot lean on something its declaration hides from `check_order`. A stage that reads the run
folder as written (gates, report) reads only the files this run wrote (`ctx.written`), never
one an earlier run left in a reused folder. What it produces it returns, and the
pipeline puts it in the map.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from harness.config.run import ChatOptions, RunConfig, TaskSuite
from harness.engines.pool import EnginePool
from harness.engines.positions import PositionUnits, t_unit_name
from harness.models import ResolvedModel, built, model_files
from harness.probes.backend import Backend, backend_dtype, open_backend
from harness.results import ResultRow
from harness.results.base import MODEL_TOKENS
from harness.stages.base import (
    FOLDER_FILES,
    Artifact,
    Product,
    Records,
    RunFiles,
    Stage,
    artifact_name,
    optional_reads,
    output_frame,
    output_frames,
)
from harness.store import RunStore
from harness.text.records import GenerationRecord
from harness.units.plan import RunPlan
from harness.units.probe_plan import ProbePlan
from harness.units.run_units import GENERATE, Unit, generation_units
from harness.units.selection import Selected
from harness.units.sequential import SampleBatch, fixed_batches

if TYPE_CHECKING:  # annotations only: pandas and rich load where frames and bars are made
    import pandas as pd
    from rich.progress import Progress, TaskID

PlanT = TypeVar("PlanT")
T = TypeVar("T")


class UndeclaredRead(RuntimeError):
    """A stage read an artifact it does not declare in `reads` (or `reads_if_written`)."""


_RUN_FILES = artifact_name(RunFiles)


class Artifacts:
    """The one map of what the stages produced, by artifact name (`artifact_name`): a result
    file's frame (or its path in the run folder, once released), a Product's value. Typed
    reads go through the context (`StageContext.read`, `.frame`), which check the running
    stage's declaration; the pipeline puts, and reads after the run (`value`). The files
    written so far are themselves an artifact (`RunFiles`), kept here as they are written."""

    def __init__(self) -> None:
        self._values: dict[str, object] = {_RUN_FILES: []}

    def put(self, name: str, value: object, written: bool = False) -> None:
        self._values[name] = value
        files = self.files()
        if written and name not in files:
            # a new list each time: a stage that read the files before keeps what it read
            self._values[_RUN_FILES] = [*files, name]

    def set(self, artifact: Artifact, value: object) -> None:
        """Put an artifact's value (what the pipeline gives, or a test's input)."""
        self.put(artifact_name(artifact), value)

    def value(self, artifact: Artifact) -> object | None:
        return self._values.get(artifact_name(artifact))

    def files(self) -> list[str]:
        """The files written into the run folder so far, in the order first written."""
        return cast("list[str]", self._values[_RUN_FILES])

    def names(self) -> list[str]:
        return list(self._values)

    def clear(self) -> None:
        self._values = {_RUN_FILES: []}


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
    task: TaskID | None
    total: float

    def update(self, completed: float) -> None:
        if self.progress is not None and self.task is not None:
            self.progress.update(self.task, completed=completed)

    def advance(self, amount: float = 1) -> None:
        if self.progress is not None and self.task is not None:
            self.progress.advance(self.task, amount)

    def finish(self) -> None:
        self.update(self.total)


class ProbeBackends:
    """`harness probe`'s engines: the one backend open at a time (a model's curves, then it is
    closed); the first model's hf backend is also --generator hf's, so its weights load once."""

    def __init__(self) -> None:
        self._open: tuple[Path, Backend] | None = None

    def get(self, plan: ProbePlan, model: ResolvedModel, longest: int = 0) -> Backend:
        if self._open is None or self._open[0] != model.path:
            self.close()
            req = plan.request
            dtype = backend_dtype(req.backend, req.dtype, model.path)
            backend = open_backend(
                req.backend, model.path, longest, req.chunk, req.tensor_parallel_size,
                req.pipeline_parallel_size, req.endpoint(), dtype,
            )  # fmt: skip
            self._open = (model.path, backend)
        return self._open[1]

    def close(self) -> None:
        if self._open is not None:
            self._open[1].close()
            self._open = None


def _engine_pool() -> EnginePool:
    return EnginePool()


@dataclass
class StageContext(Generic[PlanT]):
    """What the stages of one pipeline share: the validated plan (`RunPlan`, `ScorePlan` or
    `ProbePlan`), then what earlier stages produced (`artifacts`). The run's inputs are read
    from the plan (`ctx.config`, `ctx.items`, ... on a run's context)."""

    plan: PlanT
    store: RunStore | None  # the units' cache (`harness score` keeps none of its own)
    out_dir: Path
    artifacts: Artifacts = field(default_factory=Artifacts)
    progress: ProgressBars = field(default_factory=ProgressBars)
    timings: dict[str, float] = field(default_factory=dict)  # stage -> seconds
    started: str = ""
    stage: Stage | None = None  # the stage running now: reads are checked against it
    engines: EnginePool = field(default_factory=lambda: _engine_pool())
    backends: ProbeBackends = field(default_factory=ProbeBackends)  # `harness probe`'s
    say: Callable[[str], None] = lambda _msg: None  # one line of progress (the command's)
    notes: list[str] = field(default_factory=list)  # for the user: the plan's, the stages'
    # the samples to generate (sequential runs, harness.units.sequential); empty: config.samples
    batches: list[SampleBatch] = field(default_factory=list)
    # the checks' error measured on the labelled sets (AnalyseStage.measured), once per run
    measured_rates: dict[str, Any] | None = None
    _tokenizers: dict[str, Any] = field(default_factory=dict)

    @contextmanager
    def timed(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            # summed: a sequential run runs its first stages once per look
            self.timings[name] = round(self.timings.get(name, 0) + time.perf_counter() - start, 2)

    # -- the typed map, checked against the running stage's declaration --

    def _declared(self, artifact: Artifact) -> object | None:
        stage = self.stage
        if stage is not None and artifact not in (*stage.reads, *optional_reads(stage)):
            raise UndeclaredRead(
                f"stage {stage.name} reads {artifact_name(artifact)} without declaring it"
            )
        return self.artifacts.value(artifact)

    def read(self, product: type[Product[T]], default: T | None = None) -> T:
        """An earlier stage's product (`default`, else an error, where none wrote it)."""
        value = self._declared(product)
        if value is None:
            if default is None:
                raise RuntimeError(f"{artifact_name(product)}: no stage before wrote it")
            return default
        return cast("T", value)

    def records(self) -> list[GenerationRecord]:
        """The generation records (`ctx.read(Records)`; none before a stage wrote them)."""
        return self.read(Records, [])

    def frame(self, row: type[ResultRow]) -> pd.DataFrame:
        """An earlier stage's CSV, checked against `row` (booleans as booleans); an empty
        frame when that stage wrote none."""
        return output_frame(row, self._declared(row))

    def frames(self, row: type[ResultRow], rows: int = 20_000) -> Iterator[pd.DataFrame]:
        """An earlier stage's CSV as typed frames of at most `rows` rows (a scored log's files
        are read from the folder a chunk at a time, never whole)."""
        return output_frames(row, self._declared(row), rows)

    def path(self, artifact: Artifact) -> Path:
        """Where an earlier stage's file is in the run folder (for a stage that reads it as
        written, as a command re-reading the folder would)."""
        self._declared(artifact)
        return self.out_dir / artifact.file

    def written(self, names: Collection[str]) -> dict[str, Path]:
        """name -> path of each of `names` that a stage before wrote into the run folder in
        this run (`RunFiles`, which the stage declares), in the order written, each through
        `path`: a file written but not declared raises UndeclaredRead. What a stage reading
        the folder as written reads, never a file an earlier run left there."""
        files = self.read(RunFiles, [])
        return {name: self.path(FOLDER_FILES[name]) for name in files if name in names}

    @property
    def cache(self) -> RunStore:
        """The unit store (every pipeline with units keeps one)."""
        if self.store is None:
            raise RuntimeError("this pipeline keeps no unit store")
        return self.store

    # -- a run's inputs (its plan's) --

    @property
    def config(self: StageContext[RunPlan]) -> RunConfig:
        return self.plan.config

    @property
    def run_id(self: StageContext[RunPlan]) -> str:
        return self.plan.run_id

    @property
    def suites(self: StageContext[RunPlan]) -> list[TaskSuite]:
        return self.plan.suites

    @property
    def items(self: StageContext[RunPlan]) -> list[Selected]:
        return self.plan.items

    @property
    def models(self: StageContext[RunPlan]) -> list[ResolvedModel]:
        """The run's models, each built on first use (the plan only locates them)."""
        return [built(model) for model in self.plan.models]

    @property
    def twins(self: StageContext[RunPlan]) -> dict[str, ResolvedModel]:
        """The untrained twins, each built on first use (the plan only locates them)."""
        return {name: built(twin) for name, twin in self.plan.twins.items()}

    @property
    def probe_backends(self: StageContext[RunPlan]) -> dict[str, str]:
        return self.plan.probe_backends

    @property
    def t_unit(self) -> str:
        """The unit of every position t the files hold (`t_unit_name`): a run's from its
        engine and chat options; `harness score` and `harness probe` count model tokens."""
        if not isinstance(self.plan, RunPlan):
            return MODEL_TOKENS
        gen = self.plan.config.generation
        chat = gen.chat or ChatOptions()
        return t_unit_name(gen.engine, chat.positions, chat.tokenizer)

    @property
    def probe_models(self: StageContext[RunPlan]) -> list[ResolvedModel]:
        return self.models + list(self.twins.values())

    def generation_units(self: StageContext[RunPlan], model: ResolvedModel) -> list[Unit]:
        """The model's generation units: the plan's, or in a sequential run those of the
        batches so far (each look adds one)."""
        plan = self.plan
        if self.batches or not plan.units:
            batches = self.batches or fixed_batches(plan.config)
            return generation_units(plan.config, model, plan.items, batches, plan.run_id)
        return [u for u in plan.units if u.stage == GENERATE and u.model == model.name]

    def records_of(self: StageContext[RunPlan], model_name: str) -> list[GenerationRecord]:
        """The model's generation records (the stage must declare `Records`)."""
        return [r for r in self.records() if r.model == model_name]

    def tokenizer(self: StageContext[RunPlan], model: ResolvedModel) -> Any:
        """The model's tokenizer, loaded once per run."""
        if model.name not in self._tokenizers and model.source == "hosted":
            chat = self.plan.config.generation.chat or ChatOptions()
            self._tokenizers[model.name] = PositionUnits(chat.positions, chat.tokenizer)
        if model.name not in self._tokenizers:
            from transformers import AutoTokenizer

            self._tokenizers[model.name] = AutoTokenizer.from_pretrained(model_files(model))
        return self._tokenizers[model.name]


RunContext = StageContext[RunPlan]


def run_context(plan: RunPlan, store: RunStore, **fields: Any) -> RunContext:
    """A run's context over a validated plan (the pipeline's; tests build one the same way)."""
    return StageContext(plan, store, plan.out_dir, **fields)
