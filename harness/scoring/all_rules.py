"""The all-rules verdict of one unit, the one definition behind every "all rules" figure: a
window's (a(t), the adherence AUC, final, survival over t: `harness.scoring.passes`) and a
reply's (a(k), S(k), the first failing turn: `harness.analysis.conversations`).

A unit fails when some rule judging it failed and no rule's verdict is missing. It passes
when none failed, some rule decided, and no rule's verdict is missing. A verdict is missing
where the reply was cut at the token limit before a whole-reply rule (a sign-off, a word
limit) could be judged (`Check.when_cut_off`'s CUT_OFF_REASON): that is missing evidence,
never a pass. Other
abstentions (a language check on a stretch with too few letters: nothing there for the rule
to judge) are left out of the unit, as before. A unit neither failed nor passed is
undecided: left out of every figure, counted in `undecided`. A unit with a missing verdict is
undecided even where another rule failed: keeping those would keep exactly the units that
fail, and read the figure as 0 where it cannot be known (the quickstart's persona item, every
reply cut before its sign-off, read an all-rules AUC of 0.00).

Windows and replies are different units, so the AUC and a(k) can disagree on one run
(docs/results.md, "Windows and turns"): a window-scope rule judges each window on its own
text (64 tokens by default) for the AUC and the whole reply for a(k). A reply in German
that quotes an English phrase can fail one of its windows and pass as a whole.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from harness.checks import CUT_OFF_REASON
from harness.results import cells_are


def missing_verdicts(rows: pd.DataFrame) -> np.ndarray:
    """Per row (a windows.csv or turns.csv row): the rule has no verdict because the reply was
    cut at the token limit before it could be judged."""
    if "reason" not in rows.columns:
        return np.zeros(len(rows), dtype=bool)
    undecided = ~(cells_are(rows["passed"], True) | cells_are(rows["passed"], False))
    return (undecided & (rows["reason"].astype(str) == CUT_OFF_REASON)).to_numpy(bool)


def unit_verdict(
    failed: np.ndarray, decided: np.ndarray, missing: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(passed, decided) per unit from whether some rule of it failed, some decided and some
    verdict is missing (each a bool array over the units): see the module's definition."""
    failed, decided, missing = (np.asarray(x, bool) for x in (failed, decided, missing))
    return ~failed, (failed | decided) & ~missing
