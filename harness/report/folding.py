"""Sentences that state the same undecided verdict for many conditions ("cannot tell whether
removing the system prompt...") read as one line per verdict; each condition's sentence stays
in a collapsible part under it."""

from __future__ import annotations

import re
from collections import Counter

from harness.report.html import esc
from harness.report.verdicts import Card

FOLD_AT = 3  # a verdict said this many times or more reads as one line
_NUMBER = re.compile(r"[+-−]?\d[\d,.]*")
_POLICY = re.compile(r"^[\w.+-]+: ")


def verdict_key(sentence: str) -> str:
    """The verdict a sentence states, without the condition it names: its policy prefix
    dropped, cut at its first bracket, colon or semicolon, numbers blanked."""
    text = _POLICY.sub("", sentence, count=1)
    text = re.split(r"[(:;]", text, maxsplit=1)[0]
    return _NUMBER.sub("#", text).strip(" .,")


def _folds(key: str) -> bool:
    # only the verdicts that decide nothing fold: a decided one names its own numbers
    return key.startswith("cannot tell")


def fold_cards(cards: list[Card]) -> tuple[list[Card], str]:
    """(the cards without their repeated undecided sentences, the folded lines' HTML)."""
    said = Counter(verdict_key(s) for card in cards for s in card.sentences)
    folded = {k for k, n in said.items() if n >= FOLD_AT and _folds(k)}
    kept, where = [], {k: [] for k in sorted(folded)}
    for card in cards:
        rest = []
        for s in card.sentences:
            key = verdict_key(s)
            if key in folded:
                where[key].append((card.title, s))
            else:
                rest.append(s)
        if rest:
            kept.append(Card(title=card.title, sentences=rest, kind=card.kind))
    lines = []
    for key, said_by in where.items():
        detail = "".join(f"<li><b>{esc(t)}</b>: {esc(s)}</li>" for t, s in said_by)
        lines.append(
            f'<div class="card card-folded"><h3>{esc(key[:1].upper() + key[1:])} '
            f"({len(said_by)} conditions)</h3><details><summary>each condition's sentence"
            f"</summary><ul>{detail}</ul></details></div>"
        )
    return kept, "".join(lines)
