"""The language a system prompt's replies should be in: the one the prompt asks for, else the
one it is written in.

Asked for: a language name (in English, German, French, Spanish, Italian, Portuguese or Dutch;
`NAMES`) right after a preposition ("in English", "auf Deutsch", "en français", "em português",
"in het Nederlands", with fillers such as "plain" or "the" between) or a verb of speaking or
using ("speak German", "sprich nur Deutsch", "parle français"). Each such mention scores 4 with
a verb of answering in its sentence within 6 words ("answer", "antworte", "réponds", "responde",
... before or after it: German puts the verb last), 3 with one of writing there ("write",
"schreibe", "écris", ...: "users write in English; answer in German" is German) or after a
speaking verb, 2 with a rule word within 3 words ("always", "only", "immer", "nur", "toujours",
...), else 1 where it ends its clause ("... into German." yes) and 0 where it does not ("an
expert in French cuisine"). A mention with a negation in its clause within 4 words before it
("never in English", "nicht auf Englisch", "jamais en anglais") is dropped. The highest score
wins, the first mention on a tie. Otherwise lingua, restricted to the default candidate
languages as the language check is, names the prompt's own language.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from harness.checks.language import DEFAULT_CANDIDATE_LANGUAGES, detector

# Language names, lowercase without accents ("français" -> "francais"), in English, German,
# French, Spanish, Italian, Portuguese and Dutch, for the default candidate languages.
NAMES = {
    "en": "english englisch englischer anglais anglaise ingles inglese engels",
    "de": "german deutsch deutscher allemand allemande aleman tedesco alemao duits",
    "fr": "french franzosisch franzosischer francais francaise frances francese frans",
    "es": "spanish spanisch spanischer espagnol espagnole espanol castellano spagnolo espanhol "
    "spaans",
    "it": "italian italienisch italienischer italien italienne italiano italiaans",
    "pt": "portuguese portugiesisch portugais portugues portoghese portugees",
    "nl": "dutch niederlandisch hollandisch neerlandais neerlandes olandese holandes nederlands",
    "ru": "russian russisch russe ruso russo",
    "pl": "polish polnisch polonais polaco polacco polones",
    "sv": "swedish schwedisch suedois sueco svedese zweeds",
    "tr": "turkish turkisch turc turco turks",
    "zh": "chinese mandarin chinesisch chinois chino cinese chines chinees",
}


def words(text: str) -> frozenset[str]:
    """The space-separated words of `text` (the tables below are written as word lists)."""
    return frozenset(text.split())


NAME_TO_CODE = {name: code for code, names in NAMES.items() for name in names.split()}
ENGLISH_NAMES = {code: names.split()[0].capitalize() for code, names in NAMES.items()}

PREPOSITIONS = words("in into auf en em")
# between a preposition and the name: "in plain English", "in the English language", "en
# langue française", "in het Nederlands", "in einfachem Deutsch"
FILLERS = words(
    "the plain simple clear good proper correct formal informal british american standard "
    "het de la le langue lingua lengua idioma lingua einfachem gutem klarem korrektem "
    "einfacher gutes buen bon bom"
)
SPEAK = words(
    "speak speaks talk use sprich sprichst spricht sprechen verwende benutze parle parles "
    "parlez parler utilise utilisez habla hablas hable hablar usa utiliza parla parli parlare "
    "fala fale falar spreek spreekt spreken gebruik"
)
ANSWER = words(
    "answer answers answering respond responds reply replies antworte antwortest antwortet "
    "antworten beantworte beantwortest reponds repondez repondre reponse reponses responde "
    "responda responder respuesta respuestas contesta rispondi risponda rispondere risposta "
    "risposte resposta respostas antwoord antwoordt antwoorden"
)
WRITE = words(
    "write writes writing schreibe schreib schreibst schreiben ecris ecrivez ecrire escribe "
    "escriba scrivi scriva escreva schrijf"
)
RULE_WORDS = words(
    "always only exclusively strictly immer nur ausschliesslich stets toujours uniquement "
    "seulement exclusivement siempre solo solamente unicamente sempre soltanto somente "
    "apenas altijd alleen uitsluitend"
)
NEGATIONS = words(
    "never not no dont don doesn nie niemals nicht kein keine keinesfalls jamais pas ne "
    "nunca nao non mai nooit niet geen"
)
WORD = re.compile(r"[^\W\d_]+")
SENTENCE_END = re.compile(r"[.;!?:\n]")


def fold(word: str) -> str:
    """Lowercase without accents: 'Französisch' -> 'franzosisch', 'ß' -> 'ss'."""
    decomposed = unicodedata.normalize("NFKD", word.casefold())
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


@dataclass(frozen=True)
class Choice:
    """The language the starter checks: its code, how it was found (`asked`: the prompt asks
    for it, `written`: the prompt is in it, `assumed`: neither could tell) and the evidence
    (the prompt's words, or lingua's confidence)."""

    code: str
    how: str
    evidence: str
    prompt_language: str | None  # the prompt's own language (lingua), if it could tell

    @property
    def name(self) -> str:
        return ENGLISH_NAMES.get(self.code, self.code)

    def comment(self) -> str:
        """The YAML comment above the check, saying what was inferred and how to correct it."""
        if self.how == "asked":
            found = f"found '{self.evidence}'"
            return f"the prompt asks for {self.name} ({found}); change `{self.code}` if not"
        if self.how == "written":
            return (
                f"the prompt names no reply language and is written in {self.name} "
                f"({self.evidence}); change `{self.code}` if replies may be in another"
            )
        return (
            f"could not tell the prompt's language ({self.evidence}); set the one replies "
            "must be in"
        )


@dataclass(frozen=True)
class _Token:
    word: str  # folded
    start: int
    end: int
    sentence: int  # index of the sentence ([.;!?:] or a newline ends one)
    clause: int  # index of the clause (a comma ends one too)


def _tokens(text: str) -> list[_Token]:
    tokens, sentence, clause, last = [], 0, 0, 0
    for match in WORD.finditer(text):
        between = text[last : match.start()]
        if SENTENCE_END.search(between):
            sentence, clause = sentence + 1, clause + 1
        elif "," in between:
            clause += 1
        tokens.append(_Token(fold(match.group()), match.start(), match.end(), sentence, clause))
        last = match.end()
    return tokens


def _anchor(tokens: list[_Token], i: int) -> int | None:
    """Index of the preposition or speaking verb that makes token i a request, else None."""
    j = i - 1
    while j >= 0 and tokens[j].word in FILLERS and i - j <= 3:
        j -= 1
    if j >= 0 and tokens[j].word in PREPOSITIONS:
        return j
    k = i - 1  # "sprich nur Deutsch", "speak only English"
    while k >= 0 and tokens[k].word in RULE_WORDS and i - k <= 3:
        k -= 1
    return k if k >= 0 and tokens[k].word in SPEAK else None


def _score(text: str, tokens: list[_Token], i: int, anchor: int) -> int:
    """4: a verb of answering near it; 3: one of writing, or a speaking verb before it; 2: a
    rule word near it; 1: it ends its clause; 0: none of these, or it is negated."""
    here = tokens[i]

    def near(lo: int, hi: int, words: set[str], key: str = "sentence") -> bool:
        span = tokens[max(lo, 0) : hi]
        return any(t.word in words and getattr(t, key) == getattr(here, key) for t in span)

    if near(anchor - 4, anchor, NEGATIONS, "clause"):
        return 0
    if near(anchor - 6, i + 7, ANSWER):
        return 4
    if near(anchor - 6, i + 7, WRITE) or tokens[anchor].word in SPEAK:
        return 3
    if near(anchor - 3, i + 4, RULE_WORDS):
        return 2
    rest = text[here.end :].lstrip()
    return 1 if not rest or not rest[0].isalnum() else 0


def asked_language(text: str) -> tuple[str, str] | None:
    """(code, the words that ask for it) of the language the prompt asks replies to be in."""
    tokens = _tokens(text)
    best: tuple[int, str, str] | None = None
    for i, token in enumerate(tokens):
        code = NAME_TO_CODE.get(token.word)
        anchor = None if code is None else _anchor(tokens, i)
        if anchor is None:
            continue
        score = _score(text, tokens, i, anchor)
        if score and (best is None or score > best[0]):
            best = (score, code, text[tokens[anchor].start : token.end])
    return None if best is None else (best[1], best[2])


def prompt_language(text: str) -> tuple[str, float] | None:
    """(code, lingua's confidence) of the language the prompt is written in, among the default
    candidate languages; None when lingua cannot tell."""
    values = detector(DEFAULT_CANDIDATE_LANGUAGES).compute_language_confidence_values(text)
    if not values or values[0].value <= 0:
        return None
    return values[0].language.iso_code_639_1.name.lower(), float(values[0].value)


def choose_language(text: str) -> Choice:
    """The asked language, else the prompt's own, else English (said so in the comment)."""
    written = prompt_language(text)
    own = written[0] if written else None
    asked = asked_language(text)
    if asked:
        return Choice(asked[0], "asked", asked[1], own)
    if written:
        return Choice(own, "written", f"lingua, confidence {written[1]:.2f}", own)
    return Choice("en", "assumed", "lingua found no language; English assumed", None)
