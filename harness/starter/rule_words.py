"""The words and patterns `harness.starter.rules` reads a prompt's rules with, in English,
German and French. Patterns match folded text (lowercase, no accents: `language.fold`) unless
they say otherwise; each names what it captures."""

from __future__ import annotations

import re

from harness.starter.language import words

# Small numbers written out ("in one sentence", "in drei Sätzen", "en deux phrases").
NUMBER_WORDS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "ein": 1, "eine": 1, "einem": 1, "einen": 1, "einer": 1, "zwei": 2,
    "drei": 3, "vier": 4, "funf": 5, "sechs": 6, "sieben": 7, "acht": 8, "neun": 9, "zehn": 10,
    "un": 1, "une": 1, "deux": 2, "trois": 3, "quatre": 4, "cinq": 5, "sept": 7, "huit": 8,
    "neuf": 9, "dix": 10,
}  # fmt: skip
_NUMBER = r"(\d+|" + "|".join(sorted(NUMBER_WORDS, key=len, reverse=True)) + r")"

# "at most N" (N itself allowed) and "under N" (N not allowed) before the count and its unit.
_AT_MOST = (
    r"at most|no more than|not more than|maximum of|maximum|max\.?|up to|hochstens|maximal|"
    r"nicht mehr als|bis zu|au maximum|au plus|pas plus de|maximum de|jusqu'a|jusqu’a"
)
_UNDER = r"under|fewer than|less than|below|unter|weniger als|moins de"
_AT_LEAST = r"at least|no fewer than|minimum of|mindestens|au moins|au minimum"
# A unit: (the harness's name for it, its words in the three languages).
UNITS = {
    "words": r"words?|worte|wortern|worter|wort|mots?",
    "sentences": r"sentences?|satzen|satze|satz|phrases?",
}
# "N words or fewer", "N Wörter oder weniger", "80 mots maximum", "N words max".
_AFTER_AT_MOST = r"(?:or (?:fewer|less)|oder weniger|maximum|max\.?|au maximum|au plus|at most)"


def length_patterns(unit: str) -> list[tuple[re.Pattern[str], str]]:
    """(pattern capturing the number, the bound it states: `at_most`, `under`, `at_least`)."""
    words = UNITS[unit]
    return [
        (re.compile(rf"\b(?:{_AT_MOST})\s+{_NUMBER}\s+(?:{words})\b"), "at_most"),
        (re.compile(rf"\b(?:{_UNDER})\s+{_NUMBER}\s+(?:{words})\b"), "under"),
        (re.compile(rf"\b(?:{_AT_LEAST})\s+{_NUMBER}\s+(?:{words})\b"), "at_least"),
        (re.compile(rf"\b{_NUMBER}\s+(?:{words})\s+{_AFTER_AT_MOST}"), "at_most"),
        # "in one sentence", "in einem Satz", "en une phrase": exactly that many, at most
        (re.compile(rf"\b(?:in|en)\s+{_NUMBER}\s+(?:{words})\b"), "at_most"),
    ]


# A forbidden mention: a negation and a verb of mentioning, in either order within the
# sentence ("Never mention", "Nenne niemals", "ne mentionne jamais", "Do not name", "Nunca
# menciones").
NEGATION = re.compile(
    r"\b(?:never|do not|don't|dont|must not|mustn't|should not|avoid|nie|niemals|nicht|keine|"
    r"keinesfalls|auf keinen fall|jamais|ne|n'|pas|nunca|jamas|"
    r"no(?= (?:menciones|mencione|nombres|nombre|recomiendes|recomiende|cites|cite|hables|"
    r"hable|digas|diga|uses|use)\b))\b"
)
MENTION = re.compile(
    r"\b(?:mention|mentions|mentioning|name|names|naming|recommend|refer to|talk about|"
    r"say|use|write|nenne|nennst|nennen|erwahne|erwahnst|erwahnen|empfiehl|empfiehlst|"
    r"verwende|verwendest|benutze|sage|schreibe|sprich uber|mentionne|mentionnez|mentionner|"
    r"cite|citez|citer|nomme|nommez|nommer|recommande|recommandez|utilise|utilisez|dis|dites|"
    r"parle de|parlez de|menciones|mencione|mencionar|nombres|nombre|recomiendes|recomiende|"
    r"cites|cite|hables de|hable de|digas|diga|uses|use)\b"
)
# Words left out of a forbidden rule's name ("no-konkurrenzbanken", "no-banques-concurrentes").
SLUG_SKIP = words(
    "a an the any other our your ever die der das den dem des ein eine einen andere anderen "
    "le la les l un une des d de du autres vos nos"
)
# Where a prompt lists terms after a category: "such as X, Y", "wie X oder Y", "comme X".
EXAMPLES = re.compile(
    r"(?:\bsuch as\b|\blike\b|\be\.g\.|\bincluding\b|\bwie\b|\bz\. ?b\.|\bzum beispiel\b|"
    r"\bbeispielsweise\b|\bcomme\b|\btels? que\b|\btelles? que\b|\bnotamment\b|\bpar exemple\b|"
    r"\bcomo\b|\btales como\b|\bpor ejemplo\b|:)"
)
LIST_SPLIT = re.compile(
    r"\s*(?:,|;|/|\bor\b|\band\b|\boder\b|\bund\b|\bou\b|\bet\b|\bo\b|\by\b)\s*"
)
# The words a forbidden term may be named with that are not the term ("die Sparkasse", "zur
# Sparkasse", "l'ING", "el Banco Azul"): articles, prepositions and their contractions in the
# languages init reads rules in and writes requests in (English, German, French, Spanish).
# The term is matched without them, so every way a reply can lead into it matches.
TERM_LEADERS = words(
    "the a an at of from to with by for "
    "der die das den dem des ein eine einen einem einer eines von vom bei beim zu zur zum im "
    "in ins am an auf aus mit fur uber "
    "le la les l un une des du de d au aux a chez avec pour par en "
    "el los las lo del al uno una unos unas con por para"
)
# "the word X", "das Wort X", "le mot X" (unquoted): one term.
WORD_TERM = re.compile(r"\b(?:the word|das wort|le mot)\s+([^\W\d_][\w'-]*)")

# Quoted phrases, in the quotes the three languages use (matched on the original text; a
# straight apostrophe counts as a quote only with no letter on its outer side: "l'assistant"
# is no quote, and one between letters inside a quote is part of it: 'I don't know').
QUOTED = re.compile(
    r"(?<!\w)'((?:[^'\n]|(?<=\w)'(?=\w))+?)'(?!\w)|\"([^\"\n]+)\"|„([^“”\"\n]+)[“”\"]|«\s*([^»\n]+?)\s*»|"
    r"“([^”\n]+)”|‚([^‘’'\n]+)[‘’']|‘([^’\n]+)’|»([^«\n]+)«"
)

# A required sign-off or opening: a verb before the quoted phrase ("End every reply with",
# "Beende jede Antwort mit", "Termine chaque réponse par", "Start with", "Beginne mit").
END_VERBS = re.compile(
    r"\b(?:end|ends|finish|close|conclude|sign off|sign|beende|beendest|schliesse|schliess|"
    r"unterschreibe|unterzeichne|termine|terminez|finis|finissez|conclus|concluez|signe|"
    r"signez)\b"
)
START_VERBS = re.compile(
    r"\b(?:begin|start|open|beginne|beginnst|starte|eroffne|commence|commencez|debute|"
    r"debutez)\b"
)

# A persona's name, matched on the original text: "You are Ava, ...", "Du bist Lena, die ...",
# "Tu es Claire, la ...", "You are Max from Acme" (the name followed by an apposition or by
# "from"/"von"/"de" and a capital), or a plain naming ("Your name is Ava", "Du heißt Lena").
PERSONA_IS = re.compile(
    r"\b(?:[Yy]ou are|[Yy]ou're|[Dd]u bist|[Tt]u es|[Vv]ous êtes|[Ii]hr seid|[Ss]ie sind)\s+"
    r"([A-ZÄÖÜÀ-Ý][\w'-]*)(?=\s*[,(–—]|\s+-\s|\s+(?:from|of|at|von|bei|aus|de|chez|du)\s+[A-Z])"
)
PERSONA_NAMED = re.compile(
    r"\b(?:[Yy]our name is|[Dd]ein Name ist|[Dd]u heißt|[Dd]u heisst|[Ii]hr Name ist|"
    r"[Tt]on nom est|[Tt]u t'appelles|[Tt]u t’appelles|[Vv]otre nom est|[Cc]all yourself|"
    r"[Nn]enne dich)\s+([A-ZÄÖÜÀ-Ý][\w'-]*)"
)
# Capitalised words after "you are" that are roles, not names (German nouns are capitalised).
NOT_PERSONA = re.compile(
    r"^(?:a|an|the|der|die|das|ein|eine|le|la|les|l|un|une|ai|ki|ia)$|"
    r"(?:assistent|assistentin|assistant|berater|beraterin|agent|agentin|experte|expertin|"
    r"helfer|helferin|bot|mitarbeiter|mitarbeiterin|conseiller|conseillere|support)$"
)
# Names an assistant leaves its persona for: the names models are trained to give
# themselves (persona check `rivals`).
ASSISTANT_NAMES = ("SmolLM", "ChatGPT", "Claude", "Gemini", "Llama", "Qwen", "Mistral", "Gemma")

# A sentence that only says who the assistant is ("You are a helpful assistant.",
# "Du bist der Support-Assistent von ...", "Tu es un conseiller ..."): a role, not a rule.
ROLE = re.compile(
    r"^(?:you are|you're|du bist|tu es|vous etes|ihr seid|sie sind|i am|ich bin|je suis)\s+"
    r"(?:a|an|the|der|die|das|ein|eine|einer|le|la|l'|l’|un|une)\b"
)

# Formats (IFEval checkers or a regex), by the words that ask for them.
JSON_FORMAT = re.compile(r"\bjson\b")
BULLETS = re.compile(
    r"\b(?:bullet points?|bullet lists?|bulleted|bullets|aufzahlungspunkte[n]?|"
    r"aufzahlungszeichen|aufzahlungen|aufzahlung|stichpunkte[n]?|listes? a puces|puces)\b"
)
LOWERCASE = re.compile(r"\b(?:lowercase|lower case|lower-case)\b")
NO_COMMA = re.compile(r"\b(?:no|without|any) commas?\b|\bkeine kommas?\b|\bsans virgules?\b")
