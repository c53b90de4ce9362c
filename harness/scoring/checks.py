"""The Check interface and the harness's own checks (regex, persona, script, sentence length).

A check scores one piece of text: a window of the output (scope `window`) or the whole
generated response (scope `response`). It returns a value in 0..1, or NaN when the text does
not let it decide (too few letters), with a short reason; its pass rule turns the value into
passed / failed / undetermined (None).
"""

from __future__ import annotations

import math
import re
import unicodedata
from typing import Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

Scope = Literal["window", "response"]
NAN = float("nan")

# Unicode character-name prefixes of the scripts a `script` check may name.
SCRIPT_PREFIXES = {
    "Latin": ("LATIN",),
    "Cyrillic": ("CYRILLIC",),
    "Greek": ("GREEK",),
    "Arabic": ("ARABIC",),
    "Hebrew": ("HEBREW",),
    "Han": ("CJK UNIFIED IDEOGRAPH", "CJK COMPATIBILITY IDEOGRAPH"),
    "Hiragana": ("HIRAGANA",),
    "Katakana": ("KATAKANA",),
    "Hangul": ("HANGUL",),
    "Devanagari": ("DEVANAGARI",),
    "Thai": ("THAI",),
    "Armenian": ("ARMENIAN",),
    "Georgian": ("GEORGIAN",),
    "Bengali": ("BENGALI",),
    "Tamil": ("TAMIL",),
}


class CheckResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    value: float  # 0..1, NaN when undetermined
    reason: str = ""

    @property
    def determined(self) -> bool:
        return not math.isnan(self.value)


@runtime_checkable
class Check(Protocol):
    id: str
    scope: Scope

    def score(self, text: str) -> CheckResult: ...

    def passed(self, result: CheckResult) -> bool | None: ...


class BinaryCheck:
    """Base for checks whose value is 1 (followed) or 0 (violated); passes on 1."""

    id: str
    scope: Scope

    def passed(self, result: CheckResult) -> bool | None:
        return None if math.isnan(result.value) else result.value >= 1.0


def _snippet(text: str, start: int, end: int, width: int = 20) -> str:
    piece = text[max(0, start - width) : end + width].replace("\n", " ")
    return piece.strip()


class RegexCheck(BinaryCheck):
    """`regex_must`: the pattern occurs; `regex_must_not`: it does not."""

    def __init__(self, check_id: str, pattern: str, must: bool, ignore_case: bool, scope: Scope):
        self.id, self.scope, self.must = check_id, scope, must
        self.regex = re.compile(pattern, re.IGNORECASE if ignore_case else 0)

    def score(self, text: str) -> CheckResult:
        match = self.regex.search(text)
        if self.must:
            if match:
                return CheckResult(value=1.0, reason="found")
            return CheckResult(value=0.0, reason=f"pattern {self.regex.pattern!r} not found")
        if match:
            return CheckResult(
                value=0.0, reason=f"forbidden match: {_snippet(text, *match.span(), width=15)!r}"
            )
        return CheckResult(value=1.0, reason="absent")


def _name_regex(name: str) -> re.Pattern[str]:
    # Whole-word match that also works for names ending in punctuation or non-Latin letters.
    return re.compile(rf"(?<!\w){re.escape(name)}(?!\w)", re.IGNORECASE)


class PersonaCheck(BinaryCheck):
    """The persona's name appears (response scope only) and no rival name does.

    A 64-token window rarely restates who is speaking, so at window scope only the rivals are
    checked: a window that calls the assistant by another name has dropped the persona.
    """

    def __init__(self, check_id: str, name: str, rivals: list[str], scope: Scope):
        self.id, self.scope, self.name = check_id, scope, name
        self.name_re = _name_regex(name)
        self.rival_res = [(rival, _name_regex(rival)) for rival in rivals]

    def score(self, text: str) -> CheckResult:
        for rival, regex in self.rival_res:
            if regex.search(text):
                return CheckResult(value=0.0, reason=f"rival name {rival!r} appears")
        if self.scope == "response" and not self.name_re.search(text):
            return CheckResult(value=0.0, reason=f"name {self.name!r} never appears")
        return CheckResult(value=1.0, reason="persona kept")


def letters(text: str) -> list[str]:
    return [ch for ch in text if ch.isalpha()]


class ScriptCheck:
    """Share of the letters that belong to one Unicode script, e.g. Cyrillic for Russian."""

    def __init__(self, check_id: str, script: str, min_share: float, min_letters: int):
        self.id, self.scope = check_id, "window"
        self.script, self.min_share, self.min_letters = script, min_share, min_letters
        self.prefixes = SCRIPT_PREFIXES[script]

    def _in_script(self, ch: str) -> bool:
        return unicodedata.name(ch, "").startswith(self.prefixes)

    def score(self, text: str) -> CheckResult:
        found = letters(text)
        if len(found) < self.min_letters:
            return CheckResult(value=NAN, reason=f"{len(found)} letters < {self.min_letters}")
        share = sum(self._in_script(ch) for ch in found) / len(found)
        return CheckResult(value=share, reason=f"{share:.0%} of {len(found)} letters {self.script}")

    def passed(self, result: CheckResult) -> bool | None:
        return None if math.isnan(result.value) else result.value >= self.min_share


# A sentence ends at . ! ? (and CJK full stops) followed by space or end, or at a line break;
# list markers and headings therefore count as their own sentences.
_SENTENCE_END = re.compile(r"(?<=[.!?。！？])[\"')\]»”]*\s+|\n+")
_WORD = re.compile(r"[^\W_]+(?:['’-][^\W_]+)*")


def split_sentences(text: str) -> list[str]:
    return [part.strip() for part in _SENTENCE_END.split(text) if part and part.strip()]


class MaxSentenceWordsCheck:
    """Every sentence has at most `max_words` words; value = share of sentences that fit.

    Code blocks are skipped: their "sentences" are not prose.
    """

    def __init__(self, check_id: str, max_words: int, scope: Scope = "window"):
        self.id, self.scope, self.max_words = check_id, scope, max_words

    def score(self, text: str) -> CheckResult:
        sentences = [s for s in split_sentences(strip_code(text)) if _WORD.search(s)]
        if not sentences:
            return CheckResult(value=NAN, reason="no sentence")
        lengths = [len(_WORD.findall(s)) for s in sentences]
        too_long = [n for n in lengths if n > self.max_words]
        value = 1.0 - len(too_long) / len(lengths)
        if too_long:
            return CheckResult(
                value=value,
                reason=f"{len(too_long)} sentence(s) over {self.max_words} words "
                f"(longest {max(too_long)})",
            )
        return CheckResult(value=value, reason=f"longest sentence {max(lengths)} words")

    def passed(self, result: CheckResult) -> bool | None:
        return None if math.isnan(result.value) else result.value >= 1.0


_FENCED = re.compile(r"```.*?(?:```|\Z)|~~~.*?(?:~~~|\Z)", re.DOTALL)
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_URL = re.compile(r"https?://\S+|www\.\S+")


def strip_code(text: str) -> str:
    """Drop fenced and inline code and URLs: they are not in the language the prompt asked for.

    A window can start inside a fence opened in the previous window; an odd number of
    fence markers with the first one closing is handled by treating the text up to it as code.
    """
    if text.count("```") % 2 == 1 and _opens_mid_fence(text):
        text = text[text.index("```") + 3 :]
    text = _FENCED.sub(" ", text)
    text = _INLINE_CODE.sub(" ", text)
    return _URL.sub(" ", text)


def _opens_mid_fence(text: str) -> bool:
    # The first marker closes a fence when it stands alone on its line (no language tag after).
    first = text.index("```")
    rest = text[first + 3 :].split("\n", 1)[0]
    return rest.strip() == "" and text[:first].strip() != ""
