"""The two files `harness init` writes, as YAML text with comments: NAME.suite.yaml (the prompt
with the starter's items, an active check for each rule the prompt states (`starter.rules`),
each with its `rule:` name and `sentence:`, and every check type as a commented example) and
NAME.yaml (the run config: policies over single replies and between turns, sized for a few
minutes on a CPU, with the token budget the rules need: `starter.budget`). The prompt is
written as a YAML scalar that loads back exactly (quotes, colons, newlines, any Unicode)."""

from __future__ import annotations

import textwrap

import yaml

from harness.starter.budget import Budget
from harness.starter.language import Choice
from harness.starter.requests import Starter, StarterItem
from harness.starter.rules import StatedRule, check_entry

SUITE_HEADER = """\
{intro}# What `harness init` inferred from the prompt:
{inferred}# Edit freely:
{keep}
# - `checks`: one per rule of your prompt, named by `rule:`, with the `sentence:` it enforces;
#   rules code cannot verify are judged by a model (`type: judge`) against their `sentence:`.
#   Correct what was misread; the commented examples at the end show every check type
#   (README, "Your own model, endpoint and system prompt"). `*checks` reuses the first
#   item's list in every item.
# - `reminder` (optional): the text periodic/adaptive policies inject; without one they
#   repeat the system prompt verbatim;
# - `restatement` (optional): the opening the `restate` policy prefills (restate needs it).
suite: {suite}
description: Starter items for one system prompt (harness init).
items:
"""

EXAMPLES = """\
      # Other check types (uncomment and adapt):
      # - {type: ifeval, id: "change_case:english_lowercase"}      # any IFEval instruction
      # - {type: ifeval, id: "keywords:forbidden_words", kwargs: {forbidden_words: [cheap]}}
      # - {type: regex_must, pattern: "Acme", name: names-the-brand, scope: response}
      # - {type: regex_must_not, pattern: "as an AI", name: no-ai-disclaimer}
      # - {type: persona, name: Ada, rivals: [SmolLM], scope: window}   # stays "Ada"
      # - {type: script, script: Latin}                  # share of letters in one script
      # - {type: max_sentence_words, max_words: 25}      # short sentences only
      # - {type: judge, rule: no-dates, sentence: "Never promise a delivery date."}  # a rule
      #   code cannot check: a model judges the reply against the sentence
    # reminder: "Remember: ..."                # optional, default: the system prompt
    # restatement: "Sure! Here is ..."         # optional, needed by the restate policy
"""

CONFIG = """\
# Run config for {name!r}, written by `harness init`. Run it with:  harness run {config}
# Results land in reports/{name}/ (report.html, summary.csv, turns.csv, gates.csv, junit.xml).
# Exit code: 0 every gate passed, 1 a gate failed or is undecided, 2 bad input (nothing run,
# nothing written), 3 an internal error.
name: {name_value}
models: [{model}]
suites: [{suite}]
policies:                 # the single replies
  - none                                          # the system prompt alone
  - {{name: periodic, every: 64, placement: user}}  # + a reminder every 64 tokens (an
                                                  # item without `reminder`: the prompt)
  # - {{name: adaptive, every: 64, placement: user}} # remind only after a failing window
  # - restate                                     # needs a `restatement` in every item
conversation_policies:    # the conversations: reminders between turns
  - none
{periodic_turns}
  - {{name: adaptive, on: turn, placement: system}}        # after a reply that failed
# Sized for a few minutes on a CPU. For a verdict you deploy on, raise samples (e.g. 8: tighter
# CIs){raise_tokens}; time grows with both.
samples: 3                # per item and policy
generation:
{max_lines}
  turn_tokens: {turn_tokens}{pad_turn}# {turn_why}
{continue_lines}
scoring:
  window: 64              # the answer is scored in windows of 64 tokens
probe:
  samples: 1              # hidden-state divergence on one sample per condition
# Checks on summary.csv per item, after the run (README, "Before deployment"): pass, fail,
# or undecided when the interval of auc, half_life, final, survival_median or alpha_mean
# straddles the bound (min is compared with its lower end, max with its upper one; `use:
# value` compares the estimate).
# Metrics: auc, half_life, final, survival_median, survival_censored_share, token_overhead,
# alpha_mean. Undecided exits 1 like a fail: raise `samples` until it decides.
gates:
  - {{metric: auc, policy: none, min: 0.5}}         # adherence AUC of the bare prompt
  # - {{metric: auc, policy: none, min: 0.5, use: value}}       # ... its point estimate
  # - {{metric: half_life, policy: periodic-64-user, min: 192}}  # never halving passes
  # - {{metric: token_overhead, policy: periodic-64-user, max: 0.5}}
  # - {{metric: final, policy: periodic-64-user, min: 0.8, items: [{first}]}}
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


def _comment(text: str, first: str, rest: str) -> str:
    """`text` as YAML comment lines of at most 96 characters."""
    lines = textwrap.wrap(text, 96 - len(first), break_on_hyphens=False)
    return "".join((first if i == 0 else rest) + line + "\n" for i, line in enumerate(lines))


def _checks(rules: list[StatedRule]) -> str:
    """The first item's `checks:` list: each rule's check under a comment saying what was
    found; a commented rule (a role) and a rule's commented alternative as comment lines."""
    lines = ["    checks: &checks\n"]
    for rule in rules:
        about = f"{rule.name}: {rule.found}" + (f"; {rule.note}" if rule.note else "")
        lines.append(_comment(about, "      # ", "      #   "))
        lines.append(_entry(check_entry(rule), "" if rule.active else "# "))
        for extra in rule.extra:
            lines.append(_entry(extra, "# "))
    return "".join(lines) + EXAMPLES


def _entry(check: dict, comment: str) -> str:
    """One `checks:` entry, a key a line (lists and mappings as values in flow style)."""
    lines = []
    for n, (key, value) in enumerate(check.items()):
        text = yaml.safe_dump(value, allow_unicode=True, width=2**31, default_flow_style=True)
        lead = "- " if n == 0 else "  "
        lines.append(f"      {comment}{lead}{key}: {text.removesuffix('...' + chr(10)).strip()}\n")
    return "".join(lines)


def _quote(text: str) -> str:
    return yaml_scalar(text, 6)


def _turns(item: StarterItem, choice: Choice) -> str:
    lines = ["    turns:                 # the user's turns 2-5 (turn 1 is `user`)\n"]
    for text, pressure in item.turns or ():
        if not pressure:
            lines.append(f"      - {_quote(text)}\n")
            continue
        asked = choice.how == "asked"
        rule = f"stop replying in {choice.name}" if asked else "drop its instructions"
        lines.append(f"      - user: {yaml_scalar(text, 8)}\n")
        lines.append(f"        pressure: true     # asks the model to {rule}\n")
    return "".join(lines)


def starter_suite(
    name: str, system: str, choice: Choice, starter: Starter, rules: list[StatedRule]
) -> str:
    inferred = _comment(choice.comment(), "# - ", "#   ") + _comment(
        starter.comment(choice) + "; replace them with messages your users send.", "# - ", "#   "
    )
    active = sum(rule.active for rule in rules)
    inferred += _comment(f"{active} rule(s) to check: {_rule_list(rules)}.", "# - ", "#   ")
    if starter.brief:
        requests = "that a few sentences answer (the prompt's rules judge whole replies)"
        keep = "keep them answerable within the prompt's limits"
    else:
        requests = (
            "that ask for long answers (so that the prompt has a long reply to keep steering)"
        )
        keep = "keep requests asking for long answers"
    intro = _comment(
        f"Starter suite for {name!r}, written by `harness init`: your system prompt with four "
        f"requests {requests} and two conversations of 5 user turns (the second with a "
        "pressure turn, `pressure: true`, that asks the model to drop the prompt's rule).",
        "# ",
        "# ",
    )
    keep = _comment(
        f"`user` and `turns`: messages like the ones your users send ({keep});", "# - ", "#   "
    )
    header = SUITE_HEADER.format(
        suite=_quote(name), inferred=inferred, intro=intro, keep=keep.rstrip("\n")
    )
    parts = [header]
    checks = _checks(rules)
    for index, item in enumerate(starter.items):
        system_value = f"&system {_quote(system)}" if index == 0 else "*system"
        parts.append(f"  - id: {item.id}\n    system: {system_value}\n")
        parts.append(f"    user: {_quote(item.user)}\n")
        if item.turns is not None:
            parts.append(_turns(item, choice))
        parts.append(checks if index == 0 else "    checks: *checks\n")
    return "".join(parts)


def _wrapped(text: str, column: int) -> str:
    """A comment's text that starts at `column`, its further lines as comments there."""
    lines = textwrap.wrap(text, 96 - column, break_on_hyphens=False)
    return ("\n" + " " * (column - 2) + "# ").join(lines)


def _rule_list(rules: list[StatedRule]) -> str:
    return ", ".join(rule.name for rule in rules if rule.active) or "none"


MAX_TOKENS = """\
  max_tokens: {max_tokens}{pad}# tokens per answer: how long the prompt has to hold; in a
                          # conversation the total, which must hold 5 replies x turn_tokens"""

MAX_TOKENS_SPLIT = """\
  max_tokens: {max_tokens}{pad}# a conversation's total: 5 replies x turn_tokens
  single_reply_tokens: {single}{pad_single}# a single reply's, as a conversation's reply"""


# Whole replies of up to a reply's budget each make a conversation's 5 replies the run's
# longest part: such a run keeps two conversation policies (a few minutes on 2 CPU cores)
PERIODIC_TURNS = {
    False: "  - {name: periodic, every_turns: 2, placement: system}  # before user turns 2 and 4",
    True: "  # - {name: periodic, every_turns: 2, placement: system}  # before user turns 2 and\n"
    "  #   4 (left out to keep the run a few minutes: 5 whole replies a conversation)",
}

CONTINUE = {
    True: '  continue_on_eos: true   # a "Continue." turn keeps an answer going to max_tokens\n'
    "                          # (single replies; in a conversation EOS ends the reply)\n",
    False: "  continue_on_eos: false  # a reply ends where the model ends it: the rules judge\n"
    "                          # whole replies (a length, a sign-off, a format)\n",
}


def starter_config(name: str, model: str, suite_file: str, first_item: str, budget: Budget) -> str:
    quote = lambda s: yaml_scalar(s, 2)  # noqa: E731
    raise_tokens = (
        ""
        if budget.whole_replies
        else " and max_tokens (e.g. 1024: a longer reply to hold through)"
    )
    pad = " " * max(1, 12 - len(str(budget.max_tokens)))
    if budget.single_tokens is None:
        max_lines = MAX_TOKENS.format(max_tokens=budget.max_tokens, pad=pad)
    else:
        max_lines = MAX_TOKENS_SPLIT.format(
            max_tokens=budget.max_tokens,
            pad=pad,
            single=budget.single_tokens,
            pad_single=" " * max(1, 3 - len(str(budget.single_tokens))),
        )
    return CONFIG.format(
        max_lines=max_lines,
        periodic_turns=PERIODIC_TURNS[budget.whole_replies],
        turn_tokens=budget.turn_tokens,
        pad_turn=" " * max(1, 11 - len(str(budget.turn_tokens))),
        turn_why=_wrapped(budget.why, 26 + 2),
        continue_lines=CONTINUE[budget.continue_on_eos].rstrip("\n"),
        raise_tokens=raise_tokens,
        name=name,
        name_value=quote(name),
        config=f"{name}.yaml",
        model=quote(model),
        suite=quote(suite_file),
        first=first_item,
    )
