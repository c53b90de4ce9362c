"""Build the runnable checks of a task item from its check specs (harness.config)."""

from __future__ import annotations

from collections.abc import Sequence

from harness import config as cfg
from harness.config import DEFAULT_CANDIDATE_LANGUAGES, TaskItem
from harness.scoring.checks import (
    Check,
    MaxSentenceWordsCheck,
    PersonaCheck,
    RegexCheck,
    ScriptCheck,
)

_CACHE: dict[tuple[str, tuple[str, ...]], list[Check]] = {}


def check_id(spec: cfg.CheckSpec) -> str:
    """A short stable id: `language:fr`, `ifeval:punctuation:no_comma`, `persona:Nora`..."""
    match spec:
        case cfg.LanguageCheck():
            return f"language:{spec.target}"
        case cfg.IfevalCheck():
            return f"ifeval:{spec.id}"
        case cfg.RegexCheck():
            return f"{spec.type}:{spec.name or spec.pattern}"
        case cfg.PersonaCheck():
            return f"persona:{spec.name}" + ("" if spec.scope == "window" else "@response")
        case cfg.ScriptCheck():
            return f"script:{spec.script}"
        case cfg.MaxSentenceWordsCheck():
            return f"max_sentence_words:{spec.max_words}"
    raise TypeError(f"unknown check spec {type(spec).__name__}")


def build_check(spec: cfg.CheckSpec, ident: str, candidates: Sequence[str]) -> Check:
    from harness.scoring.ifeval import IfevalCheck
    from harness.scoring.language import LanguageCheck

    match spec:
        case cfg.LanguageCheck():
            return LanguageCheck(ident, spec.target, spec.min_letters, spec.threshold, candidates)
        case cfg.IfevalCheck():
            return IfevalCheck(ident, spec.id, dict(spec.kwargs), spec.scope)
        case cfg.RegexCheck():
            must = spec.type == "regex_must"
            return RegexCheck(ident, spec.pattern, must, spec.ignore_case, spec.scope)
        case cfg.PersonaCheck():
            return PersonaCheck(ident, spec.name, list(spec.rivals), spec.scope)
        case cfg.ScriptCheck():
            return ScriptCheck(ident, spec.script, spec.min_share, spec.min_letters)
        case cfg.MaxSentenceWordsCheck():
            return MaxSentenceWordsCheck(ident, spec.max_words)
    raise TypeError(f"unknown check spec {type(spec).__name__}")


def item_checks(item: TaskItem, candidates: Sequence[str] | None = None) -> list[Check]:
    """The item's checks, built once per (item, candidate set) and reused."""
    langs = tuple(sorted(candidates or DEFAULT_CANDIDATE_LANGUAGES))
    key = (item.model_dump_json(), langs)
    if key not in _CACHE:
        checks: list[Check] = []
        seen: dict[str, int] = {}
        for spec in item.checks:
            ident = check_id(spec)
            seen[ident] = seen.get(ident, 0) + 1
            if seen[ident] > 1:  # two checks of one kind on one item keep distinct ids
                ident = f"{ident}#{seen[ident]}"
            checks.append(build_check(spec, ident, langs))
        _CACHE[key] = checks
    return _CACHE[key]
