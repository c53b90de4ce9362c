"""Row model of prescription.csv: the report's first table, one row per rule of each item
(harness.analysis.prescription): does it hold under the baseline policy, where it breaks, and
which of the run's policies fixes it at what cost."""

from __future__ import annotations

from typing import Literal

from harness.results.base import ResultRow


class PrescriptionRow(ResultRow):
    file = "prescription.csv"
    written_by = "report"
    row = "one rule of one item (all rules where the run has no rules.csv)"
    keys = ("model", "item", "rule")

    model: str
    item: str
    rule: str
    """the rule (rules.csv's); `all rules` where the run has no rules.csv"""
    sentence: str
    """the sentence of the system prompt the rule enforces (empty where none is given)"""
    baseline: str
    """the policy the rule is judged under first (`none`, the prompt as written)"""
    holds: Literal["yes", "no", "cannot tell"]
    """under the baseline: `yes` when its gates on this rule (or on all rules) pass, else
    when the AUC's one-sided lower bound reaches `target`; `no` when a gate fails, else when
    the upper bound lies below `target`; `cannot tell` otherwise"""
    basis: str
    """what `holds` rests on: the gate checks (`gates[0]`), or the AUC against `target`"""
    target: float
    """the AUC the rule must reach where no gate judges it (rules.csv's `below`)"""
    auc: float
    """the baseline's AUC of the rule, with its interval"""
    auc_low: float
    auc_high: float
    n: int
    """the samples the baseline's interval rests on"""
    breaks_axis: Literal["turn", "t", ""]
    """where `breaks` is counted: a conversation's turn, or position t in a single reply;
    empty where nothing was decided"""
    breaks: float
    """the median first failing turn (rules.csv `first_fail_turn`) or position t
    (`survival_median`) under the baseline; inf: fewer than half the samples ever break it;
    NaN: nothing decided"""
    breaks_low: float
    breaks_high: float
    """the median's interval at the run's level (turn and position count from 1, so the low end
    is never below 1); NaN where the samples are too few to bound a median at all"""
    breaks_note: str = ""
    """where the interval is NaN for too few samples: `cannot bound at n = 4: 6 samples
    would` (at 95 % a distribution-free interval of a median needs 6); empty otherwise"""
    samples_to_tell: float
    """`holds` = cannot tell: about how many samples would decide it (the gate's
    `samples_needed`, else `harness.stats.sided.samples_to_decide` at the observed AUC); NaN
    otherwise"""
    fix: str
    """the cheapest of the run's other policies whose checks pass (its gates, else its AUC
    against `target`; and its quality, where the run measured it); `not needed` where the
    rule holds; `none of the tried policies passes`; `no other policy tried`"""
    fix_delta: float
    """the fix's AUC of this rule minus the baseline's, on the same samples of this item
    (paired, as policies.csv, over the rule's own windows and replies; all rules where the
    run has no windows.csv); NaN without a fix or a pairing"""
    fix_delta_low: float
    fix_delta_high: float
    fix_tokens: float
    """the tokens the fix adds over the item's samples (injected + restated, summary.csv)"""
    fix_overhead: float
    """those tokens over the generated ones"""
    fix_usd: float
    """the fix's cost minus the baseline's on this item, in USD (manifest.json
    `hosted_conditions`); NaN where the model is not priced"""
    rejected: str
    """the other policies tried that do not fix it, each with why (`; `-joined)"""
    error_control: str = ""
    """how the row's decided statements (`holds` yes/no, each policy passing or failing) keep
    their error: the run's gates where they judge the rule, else the AUC against `target`
    under one Bonferroni budget over the table's tests (any wrong decided row of the whole
    table <= 1 - stats.level), or per row where rules.csv has no bounds at that level"""
