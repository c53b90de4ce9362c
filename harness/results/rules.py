"""Row models of the per-rule files (issue 44): each rule of an item (a check, or the checks
sharing one `rule:` name) with its own a(t), a(k), AUC, survival and first failure
(rules.csv), and its curves over t and over turns (rule_curves.csv). The all-rules metrics
are adherence.csv's and summary.csv's (docs/architecture.md, "Rules")."""

from __future__ import annotations

from typing import Literal

from harness.results.base import MODEL_TOKENS, TASK_CONDITION, ResultRow


class RuleRow(ResultRow):
    file = "rules.csv"
    written_by = "analyse (and harness score)"
    row = "one rule of one condition"
    keys = (*TASK_CONDITION, "rule")

    model: str
    task: str
    item: str
    policy: str
    rule: str
    """the rule's name: its checks' `rule:`, else the check's id"""
    sentence: str
    """the sentence of the system prompt the rule enforces (its checks' `sentence:`; empty
    where none is given)"""
    checks: str
    """the check ids judging it, joined by `; `"""
    scope: Literal["window", "response", "window+response"]
    """where it is judged: each window, each whole reply (the response of a single reply,
    each reply of a conversation), or both"""
    n_samples: int
    """samples with a decided unit (the units of every interval over t)"""
    a_first: float
    """a(t) at the first window start"""
    auc: float
    """as adherence.csv's, for this rule alone: the mean over samples of each sample's share
    of positions whose window (or, for a whole-reply rule, whose reply) keeps the rule"""
    auc_low: float
    auc_high: float
    auc_n: int
    auc_method: str
    auc_lcb: float
    """one-sided lower bound at the gates' level: what a `min` gate with `rule:` reads"""
    auc_ucb: float
    """one-sided upper bound at the gates' level: what a `max` gate with `rule:` reads"""
    final: float
    """as adherence.csv's, for this rule alone"""
    final_low: float
    final_high: float
    final_n: int
    final_method: str
    final_lcb: float
    """one-sided lower bound of final at the gates' level"""
    final_ucb: float
    """one-sided upper bound of final at the gates' level"""
    holm_bounds: str | None
    """under `stats.family: holm`, the one-sided bounds at Holm's later levels, as JSON:
    {"levels": [...], "auc": [[lcb, ucb], ...], "final": [...]} (null: no bound); empty
    otherwise"""
    survival_median: float
    """Kaplan-Meier median t of the rule's first failing unit; inf when fewer than half fail"""
    survival_median_low: float
    survival_median_high: float
    survival_median_n: int
    survival_median_method: str
    first_below_t: float
    """the first window start t where a(t) < `below` (the report's order of rules); inf
    when it never does"""
    below: float
    """the level `first_below_t` and `first_below_turn` read"""
    judged: int
    """rows of windows.csv that decided the rule (windows, and replies for a whole-reply
    rule)"""
    failed: int
    """of those, the rows that broke it"""
    cut_off: int
    """whole replies cut at the token limit where the rule needs the reply's end: no verdict
    (cut off), in no figure above"""
    undecided: int
    """other rows no check of the rule could decide (e.g. too few letters, a judge that
    abstained or erred): missing evidence, so the all-rules unit they judge is undecided"""
    undecided_reason: str = ""
    """the commonest reason of those rows (windows.csv's `reason`, e.g. `5 letters < 8`, `no
    verdict`), with its count; empty where there are none"""
    turns: int | None
    """the last turn scored (conversations; empty for single replies)"""
    a_turn_first: float
    """a(k) at turn 1: share of samples whose first reply keeps the rule (NaN without
    conversations, and where no first reply has a verdict on the rule)"""
    a_turn_last: float
    """a(k) at the last turn"""
    a_turn_mean: float
    """mean of a(k) over the turns"""
    first_fail_turn: float
    """the first turn k where S(k) <= 0.5 (half the conversations broke the rule by turn k):
    conversations.csv's first_fail_median for this rule alone; inf if never; NaN without
    conversations"""
    first_fail_turn_low: float
    first_fail_turn_high: float
    first_fail_turn_n: int | None
    first_fail_turn_method: str | None
    first_below_turn: float
    """the first turn k where a(k) < `below`; inf if never; NaN without conversations"""
    t_unit: str = MODEL_TOKENS


class RuleCurveRow(ResultRow):
    file = "rule_curves.csv"
    written_by = "analyse (and harness score)"
    row = "a rule's a(t) at one window start (axis t) or its a(k) and S(k) at one turn (axis turn)"
    keys = (*TASK_CONDITION, "rule", "axis", "x")

    model: str
    task: str
    item: str
    policy: str
    rule: str
    """as in rules.csv"""
    axis: Literal["t", "turn"]
    """`t`: a(t) over continuation positions; `turn`: a(k) and S(k) over a conversation's
    turns"""
    x: int
    """t (a window start) or the turn k"""
    a: float
    """share of samples whose unit covering x keeps the rule"""
    a_low: float
    a_high: float
    n: int
    """samples with a decided unit at x"""
    method: str
    """the interval's method (pointwise)"""
    survival: float
    """S(k): share of conversations that kept the rule in every reply up to turn k (axis
    turn; NaN on axis t)"""
    survival_low: float
    survival_high: float
    t_unit: str = MODEL_TOKENS
