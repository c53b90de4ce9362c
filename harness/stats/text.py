"""Intervals written as text, in one place: the report's sections, the terminal summary, the
gate details (gates.csv `detail`) and `harness relay` write an estimate and its interval through
`interval_text`, or its ends alone through `bracket`, each with its own number format (`num`: a
format spec such as ".2f", or a function of the number). The CSVs hold the ends as numbers; only
the gate detail, a sentence, holds them as text.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

Number = str | Callable[[Any], str]  # a format spec (".2f", "g") or a number -> text function


def _formatter(num: Number) -> Callable[[Any], str]:
    if callable(num):
        return num
    return lambda x: format(float(x), num)


def missing(x: Any) -> bool:
    """No number: None, NaN, or what does not read as a float (an empty CSV cell)."""
    try:
        return x is None or math.isnan(float(x))
    except (TypeError, ValueError):
        return True


def has_interval(low: Any, high: Any) -> bool:
    return not (missing(low) or missing(high))


def bracket(
    low: Any, high: Any, num: Number = ".2f", *, opening: str = "[", sep: str = ", ", end: str = "]"
) -> str:
    """The ends: `[0.41, 1.00]` (`opening`, `sep`, `end` for a sentence's `95 % CI a to b`)."""
    f = _formatter(num)
    return f"{opening}{f(low)}{sep}{f(high)}{end}"


def interval_text(
    value: Any, low: Any, high: Any, num: Number = ".2f", *, no_interval: str | None = ""
) -> str:
    """The estimate and its interval: `0.95 [0.41, 1.00]`. Where an end is missing, the
    estimate followed by `no_interval` (e.g. " (no CI)"); `no_interval=None` writes the
    bracket anyway (its ends as `num` writes a missing number)."""
    f = _formatter(num)
    if no_interval is not None and not has_interval(low, high):
        return f(value) + no_interval
    return f"{f(value)} {bracket(low, high, f)}"
