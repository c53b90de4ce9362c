"""`harness init NAME --system TEXT|@FILE [--model M]`: a run config and a starter suite for
your own system prompt, ready for `harness run NAME.yaml` with no edits.

NAME.suite.yaml holds the prompt with four requests and two 5-turn conversations (one with a
pressure turn), phrased for a customer when the prompt describes a shop or a service, in the
language the prompt asks for (else its own), and an active check for each rule the prompt
states (`harness.starter.rules`: the language, a length, forbidden terms, a sign-off or
opening, a persona's name, a format; a judge check for the rest), each with its `rule:` and
`sentence:` and a comment saying what was found; every check type is a commented example.
NAME.yaml runs policies none and periodic on the single replies and none, periodic and
adaptive between turns on the conversations (none and adaptive where whole replies are
judged), on the embedded model (3 samples, a few minutes on a CPU), probe on, with one active
gate. Its token budget fits the rules (`harness.starter.budget`): long answers (256 tokens, 48
a conversation reply) for rules that hold window by window; for rules judged on a whole reply,
requests a few sentences answer and a reply's budget a bit above a word limit (single replies
and conversation replies alike). Both files
are loaded once written, so a file `harness init` writes always parses, as a config whose
conversations fit their token budget (`plan_checks.check_turn_budget`).
"""

from __future__ import annotations

import re
from pathlib import Path

import typer

from harness.errors import UserError

NAME_PATTERN = re.compile(r"^[\w.-]+$")  # RunConfig.name


def init_command(
    name: str = typer.Argument(..., help="Run name: writes NAME.yaml and NAME.suite.yaml here."),
    system: str = typer.Option(
        ..., "--system", help="Your system prompt: the text, or @FILE to read it from a file."
    ),
    model: str = typer.Option(
        "smollm2-135m-instruct", "--model", help="Model to run (any name `models:` takes)."
    ),
) -> None:
    """Write a run config and a starter suite for your system prompt (never overwrites)."""
    from harness.config.files import load_run_config_and_suites  # lazy: CLI start-up
    from harness.models import parse_model_name  # lazy: CLI start-up
    from harness.probes.pairs import read_text_arg  # lazy: CLI start-up
    from harness.starter.budget import budget_for  # lazy: CLI start-up
    from harness.starter.files import starter_config, starter_suite  # lazy: CLI start-up
    from harness.starter.language import choose_language  # lazy: CLI start-up
    from harness.starter.requests import starter_items  # lazy: CLI start-up
    from harness.starter.rules import stated_rules  # lazy: CLI start-up
    from harness.units.plan_checks import check_turn_budget  # lazy: CLI start-up
    from harness.units.selection import select_items  # lazy: CLI start-up

    if not NAME_PATTERN.match(name):
        raise UserError(f"NAME '{name}': use letters, digits, '_', '.' and '-' only")
    prompt = read_text_arg(system)
    if not prompt.strip():
        raise UserError("--system: the system prompt is empty")
    parse_model_name(model)
    config_path, suite_path = Path(f"{name}.yaml"), Path(f"{name}.suite.yaml")
    for path in (config_path, suite_path):
        if path.exists():
            raise UserError(f"{path}: already exists (harness init never overwrites a file)")
    choice = choose_language(prompt)
    rules = stated_rules(prompt, choice)
    budget = budget_for(rules, choice.code)
    starter = starter_items(prompt, choice, brief=budget.whole_replies)
    first = starter.items[0].id
    files = {
        suite_path: starter_suite(name, prompt, choice, starter, rules),
        config_path: starter_config(name, model, suite_path.name, first, budget),
    }
    written = []
    try:
        for path, text in files.items():
            with path.open("x", encoding="utf-8") as fh:  # "x": never clobber a racing file
                written.append(path)
                fh.write(text)
        config, suites = load_run_config_and_suites(config_path)
        if any(item.system != prompt for item in suites[0].items):
            raise AssertionError("the system prompt did not load back verbatim")
        check_turn_budget(config, select_items(config, suites))
    except BaseException:
        for path in written:
            path.unlink(missing_ok=True)
        raise
    print(f"wrote {config_path} and {suite_path}; run: harness run {config_path}")
    print(f"language check: {choice.comment()}")
    active = [rule.name for rule in rules if rule.active]
    print(f"{len(active)} rule(s) checked: {', '.join(active) or 'none'}")
