"""`harness init`'s requests are ones the prompt's users would send (harness.starter.services):
for prompts written for services the starter was not tuned on (a hotel concierge in French, a
dental clinic in Spanish, an IT helpdesk in English, a bank in German, a restaurant in German,
a medical practice in English), every item's request names the service's own things and every
user message is in the prompt's language (lingua, as the language check reads replies)."""

from __future__ import annotations

import re

import pytest

from harness.starter.language import choose_language, fold, prompt_language
from harness.starter.requests import starter_items

# prompt -> (language, service, words one of which each item's request names)
PROMPTS = {
    "Tu es Camille, la concierge de l'Hôtel Belle Rive à Nice. Réponds toujours en français, "
    "en 60 mots au maximum. Termine chaque réponse par « Belle journée, Camille ».": (
        "fr",
        "hotel",
        "hotel chambre reservation sejour petit-dejeuner bagages",
    ),
    "Eres Lucía, la recepcionista de la Clínica Dental Sonrisa en Valencia. Responde siempre "
    "en español y nunca menciones otras clínicas como la Clínica Luna.": (
        "es",
        "dental",
        "dental dentista muela empaste revision limpieza",
    ),
    "You are Sam, the IT helpdesk assistant at Contoso. Always answer in English, in at most "
    "80 words, and never share passwords.": (
        "en",
        "it",
        "laptop wi-fi password vpn computer printer outlook software",
    ),
    "Du bist Lena, die Support-Assistentin von Nordbank. Antworte immer auf Deutsch. Nenne "
    "niemals Konkurrenzbanken wie die Sparkasse oder die ING.": (
        "de",
        "bank",
        "bank bankkarte uberweisung girokonto konto kontoauszug online-banking",
    ),
    "Du arbeitest am Telefon der Trattoria Da Enzo in München und nimmst Reservierungen "
    "entgegen. Antworte immer auf Deutsch und sei herzlich.": (
        "de",
        "restaurant",
        "restaurant tisch speisekarte gerichte essen",
    ),
    "You are the front-desk assistant of Riverside Family Practice, a GP clinic. Be calm and "
    "clear, and tell patients to call 112 in an emergency.": (
        "en",
        "medical",
        "doctor practice appointment prescription patient",
    ),
}


def _messages(starter):
    """Every user message the items send, but the pressure turn (which asks for another
    language or drops the rules by design)."""
    for item in starter.items:
        yield item.user
        yield from (text for text, pressure in item.turns or () if not pressure)


@pytest.mark.parametrize("prompt", list(PROMPTS))
def test_each_request_names_the_service_in_the_prompts_language(prompt):
    language, service, vocabulary = PROMPTS[prompt]
    starter = starter_items(prompt, choose_language(prompt), brief=True)
    assert starter.language == language
    names = set(vocabulary.split())
    for item in starter.items:
        found = set(re.findall(r"[\w-]+", fold(item.user))) & names
        found |= {n for n in names if n in fold(item.user)}  # compounds: "Hotelreservierung"
        assert found, f"{item.id}: {item.user!r} names nothing of the {service}"
    wrong = [m for m in _messages(starter) if (prompt_language(m) or ("?",))[0] != language]
    assert wrong == [], f"not in {language}: {wrong}"
    assert starter.domain.service == service
    comment = starter.comment(choose_language(prompt))
    assert comment.startswith("questions of a customer of the ")


def test_a_role_sentence_service_beats_a_shop_word_elsewhere():
    # "boutique" would make it a shop; the role sentence says hotel
    prompt = (
        "Tu es Hugo, le concierge de l'Hôtel Azur, un hôtel boutique à Cannes. Réponds "
        "toujours en français."
    )
    starter = starter_items(prompt, choose_language(prompt))
    assert (starter.domain.kind, starter.domain.service) == ("service", "hotel")
    assert "chambre" in starter.items[0].user
