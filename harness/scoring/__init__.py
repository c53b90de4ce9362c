"""Behavioural adherence along the output: windows, language id, constraint checks.

Heavy dependencies (lingua, lm-eval, pandas, lifelines) load inside the functions that use
them, so importing this package stays cheap.
"""

from harness.scoring.checks import Check, CheckResult
from harness.scoring.score import (
    RESPONSE_WINDOW,
    WINDOW_COLUMNS,
    WindowRow,
    check_window,
    item_index,
    rows_frame,
    score_records,
)
from harness.scoring.suite import item_checks
from harness.scoring.windows import Window, split_windows

__all__ = [
    "RESPONSE_WINDOW",
    "WINDOW_COLUMNS",
    "Check",
    "CheckResult",
    "Window",
    "WindowRow",
    "check_window",
    "item_checks",
    "item_index",
    "rows_frame",
    "score_records",
    "split_windows",
]
