"""`harness score LOGS.jsonl --suite tasks/x.yaml --out DIR`: windows.csv + adherence; a chat
log (OpenAI chat JSONL, an Inspect AI eval log or OpenTelemetry GenAI spans: `--format`) also
gets turns.csv, turn_adherence.csv, conversations.csv and report.html."""

from __future__ import annotations

from pathlib import Path

import typer

from harness.errors import UserError


def score_command(
    generations: Path = typer.Argument(
        ...,
        help="generations.jsonl (harness records), JSONL of {item, text}, or a chat log "
        '(one conversation per line: {"messages": [...], "id"?, "item"?} or a list of messages).',
    ),
    suite: list[Path] = typer.Option(..., "--suite", help="Task suite YAML (repeatable)."),
    out: Path = typer.Option(..., "--out", help="Output folder."),
    window: int = typer.Option(64, "--window", min=1, help="Generated tokens per window."),
    sentence_aligned: bool = typer.Option(
        False, "--sentence-aligned", help="Close windows at sentence ends (about --window)."
    ),
    model: str = typer.Option(
        None,
        "--model",
        help="Model whose tokenizer splits the text (default: the record's "
        "model, else the embedded model).",
    ),
    item: str = typer.Option(
        None,
        "--item",
        help="Chat logs: the item of every conversation that names none and whose system "
        "message is no item's system (or is the system of several items).",
    ),
    worst: int | None = typer.Option(
        None,
        "--worst",
        min=1,
        help="Chat logs: the failing conversations the report shows [default: 20].",
    ),
    no_text: bool = typer.Option(
        False, "--no-text", help="Chat logs: leave every text of the log out of the report."
    ),
    gates_file: Path = typer.Option(
        None,
        "--gates",
        help="YAML with a `gates:` list (a run config will do), checked with the suites' own "
        "`gates:` on what was scored: gates.csv and junit.xml; exit 1 on a failed or "
        "undecided gate. Its `stats:` (level, family: holm, the default, bonferroni or none) "
        "sets their error budget, as in a run.",
    ),
    log_format: str = typer.Option(
        "auto",
        "--format",
        help="The log's format: chat (OpenAI chat JSONL), inspect (an Inspect AI eval log), "
        "otel (OpenTelemetry GenAI spans, OTLP/JSON, semconv 1.37.0), or auto (by content).",
    ),
) -> None:
    """Score transcripts window by window (chat logs turn by turn too); write the CSVs."""
    from harness.analysis.gate_rows import gate_name  # lazy: CLI start-up
    from harness.config.files import load_suite  # lazy: CLI start-up
    from harness.config.gate_specs import GateSpec  # lazy: CLI start-up
    from harness.config.run import ScoringConfig  # lazy: CLI start-up
    from harness.interop import FORMATS, detect_format  # lazy: CLI start-up
    from harness.pipeline import run_score  # lazy: CLI start-up
    from harness.results import GateRow  # lazy: CLI start-up
    from harness.scoring.io import score_files  # lazy: CLI start-up
    from harness.stages.gates import score_gates  # lazy: CLI start-up
    from harness.stages.logs import LogDigests  # lazy: CLI start-up
    from harness.text.chatlogs import is_chat_log  # lazy: CLI start-up
    from harness.units.plan import plan_score  # lazy: CLI start-up

    suites = [load_suite(path) for path in suite]
    gates = [GateSpec.model_validate(g) for s in suites for g in s.gates]
    gates += load_gates(gates_file)
    stats = gate_stats(gates_file)
    run_policies = config_policies(gates_file)
    try:
        config = ScoringConfig(window=window, sentence_aligned=sentence_aligned)
    except ValueError as exc:  # pydantic's ValidationError is a ValueError
        raise UserError(f"--window: {exc}") from None
    if log_format not in FORMATS:
        raise UserError(f"--format: '{log_format}' is not one of {', '.join(FORMATS)}")
    if log_format == "auto" and generations.is_file():
        log_format = detect_format(generations)
    chat = not (log_format == "chat" and not is_chat_log(generations))
    if chat:
        gates, skipped = log_gates(gates, run_policies)
        for line in skipped:
            typer.echo(line, err=True)
    check_score_gates(gates, suites, logged=chat)
    if not chat:
        if item is not None:
            raise UserError("--item: only for chat logs (lines with 'messages')")
        paths = score_files(generations, suites, out, config, model)
        for path in paths:
            typer.echo(str(path))
        scored = [Path(path).name for path in paths]
        verdicts = score_gates(
            out, suites, gates, stats.level, generations.name, scored, stats.family
        )
        for name in ("rules.csv", "rule_curves.csv", *(("gates.csv", "junit.xml") * bool(gates))):
            typer.echo(str(out / name))
    else:  # the gates are a stage of the log's, before its manifest and report
        plan = plan_score(
            generations, suites, out, config, model, item, worst, not no_text, log_format, gates,
            stats,
        )  # fmt: skip
        ctx = run_score(plan)
        for name in [*ctx.artifacts.files(), "report.html"]:
            typer.echo(str(out / name))
        scores = ctx.read(LogDigests)
        typer.echo(f"{scores.conversations} logged conversations scored", err=True)
        verdicts = ctx.frame(GateRow) if gates else None
    rows = [] if verdicts is None else verdicts.to_dict("records")
    failed = [row for row in rows if row["verdict"] != "pass"]
    for row in failed:
        typer.echo(f"{row['verdict'].upper()} {gate_name(row)}: {row['detail']}", err=True)
    if failed:
        raise typer.Exit(1)


def load_gates(path: Path | None) -> list:
    """The `gates:` of a YAML file (a run config, or a file of gates alone); [] without one."""
    from harness.config.gate_specs import GateSpec  # lazy: CLI start-up
    from harness.errors import UserError  # lazy: CLI start-up
    from harness.userfiles import read_user_text  # lazy: CLI start-up

    if path is None:
        return []
    import yaml
    from pydantic import TypeAdapter, ValidationError

    try:
        data = yaml.safe_load(read_user_text(path))
    except yaml.YAMLError as exc:
        raise UserError(f"{path}: not valid YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(data, dict) or not isinstance(data.get("gates"), list):
        raise UserError(f"{path}: --gates needs a YAML mapping with a `gates:` list")
    try:
        return TypeAdapter(list[GateSpec]).validate_python(data["gates"])
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise UserError(f"{path}: gates.{where}: {err['msg']}") from None


def gate_stats(path: Path | None):
    """The `stats:` of the `--gates` file (`StatsConfig`: its level and family), as a run
    reads its own: one false-verdict budget over the gates (Holm) unless it says otherwise;
    the defaults without a file or without `stats:`."""
    from harness.config.run import StatsConfig  # lazy: CLI start-up
    from harness.userfiles import read_user_text  # lazy: CLI start-up

    if path is None:
        return StatsConfig()
    import yaml
    from pydantic import ValidationError

    data = yaml.safe_load(read_user_text(path))  # load_gates has read it: a mapping
    try:
        return StatsConfig.model_validate(data.get("stats") or {})
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise UserError(f"{path}: stats.{where}: {err['msg']}") from None


def config_policies(path: Path | None) -> set[str]:
    """The policy labels of a run config given as `--gates` (`RunConfig.policy_labels`);
    none for a file of gates alone, or one that is no valid run config."""
    if path is None:
        return set()
    import yaml
    from pydantic import ValidationError

    from harness.config.run import RunConfig  # lazy: CLI start-up
    from harness.userfiles import read_user_text  # lazy: CLI start-up

    data = yaml.safe_load(read_user_text(path))  # load_gates has read it: a mapping
    if "policies" not in data:
        return set()
    try:
        return set(RunConfig.model_validate(data).policy_labels())
    except ValidationError:  # its gates on reminder policies are then refused, named
        return set()


def log_gates(gates: list, run_policies: set[str]) -> tuple[list, list[str]]:
    """The gates that judge a chat log, and a line for each one left out. A log holds the
    deployed prompt's conversations, without reminders: policy `none`'s, so a gate on `none`
    judges them (as policy `logged`, their label in the files). A gate on a reminder policy the
    run config runs cannot be judged on a log and is left out, said so on stderr; any other
    policy stays, and `check_score_gates` names it."""
    from harness.config.policy_specs import BASELINE  # lazy: CLI start-up

    kept, skipped = [], []
    for index, gate in enumerate(gates):
        if gate.policy == BASELINE:
            kept.append(gate.model_copy(update={"policy": LOGGED}))
        elif gate.policy in run_policies:
            skipped.append(
                f"gates[{index}]: policy '{gate.policy}' left out: a chat log holds no "
                "reminders (gates on 'none' judge its conversations)"
            )
        else:
            kept.append(gate)
    return kept, skipped


# the policy label of a chat log's conversations in every file `harness score` writes
LOGGED = "logged"


def check_score_gates(gates: list, suites: list, logged: bool) -> None:
    """Every gate judges some unit of what is scored, before anything is: a chat log's
    conversations are policy `logged`; a file of records or texts has its own policies (so
    only the rule and the metric are checked before it is read)."""
    from harness.config.gate_specs import gate_problem, gate_unit_problem  # lazy: CLI start-up

    items = {i.id: i for s in suites for i in s.items}
    for index, gate in enumerate(gates):
        policies = [LOGGED] if logged else [gate.policy]
        models = [gate.model] if gate.model else []
        problem = gate_problem(gate, [gate.policy], models, probe=False)
        if not problem and gate.policy not in policies:
            problem = (
                f"policy '{gate.policy}' matches no unit: a chat log's conversations are "
                "the prompt without reminders (policy 'none', scored as 'logged')"
            )
        unknown = [i for i in gate.items or [] if i not in items]
        if not problem and unknown:
            problem = f"item '{unknown[0]}' is in none of the suites"
        if not problem:
            covered = [items[i] for i in gate.items or items]
            problem = gate_unit_problem(gate, covered, policies, policies)
        if problem:
            raise UserError(f"gates[{index}]: {problem}")
