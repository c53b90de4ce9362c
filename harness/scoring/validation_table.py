"""The accuracy table of scored labelled replies, and the goals a check's table is read against.

One table for the shipped sets (`bench/checks.py`, docs/checks.md) and a user's own labels
(`harness checks`): per check and length band, sensitivity (a compliant reply passes) and
specificity (a violating reply fails) with their exact interval, the lower bound beside the
estimate, the abstentions, and the share right; the main rows first, each other stratum (e.g.
`mixed`) apart.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from harness.scoring.validation import ALL, Confusion, ScoredReply, confusions
from harness.stats import DEFAULT_LEVEL

HEADER = (
    f"{'stratum':<8} {'check':<20} {'band':<7} {'n':>4} {'right':>7} "
    f"{'sensitivity [low]':<21} {'specificity [low]':<21} {'abstained':>9}"
)


def _rate(estimate: float, low: float, n: int) -> str:
    if n == 0:
        return f"{'-':<21}"
    return f"{100 * estimate:5.1f} % [{100 * low:5.1f}] n={n:<3}"


def table_row(c: Confusion, label: str, level: float = DEFAULT_LEVEL) -> str:
    sens, sens_low, _, sens_n = c.sensitivity(level)
    spec, spec_low, _, spec_n = c.specificity(level)
    return (
        f"{c.group.get('stratum', 'main'):<8} {label:<20} {c.group.get('band', ALL):<7} "
        f"{c.n:>4} {100 * c.accuracy:5.1f} % {_rate(sens, sens_low, sens_n)} "
        f"{_rate(spec, spec_low, spec_n)} {c.abstained:>4} {100 * c.abstention:3.0f} %"
    )


def table_lines(
    scored: Sequence[ScoredReply], by: str = "check", level: float = DEFAULT_LEVEL
) -> list[str]:
    """The table, one line per (stratum, check, band) and each check's `all`; `by` is the
    grouping of the check column (`check`: the type, `check_id`, or `label`: the language
    check's target)."""
    lines = [HEADER]
    table = confusions(scored, by=("stratum", by, "band"))
    strata = sorted({c.group["stratum"] for c in table}, key=lambda s: (s != "main", s))
    for stratum in strata:
        lines += [table_row(c, c.group[by], level) for c in table if c.group["stratum"] == stratum]
    lines.append(
        f"({level:.0%} exact Clopper-Pearson intervals, [low] = lower bound; right: share of "
        "all rows, abstentions counted as not right)"
    )
    return lines


class LanguageGoal(BaseModel):
    """The language check's goal (issue 30), read on the frozen half with the default
    candidates: the share right per band (abstentions count as wrong) and the abstentions of
    replies above `abstain_above` characters."""

    model_config = ConfigDict(frozen=True)

    right_short: float = 0.95  # 10-30 characters
    right_long: float = 0.99  # 30 characters and more
    abstain_above: int = 20
    max_abstention: float = 0.01


def language_goal_misses(scored: Sequence[ScoredReply], goal: LanguageGoal) -> list[str]:
    """One line per missed goal among the main-stratum language rows ([] when all are met)."""
    rows = [s for s in scored if s.row.check.type == "language" and not s.row.stratum]
    misses = []
    for name, want, keep in (
        ("10-30", goal.right_short, lambda s: s.row.band == "10-30"),
        ("30+", goal.right_long, lambda s: len(s.row.text.strip()) >= 30),
    ):
        group = [s for s in rows if keep(s)]
        right = sum(s.outcome in ("true_pass", "true_fail") for s in group)
        if group and right / len(group) < want:
            misses.append(f"language {name}: {right}/{len(group)} right < {want:.0%}")
    above = [s for s in rows if len(s.row.text.strip()) > goal.abstain_above]
    abstained = sum(s.passed is None for s in above)
    if above and abstained / len(above) > goal.max_abstention:
        misses.append(
            f"language >{goal.abstain_above} chars: {abstained}/{len(above)} abstained "
            f"> {goal.max_abstention:.0%}"
        )
    return misses


def accuracy(scored: Sequence[ScoredReply]) -> float:
    """Share of rows right (abstentions count as wrong); NaN for no rows."""
    if not scored:
        return math.nan
    return sum(s.outcome in ("true_pass", "true_fail") for s in scored) / len(scored)
