"""The report's "Verdicts": one card per finding (adherence per policy, the mechanism, the
correlation, the early-warning predictor, prompt-or-text per item), with sentences that say
the same verdict for many conditions ("cannot tell whether removing the system prompt...")
folded into one line per verdict, each condition's sentence kept in a collapsible part."""

from __future__ import annotations

import re
from collections import Counter

from harness.report import derive
from harness.report.carried import carried_cards, linkage_sentences
from harness.report.html import esc, note
from harness.report.load import RunData
from harness.report.mechanism_cards import correlation_card, mechanism_card, predictor_card
from harness.report.verdicts import Card, adherence_cards

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


def _card_html(card: Card) -> str:
    body = "".join(f"<p>{esc(s)}</p>" for s in card.sentences)
    return f'<div class="card card-{esc(card.kind)}"><h3>{esc(card.title)}</h3>{body}</div>'


def verdicts(data: RunData) -> tuple[str, dict]:
    cards: list[Card] = []
    curve, _ = derive.adherence_curve(data)
    if curve is not None and len(curve):
        cards += adherence_cards(curve, derive.token_overhead(data), data.frame("summary.csv"))
    within = linkage_sentences(data.frame("linkage.csv"), with_across=False)
    for card in (
        mechanism_card(data.frame("summary.csv"), data.frame("fits.csv")),
        correlation_card(data.frame("correlation.csv"), within),
        predictor_card(data.frame("predictor.csv")),
    ):
        if card is not None:
            cards.append(card)
    cards += carried_cards(data.frame("carried.csv"))
    if not cards:
        return note("No adherence or divergence results in this run folder yet."), {}
    cards, folded = fold_cards(cards)
    intro = note(
        "“Holds 90 % to t = X”: a(t) >= 90 % at every window of the adherence curve up to "
        "t = X (the windows' t as stored, in continuation positions, injected tokens "
        "included); +N % tokens: the policy's injected and restated tokens over generated ones."
    )
    body = "".join(map(_card_html, cards)) + folded
    return intro + '<div class="cards">' + body + "</div>", {}
