"""IFEval instructions from lm-eval's registry as checks, usable by id with kwargs.

Instructions whose verdict holds for any stretch of text (lowercase, no comma, forbidden
words, keyword existence, capital letters, response language) are window-local and score
every window; the others (counts of paragraphs, sentences, bullets, end phrases...) only make
sense on the whole response.
"""

from __future__ import annotations

import inspect
from typing import Any

from harness.scoring.checks import BinaryCheck, CheckResult, Scope

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

# Kwargs the registry iterates over: a bare string would be checked letter by letter.
_LIST_KWARGS = frozenset({"keywords", "forbidden_words"})


def registry() -> dict[str, type]:
    from harness.scoring.offline import ifeval_registry

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


class IfevalCheck(BinaryCheck):
    def __init__(self, check_id: str, instruction_id: str, kwargs: dict, scope: Scope | None):
        self.id = check_id
        self.instruction_id = instruction_id
        self.scope = scope or natural_scope(instruction_id)
        self.instruction = build_instruction(instruction_id, kwargs)

    def score(self, text: str) -> CheckResult:
        if not text.strip():
            return CheckResult(value=float("nan"), reason="empty text")
        followed = bool(self.instruction.check_following(text))
        reason = "followed" if followed else f"violates {self.instruction_id}"
        return CheckResult(value=1.0 if followed else 0.0, reason=reason)
