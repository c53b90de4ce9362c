"""Behavioural adherence along the output: windows, check rows (checks: harness.checks).

Heavy dependencies (lingua, lm-eval, pandas, lifelines) load inside the functions that use
them, so importing this package stays cheap.
"""

from harness.checks import Check, CheckResult
from harness.scoring.score import (
    RESPONSE_WINDOW,
    WINDOW_COLUMNS,
    WindowRow,
    item_checks,
    item_index,
    reply_fails,
    rows_frame,
    score_records,
    window_fails,
)
from harness.scoring.windows import Window, split_windows

__all__ = [
    "RESPONSE_WINDOW",
    "WINDOW_COLUMNS",
    "Check",
    "CheckResult",
    "Window",
    "WindowRow",
    "item_checks",
    "item_index",
    "reply_fails",
    "rows_frame",
    "score_records",
    "split_windows",
    "window_fails",
]
