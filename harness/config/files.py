"""Reading run configs and suites from YAML files: one `file: field: problem` line (UserError)
for every way a file can be wrong, and the cross-checks a config's models, suites, items and
gates need before anything runs. The models themselves live in `harness.config.run`."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from pathlib import Path
from typing import Any, get_args

import yaml
from pydantic import BaseModel, ValidationError

from harness.config.gate_specs import GateSpec, gate_unit_problem
from harness.config.policy_specs import policy_label
from harness.config.run import RunConfig
from harness.config.suites import TaskSuite
from harness.errors import UserError
from harness.models import parse_model_name
from harness.userfiles import read_user_text


def _format_error(path: Path, exc: ValidationError, model: type[BaseModel]) -> str:
    err = exc.errors()[0]
    loc = ".".join(str(part) for part in err["loc"] if not str(part).startswith("function-"))
    where = f" field '{loc}':" if loc else ""
    return f"{path}:{where} {_message(err, model)}"


def _message(err: Any, model: type[BaseModel]) -> str:
    """A validation error's problem as the user reads it (`model`: the file's root)."""
    loc = ".".join(str(part) for part in err["loc"])
    msg = str(err["msg"]).removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        msg = "unknown key" + did_you_mean(str(err["loc"][-1]), _keys_at(model, err["loc"][:-1]))
    elif err["type"] == "union_tag_invalid":
        kind = "policy" if "policies" in loc else "check type"
        msg = f"unknown {kind}: {err['ctx']['tag']!r}"
        msg += f" (expected one of {err['ctx']['expected_tags']})"
    elif err["type"] == "union_tag_not_found":
        msg = f"missing '{err['ctx']['discriminator'].strip(chr(39))}'"
    return msg


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """The hint for a misspelt name, `(did you mean 'x'?)` with the closest known name, or ""
    where none is close."""
    close = difflib.get_close_matches(name, sorted(set(known)), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


def _keys_at(model: type[BaseModel], loc: tuple) -> set[str]:
    """The keys the config sections at `loc` (an error's location, its key left out) accept:
    the fields of every model the annotations along the way can hold (a list's items, an
    optional section, each member of a union; a union's tag in `loc` keeps the members whose
    literal it is)."""
    models = [model]
    for part in loc:
        if isinstance(part, int) or str(part).startswith("function-"):
            continue  # a list index or a validator's frame: the same models
        inner = [m for m in models if part in m.model_fields]
        if inner:
            models = [c for m in inner for c in _models_in(m.model_fields[part].annotation)]
        else:  # a tagged union's tag: its member
            tagged = [
                m
                for m in models
                if any(part in get_args(f.annotation) for f in m.model_fields.values())
            ]
            models = tagged or models
    return {name for m in models for name in m.model_fields}


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation can hold (through Optional, list, dict, unions)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in get_args(annotation) for m in _models_in(arg)]


def _read_yaml(path: Path) -> Any:
    if not path.is_file():
        raise UserError(f"{path}: file not found")
    try:
        data = yaml.safe_load(read_user_text(path))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark else ""
        raise UserError(f"{path}:{line} not valid YAML ({getattr(exc, 'problem', exc)})") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a mapping at the top level, got {type(data).__name__}")
    return data


def _validate(model: type[BaseModel], path: Path, data: Any) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise UserError(_format_error(path, exc, model)) from None


def load_suite(path: Path | str) -> TaskSuite:
    """A suite; a replay item's `log` is made absolute (it is relative to the suite file)
    and must be a file."""
    path = Path(path)
    suite = _validate(TaskSuite, path, _read_yaml(path))
    for index, gate in enumerate(suite.gates):
        try:
            GateSpec.model_validate(gate)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"])
            where = f"field 'gates.{index}" + (f".{where}'" if where else "'")
            raise UserError(f"{path}: {where}: {_message(err, GateSpec)}") from None
    for index, item in enumerate(suite.items):
        if item.log is None:
            continue
        resolved = item.log if item.log.is_absolute() else path.parent / item.log
        if not resolved.is_file():
            where = f"field 'items.{index}.log'"
            raise UserError(f"{path}: item '{item.id}': {where}: {item.log}: file not found")
        suite.items[index] = item.model_copy(update={"log": resolved.resolve()})
    return suite


def load_run_config(path: Path | str) -> RunConfig:
    """Parse and cross-check a run config (see `load_run_config_and_suites`)."""
    return load_run_config_and_suites(path)[0]


def load_run_config_and_suites(path: Path | str) -> tuple[RunConfig, list[TaskSuite]]:
    """Parse and cross-check a run config: suites exist and parse, items exist, models are
    known. Returns the suites too, so a run parses each suite file once."""

    path = Path(path)
    return check_run_config(_read_yaml(path), path)


def check_run_config(data: Any, path: Path) -> tuple[RunConfig, list[TaskSuite]]:
    """`load_run_config_and_suites` of a config given as a mapping or a RunConfig (the Python
    API's), `path` naming it in errors; relative suites resolve as beside a file `path`."""
    config: RunConfig = _validate(RunConfig, path, data)
    suites, suite_files = [], []
    for suite_path in config.suites:
        resolved = suite_path if suite_path.is_absolute() else _relative(path, suite_path)
        if not resolved.is_file():
            raise UserError(f"{path}: field 'suites': {suite_path}: file not found")
        suites.append(load_suite(resolved))
        suite_files.append(resolved)
    hosted = config.generation.engine == "chat"  # its models are names the endpoint knows
    for model in [] if hosted else config.models:
        try:
            parse_model_name(model)
        except UserError as exc:
            raise UserError(f"{path}: field 'models': {exc}") from None
    for suite_path, suite in zip(suite_files, suites, strict=True):
        for index, item in enumerate(suite.items):  # a simulated user's model is a zoo name
            sim = item.user_simulator
            if sim is not None and sim.model is not None and not hosted:
                try:
                    parse_model_name(sim.model)
                except UserError as exc:
                    where = f"field 'items.{index}.user_simulator.model'"
                    raise UserError(f"{suite_path}: item '{item.id}': {where}: {exc}") from None
    known = {item.id for suite in suites for item in suite.items}
    for item_id in config.items or []:
        if item_id not in known:
            raise UserError(f"{path}: field 'items': no task item '{item_id}' in the suites")
    run_items = config.items or [item.id for suite in suites for item in suite.items]
    by_id = {item.id: item for suite in suites for item in suite.items}
    single = [policy_label(p) for p in config.policies]
    talks = [policy_label(p) for p in config.conversation_policies or config.policies]
    for index, gate in enumerate(config.gates):
        for item_id in gate.items or []:
            if item_id not in run_items:
                raise UserError(f"{path}: gates[{index}]: item '{item_id}' is not in the run")
        items = [by_id[i] for i in gate.items or run_items]
        problem = gate_unit_problem(gate, items, single, talks)
        if problem:
            raise UserError(f"{path}: gates[{index}]: {problem}")
    return config, suites


def _relative(config_path: Path, suite_path: Path) -> Path:
    """Suite paths are relative to the working directory, else to the config's folder."""
    if suite_path.exists():
        return suite_path
    beside = config_path.parent / suite_path
    return beside if beside.exists() else suite_path
