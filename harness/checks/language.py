"""Language identification with lingua, restricted to a candidate set.

The detector is built once per process per candidate set and reused: lingua with all 75
languages costs ~1.2 GB RSS, a dozen candidates ~340 MB with the models loaded.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Sequence
from typing import Annotated, Literal, Self

from pydantic import AfterValidator, Field, PrivateAttr

from harness.checks.base import NAN, Check, CheckResult, register
from harness.checks.text import letters, strip_code

# The languages a window is told apart from when a run config does not name them.
DEFAULT_CANDIDATE_LANGUAGES = [
    "en",
    "fr",
    "es",
    "de",
    "it",
    "pt",
    "nl",
    "ru",
    "pl",
    "sv",
    "tr",
    "zh",
]


def _iso_code(code: str):
    import lingua

    return lingua.IsoCode639_1.from_str(code)


def language_code(value: str) -> str:
    """`value` as a lowercase ISO 639-1 code of a language lingua detects; ValueError if not.

    Only lingua's own codes pass: any other code would fail in the middle of scoring.
    """
    code = value.strip().lower()
    try:
        _iso_code(code)
    except ValueError:
        raise ValueError(
            f"'{value}' is not an ISO 639-1 language code that the language detector (lingua) "
            "supports (e.g. fr, de, ru)"
        ) from None
    return code


LanguageCode = Annotated[str, AfterValidator(language_code)]


@functools.lru_cache(maxsize=2)
def _detector_for(codes: frozenset[str]):
    import lingua

    isos = [_iso_code(code) for code in sorted(codes)]
    # Preloaded: the cost is paid once here, not as a spike inside a later (timed) batch.
    builder = lingua.LanguageDetectorBuilder.from_iso_codes_639_1(*isos)
    return builder.with_preloaded_language_models().build()


def detector(candidates: Iterable[str]):
    """The shared lingua detector for this candidate set (built on first use)."""
    return _detector_for(frozenset(code.lower() for code in candidates))


@register
class LanguageCheck(Check):
    """value = lingua's confidence that the window is in `target` (among the candidates).

    Code and URLs are removed first; below `min_letters` letters the value is NaN.
    """

    type: Literal["language"]
    target: LanguageCode
    min_letters: int = Field(20, gt=0)
    threshold: float = Field(0.5, ge=0, le=1)
    scope: Literal["window"] = "window"
    # The run's candidate languages (`scoring.languages`), given by `bind`.
    _candidates: tuple[str, ...] = PrivateAttr(tuple(DEFAULT_CANDIDATE_LANGUAGES))

    @property
    def base_id(self) -> str:
        return f"language:{self.target}"

    @property
    def candidates(self) -> list[str]:
        """The languages lingua chooses among: the run's candidates and the target."""
        return sorted({*(c.lower() for c in self._candidates), self.target})

    def bind(self, check_id: str, candidates: Sequence[str]) -> Self:
        bound = super().bind(check_id, candidates)
        bound._candidates = tuple(candidates)
        return bound

    def score(self, text: str) -> CheckResult:
        return self.score_many([text])[0]

    def score_many(self, texts: Sequence[str]) -> list[CheckResult]:
        """Score a batch in one call to lingua (its parallel API releases the GIL)."""
        import lingua

        prepared = [strip_code(text) for text in texts]
        counts = [len(letters(prose)) for prose in prepared]
        todo = [i for i, n in enumerate(counts) if n >= self.min_letters]
        values = detector(self.candidates).compute_language_confidence_in_parallel(
            [prepared[i] for i in todo], lingua.Language.from_iso_code_639_1(_iso_code(self.target))
        )
        confidence = dict(zip(todo, values, strict=True))
        results = []
        for i, n in enumerate(counts):
            if i not in confidence:
                reason = f"{n} letters < {self.min_letters}"
                results.append(CheckResult(value=NAN, reason=reason))
            else:
                value = float(confidence[i])
                results.append(CheckResult(value=value, reason=f"{self.target} {value:.2f}"))
        return results

    def passed(self, result: CheckResult) -> bool | None:
        return None if math.isnan(result.value) else result.value >= self.threshold
