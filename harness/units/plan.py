"""A run's plan: the config, its suites parsed once, the selected items and the resolved models.

`plan_run` checks everything a bad input could break (config, suites, items, model names,
prompts against the context, the endpoint, the judges of judge checks) before the run folder
exists, so a bad input gets one line and exit code 2 and leaves nothing half-written.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from harness.config.files import load_run_config_and_suites
from harness.config.run import (
    GenerationConfig,
    RunConfig,
    ScoringConfig,
    StatsConfig,
    TaskSuite,
)
from harness.config.sampling import SampleRange
from harness.engines.kinds import preflight
from harness.engines.options import model_of
from harness.engines.positions import ByteBound
from harness.engines.refusals import refuse_unsupported
from harness.errors import UserError
from harness.models import (
    EMBEDDED_MODEL,
    ResolvedModel,
    locate_model,
    model_files,
    untrained_name,
)
from harness.probes.endpoint import endpoint_settings
from harness.scoring.inputs import score_run_id
from harness.scoring.io import load_tokenizer
from harness.scoring.judge import JudgeDefaults, check_judges, judge_checks_of
from harness.scoring.logged import check_logs
from harness.scoring.matching import ItemMatcher
from harness.scoring.score import item_checks
from harness.scoring.validation import read_labelled
from harness.text.chat import ChatFormat
from harness.units.budgets import with_budgets
from harness.units.plan_checks import (
    check_generation,
    check_probe_layers,
    check_run_judges,
    check_turn_budget,
    check_twin,
    probe_backends,
)
from harness.units.replay import LogError
from harness.units.run_units import (
    PlanTotals,
    Unit,
    generation_units,
    mark_cached,
    plan_totals,
)
from harness.units.selection import Selected, select_items
from harness.units.sequential import fixed_batches


@dataclass
class RunPlan:
    config: RunConfig
    suites: list[TaskSuite]
    items: list[Selected]
    models: list[ResolvedModel]
    twins: dict[str, ResolvedModel]  # trained model name -> its untrained twin
    out_dir: Path
    run_id: str
    probe_backends: dict[str, str] = field(default_factory=dict)  # probe model -> vllm | hf
    # every generation, fork, probe pair and judge call, with its key and budget
    units: list[Unit] = field(default_factory=list)

    @property
    def totals(self) -> PlanTotals:
        """Per serving model: the requests and tokens planned and already cached."""
        return plan_totals(self.units)


@dataclass
class ScorePlan:
    """`harness score` on a chat log, validated (`plan_score`)."""

    logs: Path
    suites: list[TaskSuite]
    config: ScoringConfig
    out_dir: Path
    model: str  # whose tokenizer and chat template render the log; judges default to it
    matcher: ItemMatcher  # every line already matched (its notes: `shared_notes`)
    judges: JudgeDefaults
    tokenizer: object = None  # the model's (loaded last: after the log is checked)
    judge_checks: list = field(default_factory=list)
    item: str | None = None
    worst: int | None = None  # the report's failing conversations shown
    with_text: bool = True
    log_format: str = "auto"  # chat, inspect or otel (`harness.interop.FORMATS`)
    run_id: str = ""  # the rows' run_id (`scoring.inputs.score_run_id`)
    # the gates checked on what is scored (the suites' and `--gates`'), already checked
    # against the log (`commands.score.check_score_gates`): gates.csv, junit.xml
    gates: list = field(default_factory=list)
    # the gates' level and family (`--gates`' `stats:`, as a run's): Holm by default
    stats: StatsConfig = field(default_factory=StatsConfig)


def plan_score(
    logs: Path, suites: list[TaskSuite], out: Path, config: ScoringConfig, model: str | None = None,
    item: str | None = None, worst: int | None = None, with_text: bool = True,
    log_format: str = "auto", gates: list | None = None, stats: StatsConfig | None = None,
) -> ScorePlan:  # fmt: skip
    """Every check before anything is written: `--item`, the items' checks, the output
    folder, the judges, every line of the log parsed and matched (one `file:line` UserError),
    then the model's tokenizer loaded (a bad model name fails here too)."""
    matcher = ItemMatcher(suites, item)
    for _, entry in matcher.index.values():
        item_checks(entry, config.languages)  # a bad check fails before the log is read
    if out.exists() and not out.is_dir():
        raise UserError(f"{out}: exists and is not a folder")
    name = model or EMBEDDED_MODEL
    judge_checks = judge_checks_of(entry for _, entry in matcher.index.values())
    judges = JudgeDefaults(name, GenerationConfig())
    if judge_checks:
        check_judges(judges, judge_checks)
    check_logs(logs, matcher, log_format)
    run_id = score_run_id(Path(logs), suites, config, model=name, item=item, format=log_format)
    return ScorePlan(
        Path(logs), list(suites), config, Path(out), name, matcher, judges, load_tokenizer(name),
        judge_checks, item, worst, with_text, log_format, run_id, list(gates or []),
        stats or StatsConfig(),
    )  # fmt: skip


# `--until-decided` without `--max-samples`: up to this many samples per condition
DEFAULT_MAX_SAMPLES = 64


def until_decided(config: RunConfig, path: Path, max_samples: int | None) -> RunConfig:
    """The config sampling until decided (`harness run --until-decided`): min = its samples
    (or its range's min), max = `max_samples`, else its range's max, else 64."""
    current = config.sequential
    low = current.min if current else config.samples
    high = max_samples or (current.max if current else DEFAULT_MAX_SAMPLES)
    where = f"{path}: --until-decided"
    if low < 2:
        raise UserError(f"{where}: samples {low} is below 2 (an interval needs two samples)")
    if low > high:
        raise UserError(f"{where}: samples {low} is more than --max-samples {high}")
    batch = current.batch if current else None
    fields = {name: getattr(config, name) for name in type(config).model_fields}
    try:
        return RunConfig.model_validate(
            {**fields, "samples": SampleRange(min=low, max=high, batch=batch)}
        )
    except ValidationError as exc:
        raise UserError(
            f"{where}: {exc.errors()[0]['msg'].removeprefix('Value error, ')}"
        ) from None


def plan_run(
    config_path: Path,
    out: Path | None = None,
    sample_until_decided: bool = False,
    max_samples: int | None = None,
) -> RunPlan:
    """Validate the whole run; raises `UserError` before anything is written."""
    config_path = Path(config_path)
    config, suites = load_run_config_and_suites(config_path)
    return plan_config(config, suites, config_path, out, sample_until_decided, max_samples)


def plan_config(
    config: RunConfig,
    suites: list[TaskSuite],
    config_path: Path,
    out: Path | None = None,
    sample_until_decided: bool = False,
    max_samples: int | None = None,
) -> RunPlan:
    """`plan_run` of a config already parsed with its suites; `config_path` names it in
    errors (a file, or what the Python API was given)."""
    if sample_until_decided:
        config = until_decided(config, config_path, max_samples)
    elif max_samples is not None:
        raise UserError("--max-samples needs --until-decided")
    items = select_items(config, suites)
    try:
        check_turn_budget(config, items)
        check_twin(config, items)
    except UserError as exc:
        raise UserError(f"{config_path}: {exc}") from None
    out_dir = Path(out or config.out or Path("reports") / config.name)
    if out_dir.exists() and not out_dir.is_dir():
        raise UserError(f"--out {out_dir}: exists and is not a folder")
    try:  # before anything else is sent or loaded
        refuse_unsupported(config)
    except UserError as exc:
        raise UserError(f"{config_path}: {exc}") from None
    models = [model_of(name, config.generation) for name in config.models]
    twin_names = _twin_names(config, models)
    run_id = config.run_id()
    units: list[Unit] = []
    for model in models:
        model_units = generation_units(config, model, items, fixed_batches(config), run_id)
        try:
            chat = check_generation(config, items, model, model_units)
            if model.source == "hosted":  # a provider's tokens, bounded (harness.units.budgets)
                chat = ChatFormat(ByteBound())
            units += with_budgets(config, chat, model, model_units, twin_names.get(model.name))
        except LogError:  # names the log's file and line itself
            raise
        except UserError as exc:  # name the config: the policy, item and field are in exc
            raise UserError(f"{config_path}: {exc}") from None
        # e.g. an unreachable endpoint, before writing; the model's files: nothing is built
        preflight(config.generation, model_files(model))
    check_run_judges(config, items)
    if config.scoring.validation is not None:
        config = labelled_file(config_path, config)
    if config.probe.enabled:
        for model in models:
            check_probe_layers(config, model)
    # located, not built: the probe stage builds a twin when it needs its weights
    twins = {name: locate_model(twin) for name, twin in twin_names.items()}
    backends = (
        probe_backends(config.probe.backend, [*models, *twins.values()], endpoint_settings(config))
        if config.probe.enabled
        else {}
    )
    units = mark_cached(units, out_dir)
    return RunPlan(config, suites, items, models, twins, out_dir, run_id, backends, units)


def _twin_names(config: RunConfig, models: list[ResolvedModel]) -> dict[str, str]:
    """Trained model name -> its untrained twin's, where the probe runs the twin too."""
    if not (config.probe.enabled and config.probe.untrained_twin):
        return {}
    return {m.name: untrained_name(m.name) for m in models if m.source != "untrained"}


def labelled_file(path: Path, config: RunConfig) -> RunConfig:
    """The config with `scoring.validation` made absolute (relative to the working directory,
    else the config's folder, as suites), its every line read before the first token: a
    missing file or a bad line is one error naming the file (and line)."""
    given = config.scoring.validation
    resolved = given if given.is_absolute() or given.exists() else path.parent / given
    if not resolved.is_file():
        raise UserError(f"{path}: field 'scoring.validation': {given}: file not found")
    read_labelled(resolved)
    scoring = config.scoring.model_copy(update={"validation": resolved.resolve()})
    return config.model_copy(update={"scoring": scoring})
