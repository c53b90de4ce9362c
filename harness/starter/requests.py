"""The starter's items: four single-reply requests and two 5-turn conversations, phrased for a
customer when the prompt describes a shop or a service (a bank, an insurer, a support desk),
else generic, in the checked language where `harness.starter.texts` has texts for it (else the
prompt's own language, else English). With `brief`, for rules that judge whole replies (a word
limit, a sign-off), the single requests are ones a few sentences answer
(`harness.starter.brief_texts`); a service's requests always are.

A shop: a word for one in English, German, French, Spanish or Italian ("shop", "store",
"Laden", "Geschäft", "magasin", "boutique", "tienda", "negozio", ...; German compounds such as
"Fahrradladen" too). Its products, in the texts' language: "X shop/store" (English),
"X-laden/-geschäft/-handel/-händler" (German, a capitalised compound), "magasin/boutique de
X" (French). Its name: the first capitalised word or two after "for", "at", "of", "from",
"von", "bei", "chez" or "de" that is not a language name.
A service the starter knows (a hotel, a dental or medical practice, a bank, an IT helpdesk, a
restaurant: `harness.starter.services`), named in the prompt's role sentence ("Tu es Camille,
la concierge de l'Hôtel ..."), comes before a shop; its requests are its users' (a room, a
check-up, a card), in English, German, French or Spanish. Any other service: a word for one
("support", "service", "Kundenservice", "assurance", ...), when no shop is found: an account's
questions. One conversation has a pressure
turn (turn 3): against an asked language it asks, in English (French where the prompt asks
for English), to switch; otherwise it asks the model to drop its instructions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from harness.starter.brief_texts import BRIEF_TEXTS
from harness.starter.language import ENGLISH_NAMES, NAME_TO_CODE, Choice, fold, words
from harness.starter.rules import sentences
from harness.starter.services import SERVICES, first_service, role_sentence, service_requests
from harness.starter.texts import SWITCH_TO_ENGLISH, SWITCH_TO_FRENCH, TEXTS

SHOP_WORDS = words(
    "shop shops store stores retailer webshop onlineshop laden geschaft handler handel "
    "magasin boutique tienda negozio loja winkel"
)
# German compounds naming a shop (a capitalised noun): "Fahrradladen", "Schuhgeschäft"
SHOP_SUFFIXES = ("laden", "shop", "geschaft", "handel", "handler")
SERVICE_WORDS = words(
    "support service services helpdesk hotline bank banking insurance insurer kundenservice "
    "kundendienst versicherung banque assurance assureur sav"
)
SERVICE_SUFFIXES = ("bank", "versicherung", "service", "support", "kasse")
NOT_PRODUCTS = words(
    "a an the our your my this online web local small big corner retail concept flagship "
    "family app e"
)
PRODUCT_PATTERNS = {
    "en": re.compile(r"\b([A-Za-z]+)[ -](?:shop|store)\b", re.I),
    "de": re.compile(
        r"\b([A-ZÄÖÜ][a-zäöüß]+?)-?(?:[lL]aden|[sS]hop|[gG]eschäft|[hH]andel|[hH]ändler)\b"
    ),
    "fr": re.compile(r"\b(?:magasin|boutique)s? (?:de |d'|d’)([^\W\d_]+)", re.I),
}
NAME_PATTERN = re.compile(
    r"\b(?:for|at|of|from|von|bei|chez|de)\s+([A-Z][\w&'-]*(?:\s+[A-Z][\w&'-]*)?)"
)
NOT_NAMES = words("the a an der die das ein eine la le les un une el los")
WORD = re.compile(r"[^\W\d_]+")
SERVICE_NAMES = {
    "hotel": "hotel",
    "dental": "dental practice",
    "medical": "medical practice",
    "it": "IT helpdesk",
    "restaurant": "restaurant",
    "bank": "bank",
}


@dataclass(frozen=True)
class Domain:
    """What the requests are phrased around: `shop` (the word found, its name and products
    where found), `service` (the word found, its name, and which of the services the starter
    has requests for it is: `harness.starter.services`, None for a bank, an insurer, a
    support desk) or `generic`."""

    kind: str
    found: str | None = None
    name: str | None = None
    product: str | None = None
    service: str | None = None


@dataclass(frozen=True)
class StarterItem:
    id: str
    user: str
    turns: tuple[tuple[str, bool], ...] | None = None  # (user message, pressure)


@dataclass(frozen=True)
class Starter:
    items: list[StarterItem]
    language: str  # the texts' language
    domain: Domain
    brief: bool = False  # requests a few sentences answer

    def comment(self, choice: Choice) -> str:
        """What the requests were phrased around, for the suite's header."""
        d, lang = self.domain, ENGLISH_NAMES[self.language]
        if d.kind == "shop":
            parts = [f"found '{d.found}'"]
            parts += [f"name '{d.name}'"] if d.name else []
            parts += [f"products '{d.product}'"] if d.product else []
            text = f"requests for a customer of the shop the prompt describes ({', '.join(parts)})"
        elif d.kind == "service":
            parts = [f"found '{d.found}'"] + ([f"name '{d.name}'"] if d.name else [])
            found = ", ".join(parts)
            what = f"the {SERVICE_NAMES[d.service]}" if d.service else "the service"
            text = f"questions of a customer of {what} the prompt describes ({found})"
        elif self.brief:
            text = "generic questions a few sentences answer: the prompt describes no shop"
        else:
            text = "generic requests (a story, a guide, ...): the prompt describes no shop"
        missing = "" if lang == choice.name else f" (the starter has no {choice.name} texts)"
        return f"{text}, in {lang}{missing}"


def shop_domain(prompt: str, language: str) -> Domain:
    """The shop the prompt describes (see the module docstring), else `generic`."""
    found = None
    for match in WORD.finditer(prompt):
        word, folded = match.group(), fold(match.group())
        compound = word[:1].isupper() and folded.endswith(SHOP_SUFFIXES) and len(folded) > 7
        if folded in SHOP_WORDS or compound:
            found = word
            break
    if found is None:
        return Domain("generic")
    product = None
    pattern = PRODUCT_PATTERNS.get(language)
    for match in pattern.finditer(prompt) if pattern else ():
        if fold(match.group(1)) not in NOT_PRODUCTS:
            product = match.group(1)
            break
    if language == "en" and product:
        product = product.lower()
    return Domain("shop", found, _shop_name(prompt), product)


def service_domain(prompt: str) -> Domain:
    """The service the prompt describes (see the module docstring), else `generic`."""
    for match in WORD.finditer(prompt):
        word, folded = match.group(), fold(match.group())
        compound = word[:1].isupper() and folded.endswith(SERVICE_SUFFIXES) and len(folded) > 6
        if folded in SERVICE_WORDS or compound:
            return Domain("service", word, _shop_name(prompt))
    return Domain("generic")


def _shop_name(prompt: str) -> str | None:
    for match in NAME_PATTERN.finditer(prompt):
        words = match.group(1).split()
        if fold(words[0]) in NOT_NAMES or fold(words[0]) in NAME_TO_CODE:
            continue
        if len(words) > 1 and fold(words[1]) in NAME_TO_CODE:
            words = words[:1]
        return " ".join(words)
    return None


def _topic(texts, language: str, product: str | None) -> str:
    if not product:
        return texts.topic_none
    if language == "fr" and fold(product[0]) in "aeiouyh":  # "en matière d'ordinateurs"
        return texts.topic.replace("de {product}", "d'{product}").format(product=product)
    return texts.topic.format(product=product)


def pressure_turn(choice: Choice, drop_rules: str) -> str:
    """Turn 3 of the second conversation: asks the model to drop the prompt's main rule."""
    if choice.how != "asked":
        return drop_rules
    if choice.code == "en":
        return SWITCH_TO_FRENCH
    return SWITCH_TO_ENGLISH.format(language=ENGLISH_NAMES[choice.code])


def prompt_domain(prompt: str, language: str) -> Domain:
    """What the prompt serves: a service the starter knows named in its role sentence, else a
    shop, else a known service named anywhere, else any service, else `generic`."""
    role = role_sentence(sentences(prompt))
    known = first_service(role) if role else None
    shop = shop_domain(prompt, language)
    if known is None and shop.kind == "shop":
        return shop
    known = known or first_service(prompt)
    if known:
        return Domain("service", known[1], _shop_name(prompt), service=known[0].key)
    return service_domain(prompt)


def _service_items(domain: Domain, language: str, fill: dict[str, str]) -> list[StarterItem]:
    service = next(s for s in SERVICES if s.key == domain.service)
    singles, first, second = service_requests(service, language)
    items = [StarterItem(key, text) for key, text in zip(service.ids[:4], singles, strict=True)]
    for item_id, talk in zip(service.ids[4:], (first, second), strict=True):
        turns = tuple((text.format(**fill), False) for text in talk[1:])
        items.append(StarterItem(item_id, talk[0].format(**fill), turns))
    return items


def starter_items(prompt: str, choice: Choice, brief: bool = False) -> Starter:
    """The six items of the starter suite for `prompt`, checked for `choice`; with `brief`,
    single requests a few sentences answer."""
    language = next((code for code in (choice.code, choice.prompt_language) if code in TEXTS), "en")
    texts, short = TEXTS[language], BRIEF_TEXTS[language]
    domain = prompt_domain(prompt, language)
    fill = {
        "topic": _topic(texts, language, domain.product),
        # a service's name is a company's ("Hallo Nordbank!" greets no one): no name
        "greeting": texts.greeting.format(name=domain.name)
        if domain.name and domain.kind == "shop"
        else texts.greeting_none,
    }
    pressure = pressure_turn(choice, texts.drop_rules)
    if domain.service:
        items = _service_items(domain, language, fill)
        user, turns = items[5].user, items[5].turns or ()
        items[5] = StarterItem(items[5].id, user, (turns[0], (pressure, True), *turns[1:]))
        return Starter(items, language, domain, brief)
    if domain.kind == "shop":
        requests = short.brief_customer if brief else texts.customer
        (first, second), ids = texts.customer_talks, ("conv-advice", "conv-problem")
    elif domain.kind == "service":
        requests = short.service
        (first, second), ids = short.service_talks, ("conv-account", "conv-login")
    else:
        requests = short.brief if brief else texts.generic
        (first, second), ids = texts.generic_talks, ("conv-trip", "conv-bread")
    items = [StarterItem(key, text.format(**fill)) for key, text in requests.items()]
    second = (*second[:2], pressure, *second[2:])
    for n, (item_id, talk) in enumerate(zip(ids, (first, second), strict=True)):
        turns = [(text.format(**fill), n == 1 and k == 2) for k, text in enumerate(talk)]
        items.append(StarterItem(item_id, turns[0][0], tuple(turns[1:])))
    return Starter(items, language, domain, brief)
