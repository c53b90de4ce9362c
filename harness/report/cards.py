"""The report's "Verdicts": one card per finding (adherence per policy, the mechanism, the
correlation, the early-warning predictor, prompt-or-text per item), with sentences that say
the same verdict for many conditions ("cannot tell whether removing the system prompt...")
folded into one line per verdict, each condition's sentence kept in a collapsible part."""

from __future__ import annotations

from harness.report import derive
from harness.report.carried import carried_cards, linkage_sentences
from harness.report.folding import fold_cards
from harness.report.html import esc, note
from harness.report.load import RunData
from harness.report.mechanism_cards import correlation_card, mechanism_card, predictor_card
from harness.report.verdicts import Card, adherence_cards


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
