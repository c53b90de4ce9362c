"""Language identification with lingua, restricted to a candidate set.

The detector is built once per process per candidate set and reused: lingua with all 75
languages costs ~1.2 GB RSS, a dozen candidates ~340 MB with the models loaded.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Sequence

from harness.scoring.checks import NAN, CheckResult, letters, strip_code


def lingua_supports(code: str) -> bool:
    import lingua

    return hasattr(lingua.IsoCode639_1, code.upper())


def _language(code: str):
    import lingua

    return lingua.Language.from_iso_code_639_1(getattr(lingua.IsoCode639_1, code.upper()))


@functools.lru_cache(maxsize=2)
def _detector_for(codes: frozenset[str]):
    import lingua

    isos = [getattr(lingua.IsoCode639_1, code.upper()) for code in sorted(codes)]
    # Preloaded: the cost is paid once here, not as a spike inside a later (timed) batch.
    builder = lingua.LanguageDetectorBuilder.from_iso_codes_639_1(*isos)
    return builder.with_preloaded_language_models().build()


def detector(candidates: Iterable[str]):
    """The shared lingua detector for this candidate set (built on first use)."""
    return _detector_for(frozenset(code.lower() for code in candidates))


class LanguageCheck:
    """value = lingua's confidence that the window is in `target` (among the candidates).

    Code and URLs are removed first; below `min_letters` letters the value is NaN.
    """

    scope = "window"

    def __init__(
        self,
        check_id: str,
        target: str,
        min_letters: int,
        threshold: float,
        candidates: Sequence[str],
    ):
        self.id, self.target = check_id, target
        self.min_letters, self.threshold = min_letters, threshold
        self.candidates = sorted({*(c.lower() for c in candidates), target})

    def _prepare(self, text: str) -> tuple[str, int]:
        prose = strip_code(text)
        return prose, len(letters(prose))

    def score(self, text: str) -> CheckResult:
        return self.score_many([text])[0]

    def score_many(self, texts: Sequence[str]) -> list[CheckResult]:
        """Score a batch in one call to lingua (its parallel API releases the GIL)."""
        prepared = [self._prepare(text) for text in texts]
        todo = [i for i, (_, n) in enumerate(prepared) if n >= self.min_letters]
        values = detector(self.candidates).compute_language_confidence_in_parallel(
            [prepared[i][0] for i in todo], _language(self.target)
        )
        confidence = dict(zip(todo, values, strict=True))
        results = []
        for i, (_, n) in enumerate(prepared):
            if i not in confidence:
                reason = f"{n} letters < {self.min_letters}"
                results.append(CheckResult(value=NAN, reason=reason))
            else:
                value = float(confidence[i])
                results.append(CheckResult(value=value, reason=f"{self.target} {value:.2f}"))
        return results

    def passed(self, result: CheckResult) -> bool | None:
        return None if math.isnan(result.value) else result.value >= self.threshold
