"""One false-verdict budget for a run's gates (`stats.family: holm`, the default): Holm's
step-down over the m bounds the config tests (`harness.config.gate_specs.tested_bounds`).

Step 1 tests every one-sided check (auc, final; not corrected) at 1 - alpha / m (alpha = 1 -
stats.level): summary.csv's and rules.csv's `<metric>_lcb/_ucb`. Once r bounds are decided,
the undecided checks are tested again at 1 - alpha / (m - r) (`holm_bounds`: the bounds at
those levels, made with the same data; a sequential run's group-sequential test at that
level), until a step decides nothing new. The chance that any verdict of the family is wrong is
<= alpha (Holm 1979: each true hypothesis is rejected only at a step whose level is at most
alpha / (the number of true hypotheses)), and every check decides at least what it would
under Bonferroni. m counts every bound the config tests, the checks outside the family too
(fewer would be valid; more is conservative): the levels are fixed before the data.

Counting: a passing check decides all its bounds; a failing one at least one (counted as
one, which keeps the later levels conservative when a check has both a min and a max).
A check of a metric with no one-sided bounds (a_turn, half_life, ...) is tested at its own
interval's level and stands outside the budget (gates.csv's `family`: outside).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

IN_FAMILY, OUTSIDE = "holm", "outside"


def ladder_row(row: dict, metric: str, level: float) -> dict | None:
    """`row` with `<metric>_lcb/_ucb` at `level`, from its `holm_bounds`; None where the row
    has no bounds at that level (an older summary.csv, or one made under another family)."""
    text = row.get("holm_bounds")
    if not isinstance(text, str) or not text:
        return None
    steps = json.loads(text)
    for index, made in enumerate(steps.get("levels", [])):
        if math.isclose(made, level, rel_tol=1e-9, abs_tol=1e-12):
            lcb, ucb = steps[metric][index]
            return {
                **row,
                f"{metric}_lcb": math.nan if lcb is None else lcb,
                f"{metric}_ucb": math.nan if ucb is None else ucb,
            }
    return None


def _bounds(check: dict) -> int:
    return int(not _isnan(check["min"])) + int(not _isnan(check["max"]))


def _isnan(x: Any) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def _decided(check: dict) -> int:
    """Bounds a decided check settles: all of them when it passes, one when it fails."""
    return {"pass": _bounds(check), "fail": 1}.get(check["verdict"], 0)


def holm(
    checks: list[dict],
    members: list[int],
    level: float,
    m: int,
    recheck: Callable[[int, float], dict],
) -> list[dict]:
    """`checks` (gates.csv rows, each member already read at 1 - alpha / m) after Holm's
    step-down over `members` (their indices): `recheck(i, step_level)` reads check i at a
    later step's level. Members get family `holm`."""
    alpha, out = 1 - level, list(checks)
    settled: set[int] = set()
    spent = 0
    while True:
        newly = [i for i in members if i not in settled and out[i]["verdict"] != "undecided"]
        if not newly:
            break
        settled.update(newly)
        spent += sum(_decided(out[i]) for i in newly)
        if m - spent < 1:
            break
        step = 1 - alpha / (m - spent)
        for i in members:
            if i not in settled:
                out[i] = recheck(i, step)
    for i in members:
        out[i] = {**out[i], "family": IN_FAMILY}
    return out


def family_note(family: str, level: float, m: int) -> str:
    """The budget in words, for a check's detail: `Holm over 8 bounds at 95 %`."""
    if family == IN_FAMILY:
        return f"Holm over {m} bounds, any wrong verdict <= {100 * (1 - level):.3g} %"
    return ""


def prescription_level(level: float, statements: int) -> float:
    """The one-sided level of each AUC-against-target test of the prescription
    (`harness.analysis.prescription`): Bonferroni over its `statements` tests, one per rules.csv
    row (model, item, policy, rule: fixed by the config, before the data), so the chance that
    any decided row of the table is wrong is <= 1 - level. rules.csv's `holm_bounds` carry the
    AUC's bounds at it (`harness.analysis.rules.rule_frames`)."""
    return 1 - (1 - level) / max(statements, 1)


def with_level(gate_level: float | tuple[float, ...], extra: float) -> tuple[float, ...]:
    """`gate_level` (a level, or the gates' (first, Holm's later levels...)) with `extra`
    added to the levels whose bounds go to `holm_bounds` (the first stays the gates')."""
    levels = (gate_level,) if isinstance(gate_level, (int, float)) else tuple(gate_level)
    return (*levels, extra)
