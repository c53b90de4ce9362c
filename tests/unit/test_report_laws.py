"""The report part "Does the prompt's grip vanish or settle?" from laws.csv rows made by the
laws stage's own code: per-model answers from policy none, reminder policies apart, KL readings
marked, floors in significant digits, the every-curve table folded, deltas Holm-adjusted."""

from __future__ import annotations

import numpy as np

from harness.analysis.law_sets import CurveSet
from harness.analysis.law_table import law_rows
from harness.analysis.powerlaw import fit_positions
from harness.report.laws import _ci, delta_sentence, laws_section
from harness.report.load import RunData
from harness.results import LawRow, result_frame

X = fit_positions(16, 320).astype(np.float64)


def _units(floor: float, n: int, seed: int, sd: float = 0.03) -> np.ndarray:
    rng = np.random.default_rng(seed)
    y = floor + (1 - floor) * np.exp(-(X - 1.0) / 32) if floor else X**-0.7
    return y[None, :] * np.exp(rng.normal(0, sd, (n, 1)) + rng.normal(0, sd, (n, len(X))))


def _frame():
    sets = []
    for i, (policy, floor) in enumerate([("none", 0.0), ("restate", 0.2)]):
        for curve in ("rel_l2", "kl"):
            ident = {"model": "m", "item": "i", "policy": policy}
            sets.append(CurveSet(ident, curve, "late (layers 21–30)" if curve == "rel_l2"
                                 else "next-token", "t", "relative", X,
                                 _units(floor, 8, 10 * i + len(curve)), "pair"))  # fmt: skip
    return result_frame(LawRow, law_rows(sets, draws=100))


def test_the_answer_is_per_model_from_policy_none_with_reminders_apart():
    html, _ = laws_section(RunData(run_dir=None, frames={"laws.csv": _frame()}))
    claim = html.split('<p class="claim">')[1].split("</p>")[0]
    assert "policy none" in claim and "restate" not in claim
    assert "Reminder policies (apart from none" in html
    assert "unvalidated: no recovery figure backs KL readings" in claim  # the KL reading
    assert "<details><summary>Every curve (4 curve sets" in html
    assert "Holm-adjusted over the 4 curve sets of this run" in html  # the scope as it is


def test_floors_print_in_significant_digits():
    assert _ci(0.01, 0.004, 0.016, True) == "1 % [0.4 %, 1.6 %]"


def test_a_delta_says_cannot_tell_until_its_holm_adjusted_p_is_below_the_level():
    rows = _frame()
    rows = rows[rows["law"] != "power-zero"].copy()
    rows["chosen"] = True
    rows["floor_delta"], rows["floor_delta_low"], rows["floor_delta_high"] = -0.02, -0.03, -0.01
    rows["floor_delta_p"] = 0.03  # each below 0.05, not after Holm over the 8
    sentence, table_rows = delta_sentence(rows, 0.05)
    assert "lowers the fitted floor in 0" in sentence
    assert all(r[-1].startswith("cannot tell") for r in table_rows)
    rows["floor_delta_p"] = 0.005
    sentence, _ = delta_sentence(rows, 0.05)
    assert "lowers the fitted floor in 8" in sentence
