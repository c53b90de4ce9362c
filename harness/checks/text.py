"""The harness's own text checks: regex, persona, script share and sentence length.

Also the text helpers the language check shares: `strip_code` and `letters`.
"""

from __future__ import annotations

import math
import re
import unicodedata
from typing import Annotated, Any, Literal

from pydantic import Field, PrivateAttr, field_validator

from harness.checks.base import CUT_OFF, NAN, Check, CheckResult, NonEmptyText, Scope, register

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


def _snippet(text: str, start: int, end: int, width: int = 20) -> str:
    piece = text[max(0, start - width) : end + width].replace("\n", " ")
    return piece.strip()


@register
class RegexCheck(Check):
    """`regex_must`: the pattern occurs; `regex_must_not`: it does not."""

    type: Literal["regex_must", "regex_must_not"]
    pattern: NonEmptyText
    ignore_case: bool = True
    scope: Scope = "window"
    name: Annotated[str, Field(pattern=r"^[\w.-]+$")] | None = None  # check id (default: pattern)
    _regex: re.Pattern[str] = PrivateAttr()

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"regex does not compile: {exc}") from None
        return value

    def model_post_init(self, context: Any) -> None:
        self._regex = re.compile(self.pattern, re.IGNORECASE if self.ignore_case else 0)

    @property
    def base_id(self) -> str:
        return f"{self.type}:{self.name or self.pattern}"

    def score(self, text: str) -> CheckResult:
        match = self._regex.search(text)
        if self.type == "regex_must":
            if match:
                return CheckResult(value=1.0, reason="found")
            return CheckResult(value=0.0, reason=f"pattern {self._regex.pattern!r} not found")
        if match:
            return CheckResult(
                value=0.0, reason=f"forbidden match: {_snippet(text, *match.span(), width=15)!r}"
            )
        return CheckResult(value=1.0, reason="absent")

    def when_cut_off(self, result: CheckResult) -> CheckResult:
        """On a cut reply a match found stands (`regex_must` passed, `regex_must_not`
        failed): more text cannot take it back, unless the pattern is anchored at the end."""
        if self.scope == "window" or not result.determined:
            return result
        found = (result.value >= 1.0) == (self.type == "regex_must")
        anchored_at_end = "$" in self.pattern or r"\Z" in self.pattern
        return result if found and not anchored_at_end else CUT_OFF


def _name_regex(name: str) -> re.Pattern[str]:
    # Whole-word match that also works for names ending in punctuation or non-Latin letters.
    return re.compile(rf"(?<!\w){re.escape(name)}(?!\w)", re.IGNORECASE)


@register
class PersonaCheck(Check):
    """The persona's name appears (response scope only) and no rival name does.

    A 64-token window rarely restates who is speaking, so at window scope only the rivals are
    checked: a window that calls the assistant by another name has dropped the persona.
    """

    type: Literal["persona"]
    name: NonEmptyText
    rivals: list[NonEmptyText] = Field(default_factory=list)
    scope: Scope = "response"
    _name_re: re.Pattern[str] = PrivateAttr()
    _rival_res: list[tuple[str, re.Pattern[str]]] = PrivateAttr()

    def model_post_init(self, context: Any) -> None:
        self._name_re = _name_regex(self.name)
        self._rival_res = [(rival, _name_regex(rival)) for rival in self.rivals]

    @property
    def base_id(self) -> str:
        return f"persona:{self.name}" + ("" if self.scope == "window" else "@response")

    def score(self, text: str) -> CheckResult:
        for rival, regex in self._rival_res:
            if regex.search(text):
                return CheckResult(value=0.0, reason=f"rival name {rival!r} appears")
        if self.scope == "response" and not self._name_re.search(text):
            return CheckResult(value=0.0, reason=f"name {self.name!r} never appears")
        return CheckResult(value=1.0, reason="persona kept")

    def when_cut_off(self, result: CheckResult) -> CheckResult:
        """A rival named stands; the name missing, or a rival not named yet, could change
        with the rest of a cut reply."""
        if self.scope == "window" or result.reason.startswith("rival name"):
            return result
        return CUT_OFF


def letters(text: str) -> list[str]:
    return [ch for ch in text if ch.isalpha()]


def letter_count(text: str, enough: int | None = None) -> int:
    """len(letters(text)), without building the list (the language check counts only). With
    `enough`, the count stops in the first 64-character piece that reaches it: exact below
    `enough`, at least `enough` otherwise (a long reply is not counted to its end)."""
    if enough is None:
        return sum(map(str.isalpha, text))
    found = 0
    for start in range(0, len(text), 64):
        found += sum(map(str.isalpha, text[start : start + 64]))
        if found >= enough:
            break
    return found


@register
class ScriptCheck(Check):
    """Share of the letters that belong to one Unicode script, e.g. Cyrillic for Russian
    (code and URLs removed first)."""

    type: Literal["script"]
    script: NonEmptyText  # Unicode script name, e.g. Cyrillic, Latin, Greek, Han
    min_share: float = Field(0.8, ge=0, le=1)
    min_letters: int = Field(20, gt=0)
    scope: Literal["window"] = "window"

    @field_validator("script")
    @classmethod
    def _known(cls, value: str) -> str:
        if value not in SCRIPT_PREFIXES:
            raise ValueError(
                f"unknown script '{value}' (expected one of {sorted(SCRIPT_PREFIXES)})"
            )
        return value

    @property
    def base_id(self) -> str:
        return f"script:{self.script}"

    def score(self, text: str) -> CheckResult:
        # Code and URLs are not prose: a Russian reply with a pip command in it is Russian
        # (as the language check reads it; checks.jsonl `script-ru-code`).
        found = letters(strip_code(text))
        if len(found) < self.min_letters:
            return CheckResult(value=NAN, reason=f"{len(found)} letters < {self.min_letters}")
        prefixes = SCRIPT_PREFIXES[self.script]
        share = sum(unicodedata.name(ch, "").startswith(prefixes) for ch in found) / len(found)
        return CheckResult(value=share, reason=f"{share:.0%} of {len(found)} letters {self.script}")

    def passed(self, result: CheckResult) -> bool | None:
        return None if math.isnan(result.value) else result.value >= self.min_share


# A sentence ends at . ! ? (and CJK full stops) followed by space or end, or at a line break;
# list markers and headings therefore count as their own sentences.
_SENTENCE_END = re.compile(r"(?<=[.!?。！？])[\"')\]»”]*\s+|\n+")
_WORD = re.compile(r"[^\W_]+(?:['’-][^\W_]+)*")


def split_sentences(text: str) -> list[str]:
    return [part.strip() for part in _SENTENCE_END.split(text) if part and part.strip()]


@register
class MaxSentenceWordsCheck(Check):
    """Every sentence has at most `max_words` words; value = share of sentences that fit.

    Code blocks are skipped: their "sentences" are not prose.
    """

    type: Literal["max_sentence_words"]
    max_words: int = Field(gt=0)
    scope: Literal["window"] = "window"

    @property
    def base_id(self) -> str:
        return f"max_sentence_words:{self.max_words}"

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


_FENCED = re.compile(r"```.*?(?:```|\Z)|~~~.*?(?:~~~|\Z)", re.DOTALL)
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_URL = re.compile(r"https?://\S+|www\.\S+")


def strip_code(text: str) -> str:
    """Drop fenced and inline code and URLs: they are not in the language the prompt asked for.

    A window can start inside a fence opened in the previous window; an odd number of
    fence markers with the first one closing is handled by treating the text up to it as code.
    """
    if "`" not in text and "~~~" not in text and "http" not in text and "www." not in text:
        return text  # every match below holds one of these: most prose runs no regex
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
