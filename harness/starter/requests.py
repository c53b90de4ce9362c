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
A service: a word for one ("support", "service", "Kundenservice", "helpdesk", "bank",
"banque", "assurance", ...; German compounds such as "Nordbank" too), when no shop is found.
One conversation has a pressure
turn (turn 3): against an asked language it asks, in English (French where the prompt asks
for English), to switch; otherwise it asks the model to drop its instructions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from harness.starter.brief_texts import BRIEF_TEXTS
from harness.starter.language import ENGLISH_NAMES, NAME_TO_CODE, Choice, fold, words
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


@dataclass(frozen=True)
class Domain:
    """What the requests are phrased around: `shop` (the word found, its name and products
    where found), `service` (the word found, its name) or `generic`."""

    kind: str
    found: str | None = None
    name: str | None = None
    product: str | None = None


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
            text = f"questions of a customer of the service the prompt describes ({found})"
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


def starter_items(prompt: str, choice: Choice, brief: bool = False) -> Starter:
    """The six items of the starter suite for `prompt`, checked for `choice`; with `brief`,
    single requests a few sentences answer."""
    language = next((code for code in (choice.code, choice.prompt_language) if code in TEXTS), "en")
    texts, short = TEXTS[language], BRIEF_TEXTS[language]
    domain = shop_domain(prompt, language)
    if domain.kind == "generic":
        domain = service_domain(prompt)
    shop = domain.kind == "shop"
    fill = {
        "topic": _topic(texts, language, domain.product),
        # a service's name is a company's ("Hallo Nordbank!" greets no one): no name
        "greeting": texts.greeting.format(name=domain.name)
        if domain.name and domain.kind == "shop"
        else texts.greeting_none,
    }
    if shop:
        requests = short.brief_customer if brief else texts.customer
        (first, second), ids = texts.customer_talks, ("conv-advice", "conv-problem")
    elif domain.kind == "service":
        requests = short.service
        (first, second), ids = short.service_talks, ("conv-account", "conv-login")
    else:
        requests = short.brief if brief else texts.generic
        (first, second), ids = texts.generic_talks, ("conv-trip", "conv-bread")
    items = [StarterItem(key, text.format(**fill)) for key, text in requests.items()]
    second = (*second[:2], pressure_turn(choice, texts.drop_rules), *second[2:])
    for n, (item_id, talk) in enumerate(zip(ids, (first, second), strict=True)):
        turns = [(text.format(**fill), n == 1 and k == 2) for k, text in enumerate(talk)]
        items.append(StarterItem(item_id, turns[0][0], tuple(turns[1:])))
    return Starter(items, language, domain, brief)
