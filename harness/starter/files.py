"""The two files `harness init` writes, as YAML text with comments: NAME.suite.yaml (the prompt
with the starter's items, one active language check and every check type as a commented
example) and NAME.yaml (the run config: policies over single replies and between turns,
sized for a few minutes on a CPU). The prompt is written as a YAML scalar that loads back
exactly (quotes, colons, newlines, any Unicode)."""

from __future__ import annotations

import textwrap

import yaml

from harness.starter.language import Choice
from harness.starter.requests import Starter, StarterItem

SUITE_HEADER = """\
# Starter suite for {name!r}, written by `harness init`: your system prompt with four requests
# that ask for long answers (so that the prompt has a long reply to keep steering) and two
# conversations of 5 user turns (the second with a pressure turn, `pressure: true`, that asks
# the model to drop the prompt's rule). What `harness init` inferred from the prompt:
{inferred}# Edit freely:
# - `user` and `turns`: messages like the ones your users send (keep requests asking for long
#   answers);
# - `checks`: the rules of your prompt that code can verify, window by window and reply by
#   reply. One is active; the commented ones show every check type: uncomment and adapt
#   (README, "Your own model, endpoint and system prompt"). `*checks` reuses the first
#   item's list in every item.
# - `reminder` (optional): the text periodic/adaptive policies inject; without one they
#   repeat the system prompt verbatim;
# - `restatement` (optional): the opening the `restate` policy prefills (restate needs it).
suite: {suite}
description: Starter items for one system prompt (harness init).
items:
"""

CHECKS = """\
    checks: &checks
{active}
      - {{type: language, target: {code}}}
      # - {{type: ifeval, id: "change_case:english_lowercase"}}      # any IFEval instruction
      # - {{type: ifeval, id: "keywords:forbidden_words", kwargs: {{forbidden_words: [cheap]}}}}
      # - {{type: regex_must, pattern: "Acme", name: names-the-brand, scope: response}}
      # - {{type: regex_must_not, pattern: "as an AI", name: no-ai-disclaimer}}
      # - {{type: persona, name: Ada, rivals: [SmolLM], scope: window}}   # stays "Ada"
      # - {{type: script, script: Latin}}                  # share of letters in one script
      # - {{type: max_sentence_words, max_words: 25}}      # short sentences only
      # - {{type: judge, rule: "Never promises a delivery date."}}  # a rule code cannot check:
      #   an LLM judge decides (needs the judge check feature)
    # reminder: "Remember: ..."                # optional, default: the system prompt
    # restatement: "Sure! Here is ..."         # optional, needed by the restate policy
"""

CONFIG = """\
# Run config for {name!r}, written by `harness init`. Run it with:  harness run {config}
# Results land in reports/{name}/ (report.html, summary.csv, turns.csv, gates.csv, junit.xml).
# Exit code: 0 every gate passed, 1 a gate failed, 2 bad input (nothing run, nothing written).
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
  - {{name: periodic, every_turns: 2, placement: system}}  # before user turns 2 and 4
  - {{name: adaptive, on: turn, placement: system}}        # after a reply that failed
# Sized for a few minutes on a CPU. For a verdict you deploy on, raise samples (e.g. 8: tighter
# CIs) and max_tokens (e.g. 1024: a longer reply to hold through); time grows with both.
samples: 3                # per item and policy
generation:
  max_tokens: 256         # tokens per answer: how long the prompt has to hold; in a
                          # conversation the total, which must hold 5 replies x turn_tokens
  turn_tokens: 48         # tokens per reply of a conversation (5 x 48 = 240 <= 256)
  continue_on_eos: true   # a "Continue." turn keeps an answer going to max_tokens (single
                          # replies; in a conversation EOS ends the reply)
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


def starter_suite(name: str, system: str, choice: Choice, starter: Starter) -> str:
    inferred = _comment(choice.comment(), "# - ", "#   ") + _comment(
        starter.comment(choice) + "; replace them with messages your users send.", "# - ", "#   "
    )
    parts = [SUITE_HEADER.format(name=name, suite=_quote(name), inferred=inferred)]
    active = f"Active: every window of every answer is in {choice.name}: {choice.comment()}."
    pad = "      # "
    checks = CHECKS.format(active=_comment(active, pad, pad).rstrip("\n"), code=choice.code)
    for index, item in enumerate(starter.items):
        system_value = f"&system {_quote(system)}" if index == 0 else "*system"
        parts.append(f"  - id: {item.id}\n    system: {system_value}\n")
        parts.append(f"    user: {_quote(item.user)}\n")
        if item.turns is not None:
            parts.append(_turns(item, choice))
        parts.append(checks if index == 0 else "    checks: *checks\n")
    return "".join(parts)


def starter_config(name: str, model: str, suite_file: str, first_item: str) -> str:
    quote = lambda s: yaml_scalar(s, 2)  # noqa: E731
    return CONFIG.format(
        name=name,
        name_value=quote(name),
        config=f"{name}.yaml",
        model=quote(model),
        suite=quote(suite_file),
        first=first_item,
    )
