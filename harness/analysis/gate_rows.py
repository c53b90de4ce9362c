"""gates.csv rows read back: a check's name (`gate_name`, with its bound as a reader writes it),
each row's verdict and the conditions left undecided. The evaluation that writes the rows:
`harness.analysis.gates`."""

from __future__ import annotations

import pandas as pd

from harness.config.gate_specs import GATE_METRICS
from harness.results import CONDITION, cells_are
from harness.stats.text import bracket


def bound_text(low: float | None, high: float | None) -> str:
    """The bound as a reader writes it: `>= 0.8`, `<= 0.1`, `in [0.2, 0.5]`."""
    low = None if low is None or pd.isna(low) else low
    high = None if high is None or pd.isna(high) else high
    if low is not None and high is not None:
        return "in " + bracket(low, high, "g")
    return f">= {low:g}" if low is not None else f"<= {high:g}"


# metrics that are not adherence to the rules (gate names say which rules the others cover)
NOT_OF_RULES = ("token_overhead", "alpha_mean")


def gate_name(row: dict) -> str:
    """One check's name in the terminal, the report and junit.xml, e.g.
    `gates[0] auc (all rules) of none >= 0.8 on lang-fr-story`, `gates[1] a_turn at turn 4
    (rule sign-off) of none >= 0.5 on lena` (`auc value ...` for a point comparison of a
    metric that has an interval)."""
    with_interval = GATE_METRICS.get(row["metric"], False)
    label = row["metric"] + (" value" if row["use"] == "value" and with_interval else "")
    turn = row.get("turn")
    if turn is not None and not pd.isna(turn):
        label += f" at turn {int(turn)}"
    rule = row.get("rule")
    if isinstance(rule, str) and rule:
        label += f" (rule {rule})"
    elif row["metric"] not in NOT_OF_RULES:
        label += " (all rules)"
    bound = bound_text(row["min"], row["max"])
    return f"gates[{row['gate']}] {label} of {row['policy']} {bound} on {row['item']}"


def verdicts_of(gates: pd.DataFrame) -> pd.Series:
    """The verdict of each gates.csv row; a file from before three outcomes has only
    `passed`, read as pass or fail."""
    if "verdict" in gates.columns:
        return gates["verdict"].astype(str)
    passed = cells_are(gates["passed"], True)
    return passed.map({True: "pass", False: "fail"})


def undecided_conditions(gates: pd.DataFrame) -> set[tuple[str, str, str]]:
    """(model, item, policy) of every undecided check: the conditions more samples could
    decide (sample-until-decided adds samples to these only)."""
    if gates.empty:
        return set()
    undecided = gates[verdicts_of(gates) == "undecided"]
    return {(str(m), str(i), str(p)) for m, i, p in undecided[list(CONDITION)].itertuples(False)}
