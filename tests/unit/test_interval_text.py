"""The one interval formatter (harness/stats/text.py) and the texts its callers write."""

import math

from harness.analysis.gate_rows import bound_text
from harness.report.calibration import _interval
from harness.report.html import fmt_num
from harness.report.instrument import _ci
from harness.stats.text import bracket, has_interval, interval_text


def test_interval_text_formats_the_estimate_and_its_ends_alike():
    assert interval_text(0.95, 0.41, 1.0) == "0.95 [0.41, 1.00]"
    assert interval_text(0.95, 0.41, 1.0, fmt_num) == "0.95 [0.41, 1]"
    assert interval_text(0.123456, 0.1, 0.2, lambda x: f"{x:.4g}") == "0.1235 [0.1, 0.2]"


def test_a_missing_end_gives_the_estimate_and_the_callers_words():
    assert interval_text(0.5, math.nan, 0.9) == "0.50"
    assert interval_text(0.5, None, 0.9, no_interval=" (no CI)") == "0.50 (no CI)"
    assert interval_text(0.5, "", 0.9, no_interval=" (no CI)") == "0.50 (no CI)"
    # no_interval=None: the bracket anyway, its ends as the number format writes NaN
    assert interval_text(0.5, math.nan, math.nan, fmt_num, no_interval=None) == "0.5 [–, –]"
    assert not has_interval(0.1, None) and has_interval(0.0, 0.0)


def test_bracket_in_a_sentence():
    assert bracket(0.2, 0.5, "g") == "[0.2, 0.5]"
    assert bracket(0.25, 0.5, opening="95 % CI ", sep=" to ", end="") == "95 % CI 0.25 to 0.50"


def test_callers_keep_their_texts():
    assert bound_text(0.2, 0.5) == "in [0.2, 0.5]"
    assert _interval({"k_low": 0.25, "k_high": 0.5}, "k") == "95 % CI 0.25 to 0.50"
    assert _interval({"k_low": 0.25, "k_high": 0.5}, "k", percent=True) == "95 % CI 25 % to 50 %"
    assert _interval({"k_low": math.nan, "k_high": 0.5}, "k") == "no CI"
    assert _ci({"a": 0.5, "a_low": 0.25, "a_high": 1.0}, "a") == "0.50 [0.25, 1.00]"
    assert _ci({"a": 0.5, "a_low": None, "a_high": 1.0}, "a") == "0.50 (no CI)"
    assert _ci({"a": None}, "a") == "–"
