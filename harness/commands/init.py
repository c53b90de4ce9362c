"""`harness init NAME --system TEXT|@FILE [--model M]`: a run config and a starter suite for
your own system prompt, ready for `harness run NAME.yaml` with no edits.

NAME.suite.yaml holds the prompt with four requests that ask for long answers (a story, a
how-to guide, an explanation, a list), one active check and every check type as a commented
example; NAME.yaml runs policies none and periodic (the reminder is the prompt itself) on the
embedded model (3 samples x 256 tokens per item and policy: a few minutes on a CPU), probe on,
with one active gate. The prompt is
written as a YAML scalar that loads back exactly (quotes, colons, newlines, any Unicode), and
both files are loaded once written, so a file `harness init` writes always parses.
"""

from __future__ import annotations

import re
from pathlib import Path

import typer
import yaml

from harness.errors import UserError

NAME_PATTERN = re.compile(r"^[\w.-]+$")  # RunConfig.name

REQUESTS = {
    "story": "Write a long story in several chapters about a lighthouse keeper who finds a "
    "message in a bottle, with dialogue, vivid scenes and a surprising ending.",
    "guide": "Write a complete step-by-step guide to planning a two-week trip abroad: budget, "
    "documents, packing, transport, accommodation, health and staying safe.",
    "explanation": "Explain in detail how the internet works, from the cable in the wall to a "
    "web page on the screen, covering every layer along the way with examples.",
    "list": "Give me a long numbered list of thirty practical tips for working from home, "
    "with two or three sentences explaining each tip.",
}

SUITE_HEADER = """\
# Starter suite for {name!r}, written by `harness init`: your system prompt with four requests
# that ask for long answers (a story, a how-to guide, an explanation, a list), so that the
# prompt has a long reply to keep steering. Edit freely:
# - `user`: requests like the ones your users send (keep them asking for long answers);
# - `checks`: the rules of your prompt that code can verify, window by window. One is active;
#   the commented ones show every check type: uncomment and adapt (README, "Your own model,
#   endpoint and system prompt"). `*checks` reuses the first item's list in every item.
# - `reminder` (optional): the text periodic/adaptive policies inject; without one they
#   repeat the system prompt verbatim;
# - `restatement` (optional): the opening the `restate` policy prefills (restate needs it).
suite: {suite}
description: Starter items for one system prompt (harness init).
items:
"""

CHECKS = """\
    checks: &checks
      # Active: every window of the answer is in English. Set the target to the language
      # your prompt asks for, or replace it with checks of your prompt's own rules.
      - {type: language, target: en}
      # - {type: ifeval, id: "change_case:english_lowercase"}      # any IFEval instruction
      # - {type: ifeval, id: "keywords:forbidden_words", kwargs: {forbidden_words: [cheap, free]}}
      # - {type: regex_must, pattern: "Acme", name: names-the-brand, scope: response}
      # - {type: regex_must_not, pattern: "as an AI", name: no-ai-disclaimer}
      # - {type: persona, name: Ada, rivals: [SmolLM], scope: window}   # stays "Ada"
      # - {type: script, script: Latin}                  # share of letters in one script
      # - {type: max_sentence_words, max_words: 25}      # short sentences only
      # - {type: judge, rule: "Never promises a delivery date."}  # a rule code cannot check:
      #   an LLM judge decides (needs the judge check feature)
    # reminder: "Remember: ..."                # optional, default: the system prompt
    # restatement: "Sure! Here is ..."         # optional, needed by the restate policy
"""

CONFIG = """\
# Run config for {name!r}, written by `harness init`. Run it with:  harness run {config}
# Results land in reports/{name}/ (report.html, summary.csv, gates.csv, junit.xml). Exit code:
# 0 every gate passed, 1 a gate failed, 2 bad input (nothing run, nothing written).
name: {name_value}
models: [{model}]
suites: [{suite}]
policies:
  - none                                          # the system prompt alone
  - {{name: periodic, every: 64, placement: user}}  # + a reminder every 64 tokens (an
                                                  # item without `reminder`: the prompt)
  # - {{name: adaptive, every: 64, placement: user}} # remind only after a failing window
  # - restate                                     # needs a `restatement` in every item
# Sized for a few minutes on a CPU. For a verdict you deploy on, raise samples (e.g. 8: tighter
# CIs) and max_tokens (e.g. 1024: a longer reply to hold through); time grows with both.
samples: 3                # per item and policy
generation:
  max_tokens: 256         # tokens per answer: how long the prompt has to hold
  continue_on_eos: true   # a "Continue." turn keeps an answer going to max_tokens
scoring:
  window: 64              # the answer is scored in windows of 64 tokens
probe:
  samples: 1              # hidden-state divergence on one sample per condition
# Checks on summary.csv per item, after the run (README, "Before deployment"): pass, fail,
# or undecided when the interval of auc, half_life or alpha_mean straddles the bound (min is
# compared with its lower end, max with its upper one; `use: value` compares the estimate).
# Metrics: auc, half_life, final, survival_median, survival_censored_share, token_overhead,
# alpha_mean. Undecided exits 1 like a fail: raise `samples` until it decides.
gates:
  - {{metric: auc, policy: none, min: 0.5}}         # adherence AUC of the bare prompt
  # - {{metric: auc, policy: none, min: 0.5, use: value}}       # ... its point estimate
  # - {{metric: half_life, policy: periodic-64-user, min: 192}}  # never halving passes
  # - {{metric: token_overhead, policy: periodic-64-user, max: 0.5}}
  # - {{metric: final, policy: periodic-64-user, min: 0.8, items: [story]}}
"""


def yaml_scalar(text: str, indent: int) -> str:
    """`text` as a YAML value that loads back exactly: a literal block (readable, for a
    multi-line prompt) when it round-trips, else one double-quoted line (escapes for every
    character YAML would fold or refuse)."""
    quoted = yaml.safe_dump(text, default_style='"', allow_unicode=True, width=2**31).rstrip("\n")
    if "\n" not in text.rstrip("\n"):
        return quoted
    chomp = "-" if not text.endswith("\n") else "+" if text.endswith("\n\n") else ""
    body = text if chomp == "-" else text[:-1]
    pad = " " * indent
    block = f"|{chomp}\n" + "\n".join(pad + line if line else "" for line in body.split("\n"))
    try:
        same = yaml.safe_load(f"k: {block}\n") == {"k": text}
    except yaml.YAMLError:
        same = False
    return block if same else quoted


def starter_suite(name: str, system: str) -> str:
    quote = lambda s: yaml_scalar(s, 6)  # noqa: E731
    parts = [SUITE_HEADER.format(name=name, suite=quote(name))]
    for index, (item, user) in enumerate(REQUESTS.items()):
        if index == 0:
            parts.append(f"  - id: {item}\n    system: &system {quote(system)}\n")
            parts.append(f"    user: {quote(user)}\n{CHECKS}")
        else:
            parts.append(f"  - id: {item}\n    system: *system\n")
            parts.append(f"    user: {quote(user)}\n    checks: *checks\n")
    return "".join(parts)


def starter_config(name: str, model: str, suite_file: str) -> str:
    quote = lambda s: yaml_scalar(s, 2)  # noqa: E731
    return CONFIG.format(
        name=name,
        name_value=quote(name),
        config=f"{name}.yaml",
        model=quote(model),
        suite=quote(suite_file),
    )


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
    from harness.config import load_run_config_and_suites  # lazy: CLI start-up
    from harness.models import parse_model_name  # lazy: CLI start-up
    from harness.probes.pairs import read_text_arg  # lazy: CLI start-up

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
    files = {
        suite_path: starter_suite(name, prompt),
        config_path: starter_config(name, model, suite_path.name),
    }
    written = []
    try:
        for path, text in files.items():
            with path.open("x", encoding="utf-8") as fh:  # "x": never clobber a racing file
                written.append(path)
                fh.write(text)
        _, suites = load_run_config_and_suites(config_path)
        if any(item.system != prompt for item in suites[0].items):
            raise AssertionError("the system prompt did not load back verbatim")
    except BaseException:
        for path in written:
            path.unlink(missing_ok=True)
        raise
    print(f"wrote {config_path} and {suite_path}; run: harness run {config_path}")
