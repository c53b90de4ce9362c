"""A check type: the text holds no digit (`type: no_digits` in a suite's `checks:`)."""

from __future__ import annotations

import re
from typing import Literal

from harness.checks import Check, CheckResult, register

_DIGIT = re.compile(r"\d")


@register
class NoDigitsCheck(Check):
    """value 1 when the text has no digit, else the share of its characters that are not."""

    type: Literal["no_digits"]

    @property
    def base_id(self) -> str:
        return "no_digits"

    def score(self, text: str) -> CheckResult:
        if not text.strip():
            return CheckResult(value=float("nan"), reason="empty text")
        digits = len(_DIGIT.findall(text))
        if digits == 0:
            return CheckResult(value=1.0, reason="no digit")
        return CheckResult(value=1.0 - digits / len(text), reason=f"{digits} digit(s)")
