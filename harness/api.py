"""The harness from Python, as `harness.load_config`, `harness.plan`, `harness.run` and
`harness.score_log` and `harness.probe` (re-exported by `harness/__init__.py`):

    config = harness.load_config({"name": "mine", "models": ["tiny-random-llama"], ...})
    plan = harness.plan(config)            # every unit, its key and token budget; nothing runs
    print(plan.totals.of("tiny-random-llama").planned)
    run = harness.run(config)              # every stage; returns the run folder, typed
    summary = run.frame(SummaryRow)        # summary.csv, columns typed by its row model
    run.records[0].continuation, run.manifest.timings

Bad input raises `harness.UserError` (one line naming the problem) before anything is
written. No process-wide patch is installed: engine processes are bound to this process only
while an engine starts (`engines.lifetime.engine_children_bound`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from harness.config.files import check_run_config, load_run_config_and_suites, load_suite
from harness.config.run import RunConfig, ScoringConfig, TaskSuite
from harness.errors import UserError
from harness.pipeline import run_plan, run_probe, run_score
from harness.report.load import run_files
from harness.results import ResultRow
from harness.results.base import column_kind
from harness.results.manifest import RunManifest
from harness.stages.base import output_frame
from harness.text.records import GenerationRecord
from harness.units.plan import RunPlan, plan_config, plan_score
from harness.units.probe_plan import ProbeFlags, plan_probe, probe_request

if TYPE_CHECKING:  # annotations only: pandas loads where frames are read
    import pandas as pd

ConfigSource = str | Path | Mapping[str, Any] | RunConfig
_GIVEN = Path("<config>")  # how errors name a config given as a mapping or a model


def load_config(source: ConfigSource, base: str | Path | None = None) -> RunConfig:
    """A run config from a YAML file, a mapping (as the YAML would parse) or a RunConfig,
    checked as `harness run` checks it (suites exist and parse, items and models known).
    Its relative suite paths are made absolute: against the working directory, else the
    file's folder (a file), else `base` (a mapping or a model; default: the working
    directory). So the config plans and runs from wherever it is passed."""
    config, _, path = _load(source, base)
    suites = [_absolute(path, suite) for suite in config.suites]
    update: dict[str, Any] = {"suites": suites}
    if config.scoring.validation is not None:  # resolved as `harness run` resolves it
        validation = _absolute(path, config.scoring.validation)
        update["scoring"] = config.scoring.model_copy(update={"validation": validation})
    return config.model_copy(update=update)


def _load(
    source: ConfigSource, base: str | Path | None = None
) -> tuple[RunConfig, list[TaskSuite], Path]:
    """The config, its suites (each file parsed once) and the path its relative paths resolve
    against: the file, or `<config>` in `base` (a mapping or a model)."""
    if isinstance(source, str | Path):
        path = Path(source)
        config, suites = load_run_config_and_suites(path)
        return config, suites, path
    data = source.model_dump() if isinstance(source, RunConfig) else dict(source)
    path = Path(base or ".") / _GIVEN
    if isinstance(data.get("suites"), list):  # errors name the config as <config>
        data["suites"] = [_absolute(path, Path(s)) if isinstance(s, str | Path) else s
                          for s in data["suites"]]  # fmt: skip
    config, suites = check_run_config(data, _GIVEN)
    return config, suites, path


def _absolute(config_path: Path, suite: Path) -> Path:
    """A suite path as `harness run` resolves it, made absolute (kept as given when it is
    nowhere, so the error names it as the user wrote it)."""
    if suite.is_absolute():
        return suite
    for where in (suite, config_path.parent / suite):
        if where.exists():
            return where.resolve()
    return suite


def plan(
    config: ConfigSource,
    out: str | Path | None = None,
    until_decided: bool = False,
    max_samples: int | None = None,
) -> RunPlan:
    """The run's plan: its units (`.units`: every generation, fork, probe pair and judge
    call with its cache key and token budget) and `.totals` per serving model; checks every
    input and writes nothing (`out`: the run folder, default reports/<name>). `harness run`
    plans through here: a file's relative paths (suites, `scoring.validation`) resolve against
    its folder, a mapping's against `<config>` in the working directory. `until_decided`,
    `max_samples`: as `harness run --until-decided --max-samples`."""
    loaded, suites, path = _load(config)
    target = Path(out) if out else None
    return plan_config(loaded, suites, path, target, until_decided, max_samples)


def run(
    config: ConfigSource | RunPlan,
    out: str | Path | None = None,
    fresh: bool = False,
    progress: bool = False,
    until_decided: bool = False,
    max_samples: int | None = None,
) -> Run:
    """Run every stage (resumable: a second call with the same folder reuses every unit);
    returns the run folder as a `Run`. `harness run` runs through here."""
    if isinstance(config, RunPlan):
        the_plan = config
    else:
        the_plan = plan(config, out, until_decided, max_samples)
    return Run(run_plan(the_plan, fresh=fresh, show_progress=progress))


@dataclass(frozen=True)
class Run:
    """A run folder (`harness run`'s, or `harness score`'s): its CSVs as typed frames, its
    records and manifest."""

    folder: Path

    def frame(self, row: type[ResultRow]) -> pd.DataFrame:
        """`row.file` of the run, its columns typed by the row model (booleans as booleans);
        an empty frame when the run wrote none (a file an earlier run left in the folder is
        not the run's: `run_files`)."""
        frame = output_frame(row, run_files(self.folder).get(row.file))
        # a float column whose cells all read as whole numbers stays float (auc 0, not int 0)
        floats = [c for c in frame.columns if column_kind(row, c)[0] == "float"]
        return frame.astype(dict.fromkeys(floats, "float64")) if floats else frame

    @cached_property
    def records(self) -> list[GenerationRecord]:
        """generations.jsonl: every record generated (and logged, for replays)."""
        path = run_files(self.folder).get("generations.jsonl")
        if path is None:
            return []
        with path.open() as lines:
            return [GenerationRecord.model_validate_json(line) for line in lines if line.strip()]

    @cached_property
    def manifest(self) -> RunManifest:
        path = self.folder / "manifest.json"
        if not path.is_file():
            raise UserError(f"{path}: file not found (the run did not finish)")
        return RunManifest.model_validate_json(path.read_text())


def score_log(
    log: str | Path,
    suites: list[str | Path],
    out: str | Path,
    window: int = 64,
    model: str | None = None,
    log_format: str = "auto",
) -> Run:
    """`harness score` on a chat log (chat, inspect or otel lines) against the suites' items:
    windows.csv, turns.csv, conversations.csv and the report in `out`."""
    try:
        scoring = ScoringConfig(window=window)
    except ValueError as exc:  # pydantic's ValidationError is a ValueError
        raise UserError(f"window: {exc}") from None
    loaded = [load_suite(Path(path)) for path in suites]
    score_plan = plan_score(Path(log), loaded, Path(out), scoring, model, log_format=log_format)
    run_score(score_plan)
    return Run(score_plan.out_dir)


def probe(out: str | Path, fresh: bool = False, **flags: Any) -> Run:
    """`harness probe` from Python: `flags` are its options by name (`model`, `system_a`,
    `system_b`, `user`, `continuation`, `tokens`, ...: `probe_plan.ProbeFlags`); the pair's
    divergence, fits and continuations in `out`, a run's own files (`Run.frame(FitRow)`; a
    second call resumes from its cache)."""
    try:
        given = ProbeFlags(**flags)
    except ValidationError as exc:
        error = exc.errors()[0]
        raise UserError(f"probe: {'.'.join(map(str, error['loc']))}: {error['msg']}") from None
    run_probe(plan_probe(probe_request(given), Path(out), fresh))
    return Run(Path(out))
