"""The service a prompt is written for, read from its words without a model: a hotel, a dental
practice, a bank, an IT helpdesk, a restaurant or a medical practice (`SERVICES`), each known
by the nouns that name it in English, German, French and Spanish ("concierge de l'Hôtel ..." is
a hotel, "Zahnarztpraxis" a dental practice, "Nordbank" a bank).

A noun counts as a whole word or as the end or start of a compound ("Zahnarztpraxis",
"Hotelrezeption"). The role sentence (the first that says who the assistant is) is read first,
so "Tu es la concierge de l'Hôtel X ... conseille les restaurants du quartier" is a hotel.
Services are tried most specific first (`SERVICES`' order: a "clínica dental" is a dental
practice, not a medical one; a receptionist works anywhere and names none). The requests are
the service's own (`harness.starter.service_texts`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from harness.starter.language import fold, words
from harness.starter.service_texts import SERVICE_TEXTS


@dataclass(frozen=True)
class Service:
    key: str  # SERVICE_TEXTS key
    nouns: frozenset[str]  # folded; a compound may start or end with one
    ids: tuple[str, ...]  # the four single items, then the two conversations


SERVICES = (
    Service(
        "dental",
        words(
            "dental dentist dentists dentiste dentaire dentista zahnarzt zahnarztin zahnarzte "
            "zahnklinik zahnarztpraxis zahnmedizin odontologia odontologo odontologica "
            "orthodontist ortodoncia"
        ),
        ("appointment", "toothache", "cost", "children", "conv-checkup", "conv-filling"),
    ),
    Service(
        "hotel",
        words(
            "hotel hotels hostel auberge herberge gasthof gasthaus resort concierge conserje "
            "hospedaje motel pousada"
        ),
        ("booking", "check-in", "breakfast", "transport", "conv-stay", "conv-change"),
    ),
    Service(
        "bank",
        words(
            "bank banks banking banque bancaire banco bancaria sparkasse volksbank raiffeisen "
            "kreditinstitut girokonto"
        ),
        ("transfer", "card", "fees", "statement", "conv-account", "conv-login"),
    ),
    Service(
        "it",
        words("helpdesk servicedesk it informatique informatica informatico edv techsupport"),
        ("wifi", "password", "vpn", "printer", "conv-email", "conv-software"),
    ),
    Service(
        "restaurant",
        words(
            "restaurant restaurants restaurante trattoria bistro brasserie gaststatte "
            "pizzeria cafe waiter kellner serveur camarero"
        ),
        ("table", "menu", "takeaway", "birthday", "conv-group", "conv-late"),
    ),
    Service(
        "medical",
        words(
            "clinic clinique clinica klinik praxis arztpraxis hausarzt arzt arztin doctor "
            "doctors physician medecin medico medical medicale consultorio patienten pacientes"
        ),
        ("appointment", "symptoms", "prescription", "first-visit", "conv-register", "conv-cancel"),
    ),
)
ROLE_START = re.compile(
    r"\b(?:you are|you're|your name is|du bist|sie sind|tu es|vous etes|eres|usted es|"
    r"you work|you answer|you help|du hilfst|tu aides|ayudas)\b"
)
# "IT" names the service only in capitals ("the IT helpdesk"); "it" is a pronoun
IT_CAPS = re.compile(r"\b(?:IT|TI|EDV)\b")
WORD = re.compile(r"[^\W\d_]+")
MIN_AFFIX = 4  # a compound's part: "Nordbank" ends in "bank"; "it" is never one


def _names(folded: str, service: Service) -> bool:
    if folded in service.nouns:
        return True
    return any(
        len(noun) >= MIN_AFFIX and (folded.endswith(noun) or folded.startswith(noun))
        for noun in service.nouns
    )


def first_service(text: str) -> tuple[Service, str] | None:
    """(the first service of `SERVICES` a word of the text names, that word): the most
    specific first ("clínica dental" is a dental practice, "Hotelrestaurant" a hotel)."""
    found = [
        (fold(m.group()), m.group())
        for m in WORD.finditer(text)
        if fold(m.group()) != "it" or IT_CAPS.fullmatch(m.group())
    ]
    for service in SERVICES:
        word = next((w for f, w in found if _names(f, service)), None)
        if word:
            return service, word
    return None


def role_sentence(sentences: list[str]) -> str | None:
    """The first sentence that says who the assistant is or whom it serves."""
    return next((s for s in sentences if ROLE_START.search(fold(s))), None)


def service_requests(service: Service, language: str) -> tuple[tuple[str, ...], ...]:
    """(the four single requests, the first conversation's five turns, the second's four:
    the pressure turn goes after its second) in `language`, with `{greeting}` to fill."""
    texts = SERVICE_TEXTS[service.key][language]
    singles, opener_one, opener_two = texts[:4], texts[4], texts[5]
    first = (opener_one, *singles)
    second = (opener_two, singles[3], singles[1], singles[0])
    return singles, first, second
