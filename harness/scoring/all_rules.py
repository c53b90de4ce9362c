"""The all-rules verdict of one unit, the one definition behind every "all rules" figure: a
window's (a(t), the adherence AUC, final, survival over t: `harness.scoring.passes`) and a
reply's (a(k), S(k), the first failing turn: `harness.analysis.conversations`).

A unit fails when some rule judging it failed and no rule's verdict is missing. It passes
when none failed, some rule decided, and no rule's verdict is missing. A verdict is missing
wherever a rule judging the unit has a row with no verdict (`passed` empty), whatever the
cause, which its `reason` names: the reply was cut at the token limit before a whole-reply
rule (a sign-off, a word limit) could be judged (`Check.when_cut_off`'s CUT_OFF_REASON); a
judge abstained, erred or gave no verdict; a language check had too few letters; any other
NaN. Each is missing evidence, never a pass. A unit neither failed nor passed is
undecided: left out of every figure, counted in `undecided` (rules.csv counts each rule's
missing verdicts, `cut_off` and `undecided`, and names the commonest reason). A unit with a
missing verdict is undecided even where another rule failed: keeping those would keep
exactly the units that fail, and read the figure as 0 where it cannot be known (the
quickstart's persona item, every reply cut before its sign-off, read an all-rules AUC of
0.00). A conversation turn with no reply at all has no row: its a(k) is NaN with its row
kept (`harness.analysis.conversations`), never 0.

Per-rule figures (`harness.analysis.rules`) blank every other rule's verdict with
OTHER_RULE as its reason: that row judges nothing, so it is not missing evidence.

Windows and replies are different units, so the AUC and a(k) can disagree on one run
(docs/results.md, "Windows and turns"): a window-scope rule judges each window on its own
text (64 tokens by default) for the AUC and the whole reply for a(k). A reply in German
that quotes an English phrase can fail one of its windows and pass as a whole.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from harness.results import cells_are

# the reason of a row whose verdict a per-rule figure left out (another rule's): not missing
OTHER_RULE = "(another rule's verdict, left out of this rule's figures)"


def missing_verdicts(rows: pd.DataFrame) -> np.ndarray:
    """Per row (a windows.csv or turns.csv row): the rule judging it has no verdict there
    (any cause: see the module's definition), unless the row is another rule's (OTHER_RULE)."""
    undecided = ~(cells_are(rows["passed"], True) | cells_are(rows["passed"], False))
    if "reason" in rows.columns:
        undecided &= rows["reason"].astype(str) != OTHER_RULE
    return np.asarray(undecided, dtype=bool)


def unit_verdict(
    failed: np.ndarray, decided: np.ndarray, missing: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(passed, decided) per unit from whether some rule of it failed, some decided and some
    verdict is missing (each a bool array over the units): see the module's definition."""
    failed, decided, missing = (np.asarray(x, bool) for x in (failed, decided, missing))
    return ~failed, (failed | decided) & ~missing
