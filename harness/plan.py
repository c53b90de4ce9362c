"""A run's plan: the config, its suites parsed once, the selected items and the resolved models.

`plan_run` checks everything a bad input could break (config, suites, items, model names,
prompts against the context, the endpoint, the judges of judge checks) before the run folder
exists, so a bad input gets one line and exit code 2 and leaves nothing half-written.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from harness.config import RunConfig, TaskItem, TaskSuite, load_run_config_and_suites
from harness.errors import UserError
from harness.models import ResolvedModel, untrained_name


@dataclass(frozen=True)
class Selected:
    """One task item of the run, with the name of the suite it came from."""

    suite: str
    item: TaskItem


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


def select_items(config: RunConfig, suites: list[TaskSuite]) -> list[Selected]:
    """The config's items in suite order (every item when `items` is not given)."""
    wanted = set(config.items) if config.items else None
    return [
        Selected(suite=suite.suite, item=item)
        for suite in suites
        for item in suite.items
        if wanted is None or item.id in wanted
    ]


def plan_run(config_path: Path, out: Path | None = None) -> RunPlan:
    """Validate the whole run; raises `UserError` before anything is written."""
    from harness.models import resolve_model
    from harness.stages.generate import check_generation, engine_options

    config_path = Path(config_path)
    config, suites = load_run_config_and_suites(config_path)
    items = select_items(config, suites)
    out_dir = Path(out or config.out or Path("reports") / config.name)
    if out_dir.exists() and not out_dir.is_dir():
        raise UserError(f"--out {out_dir}: exists and is not a folder")
    models = [resolve_model(name) for name in config.models]
    for model in models:
        try:
            check_generation(config, items, model)
        except UserError as exc:  # name the config: the policy, item and field are in exc
            raise UserError(f"{config_path}: {exc}") from None
        if config.generation.engine == "openai":  # unreachable endpoint: fail before writing
            from harness.engines import make_engine

            make_engine("openai", model.path, **engine_options(config)).close()
    _check_judges(config, items)
    if config.probe.enabled:
        for model in models:
            _check_probe_layers(config, model)
    twins = (
        {m.name: resolve_model(untrained_name(m.name)) for m in models if m.source != "untrained"}
        if config.probe.enabled and config.probe.untrained_twin
        else {}
    )
    backends = (
        probe_backends(config.probe.backend, [*models, *twins.values()])
        if config.probe.enabled
        else {}
    )
    return RunPlan(config, suites, items, models, twins, out_dir, config.run_id(), backends)


def _check_judges(config: RunConfig, items: list[Selected]) -> None:
    """Judge checks' models resolve and have a chat template; openai judges answer."""
    from harness.scoring.judge import JudgeDefaults, check_judges, judge_checks_of

    checks = judge_checks_of(sel.item for sel in items)
    if checks:
        check_judges(JudgeDefaults(config.models[0], config.generation), checks)


def _check_probe_layers(config: RunConfig, model: ResolvedModel) -> None:
    """probe.layers against the model's depth, so a bad index fails before generation."""
    import json

    from harness.probes.divergence import resolve_layers

    if config.probe.layers == "all":
        return
    depth = json.loads((model.path / "config.json").read_text()).get("num_hidden_layers")
    if depth is None:
        return  # an unusual config: the probe itself checks against the loaded model
    try:
        resolve_layers(list(config.probe.layers), depth + 1)
    except UserError as exc:
        raise UserError(f"field 'probe.layers': {model.name}: {exc}") from None


def probe_backends(backend: str, models: list[ResolvedModel]) -> dict[str, str]:
    """The probe backend of each model: `auto` becomes vllm where vLLM can hand out this
    model's hidden states on this machine, else hf; an explicit `vllm` that cannot is an
    error now, before generation."""
    if backend == "hf":
        return {m.name: "hf" for m in models}
    from harness.probes.vllm_backend import vllm_support

    chosen = {}
    for model in models:
        why = vllm_support(model.path)
        if why and backend == "vllm":
            raise UserError(f"field 'probe.backend': vllm cannot probe {model.name}: {why}")
        chosen[model.name] = "hf" if why else "vllm"
    return chosen
