"""IFEval instructions from lm-eval's registry as checks, usable by id with kwargs.

Instructions whose verdict holds for any stretch of text (lowercase, no comma, forbidden
words, keyword existence, capital letters, response language) are window-local and score
every window; the others (counts of paragraphs, sentences, bullets, end phrases...) only make
sense on the whole response.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any, Literal, Self

from pydantic import ConfigDict, Field, PrivateAttr, model_validator

from harness.checks.base import CUT_OFF, Check, CheckResult, NonEmptyText, Scope, register
from harness.checks.ifeval_offline import ifeval_registry

WINDOW_LOCAL = frozenset(
    {
        "change_case:english_lowercase",
        "change_case:english_capital",
        "punctuation:no_comma",
        "keywords:forbidden_words",
        "keywords:existence",
        "language:response_language",
    }
)

# Counts that only grow as a reply goes on, by the kwarg holding their relation (None: "at
# least" always): on a cut reply, "at least" decided by a pass and "less than" by a failure.
_GROWING_COUNTS: dict[str, str | None] = {
    "keywords:frequency": "relation",
    "keywords:letter_frequency": "let_relation",
    "length_constraints:number_sentences": "relation",
    "length_constraints:number_words": "relation",
    "change_case:capital_word_frequency": "capital_relation",
    "detectable_content:number_placeholders": None,
    "detectable_format:number_highlighted_sections": None,
    "detectable_format:multiple_sections": None,
    "detectable_format:title": None,
}
# Decided by the reply's start: a cut reply decides them as a whole one does.
_FROM_START = frozenset({"combination:repeat_prompt"})

# Kwargs the registry iterates over: a bare string would be checked letter by letter.
_LIST_KWARGS = frozenset({"keywords", "forbidden_words"})


def registry() -> dict[str, type]:
    return ifeval_registry().INSTRUCTION_DICT


def natural_scope(instruction_id: str) -> Scope:
    return "window" if instruction_id in WINDOW_LOCAL else "response"


def build_instruction(instruction_id: str, kwargs: dict[str, Any]):
    """Instantiate and configure one instruction; ValueError with one line when it cannot be."""
    known = registry()
    if instruction_id not in known:
        raise ValueError(f"unknown IFEval instruction id '{instruction_id}'")
    cls = known[instruction_id]
    params = [
        name for name in inspect.signature(cls.build_description).parameters if name != "self"
    ]
    unknown = sorted(set(kwargs) - set(params))
    if unknown:
        raise ValueError(
            f"IFEval '{instruction_id}' takes no kwarg {unknown[0]!r} "
            f"(it takes: {', '.join(params) or 'none'})"
        )
    # A missing kwarg would make the registry draw a random value: results must not depend on it.
    missing = [name for name in params if kwargs.get(name) is None]
    if missing:
        raise ValueError(f"IFEval '{instruction_id}' needs kwarg(s): {', '.join(missing)}")
    for name in _LIST_KWARGS & set(kwargs):
        value = kwargs[name]
        if not (isinstance(value, list) and value and all(isinstance(v, str) for v in value)):
            raise ValueError(f"IFEval '{instruction_id}' kwarg '{name}' must be a list of strings")
    instruction = cls(instruction_id)
    try:
        instruction.build_description(**kwargs)
    except Exception as exc:  # the registry asserts and raises ValueError on bad values
        raise ValueError(f"IFEval '{instruction_id}' rejects kwargs {kwargs}: {exc}") from None
    return instruction


@register
class IfevalCheck(Check):
    """One IFEval instruction, by its registry id (`id` in the suite) with its kwargs."""

    # A suite names the instruction `id`, but on every check `id` is the check id
    # (`ifeval:<instruction>`): the field is `instruction_id`, read and dumped as `id`.
    model_config = ConfigDict(serialize_by_alias=True)

    type: Literal["ifeval"]
    instruction_id: NonEmptyText = Field(alias="id")
    kwargs: dict[str, Any] = Field(default_factory=dict)
    scope: Scope  # left out (or null) in the suite: the instruction's natural scope
    _instruction: Any = PrivateAttr()

    @model_validator(mode="before")
    @classmethod
    def _natural_scope(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("scope") is None:
            return {**data, "scope": natural_scope(str(data.get("id")))}
        return data

    @model_validator(mode="after")
    def _build(self) -> Self:
        # Built at load, so an unknown id or kwargs that do not fit fail before any run.
        self._instruction = build_instruction(self.instruction_id, dict(self.kwargs))
        return self

    @property
    def base_id(self) -> str:
        return f"ifeval:{self.instruction_id}"

    def score(self, text: str) -> CheckResult:
        return self.score_many([text])[0]

    def when_cut_off(self, result: CheckResult) -> CheckResult:
        """Window-local and start-decided instructions keep their verdict; a growing count
        keeps the verdict more text cannot undo; the rest (an end phrase, a postscript, exact
        counts, JSON, quotation) need the end: CUT_OFF."""
        rule = self.instruction_id
        if rule in WINDOW_LOCAL or rule in _FROM_START or not result.determined:
            return result
        if rule in _GROWING_COUNTS:
            relation_kwarg = _GROWING_COUNTS[rule]
            relation = self.kwargs.get(relation_kwarg) if relation_kwarg else "at least"
            passed = result.value >= 1.0
            return result if passed == (relation != "less than") else CUT_OFF
        return CUT_OFF

    def score_many(self, texts: Sequence[str]) -> list[CheckResult]:
        """Each text scored by the built instruction, read once per batch: a private
        attribute is read through pydantic's `__getattr__` (~5 us, ~120,000 texts per 10,000
        logged conversations). The three possible results are made once and shared (frozen)."""
        if not texts:
            return []
        check = self._instruction.check_following
        empty = CheckResult(value=float("nan"), reason="empty text")
        followed = CheckResult(value=1.0, reason="followed")
        violated = CheckResult(value=0.0, reason=f"violates {self.instruction_id}")
        return [
            empty if not text.strip() else followed if check(text) else violated for text in texts
        ]
