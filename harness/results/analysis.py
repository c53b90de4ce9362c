"""Row models of the files the analyse and gates stages write (docs/architecture.md,
"Estimators: ...", "Gates")."""

from __future__ import annotations

import math
from typing import Literal

from harness.results.base import CONDITION, MODEL_TOKENS, ResultRow


class SummaryRow(ResultRow):
    file = "summary.csv"
    written_by = "analyse"
    row = "one condition (twins: alpha only)"
    keys = CONDITION
    # alpha_L<k>, alpha_L<k>_low, alpha_L<k>_high per reported hidden-state index k
    extra_pattern = r"alpha_L\d+(_low|_high)?"
    extra_after = "alpha_mean_method"

    model: str
    item: str
    policy: str
    alpha_mean: float
    """mean over hidden-state indices 1..L of the rel_l2 alphas (alpha_L<k> per index k)"""
    alpha_mean_low: float
    """mean of the layers' alpha_low"""
    alpha_mean_high: float
    alpha_mean_n: int | None
    """units the alpha intervals rest on (fits.csv's n: the probed pairs behind the fit)"""
    alpha_mean_method: str | None
    """the alpha intervals' method: over one or two pairs it reflects the curve's noise, not
    sample-to-sample variation, and says so"""
    n: int | None
    """samples with a decided window, the units of the adherence intervals (empty for twins:
    alpha only)"""
    auc: float
    auc_low: float
    auc_high: float
    auc_n: int | None
    """samples the interval rests on"""
    auc_method: str | None
    """the interval's method (docs/architecture.md, "Statistics")"""
    auc_lcb: float
    """one-sided lower bound at the gates' level (harness.stats.sided): what a `min` gate
    reads"""
    auc_ucb: float
    """one-sided upper bound at the gates' level: what a `max` gate reads"""
    auc_passes: int | None
    """the samples counted as passing by a sequential run's group-sequential gate test: each
    value x in [0, 1] counts with probability x, by a coin seeded with the condition and the
    sample (0 and 1 count as themselves; harness.stats.group_sequential.binary_count)"""
    half_life: float
    half_life_low: float
    half_life_high: float
    half_life_n: int | None
    half_life_method: str | None
    half_life_censored: bool | None
    final: float
    final_low: float
    final_high: float
    final_n: int | None
    final_method: str | None
    final_lcb: float
    """one-sided lower bound of final at the gates' level"""
    final_ucb: float
    """one-sided upper bound of final at the gates' level"""
    final_passes: int | None
    """the samples counted as passing by a sequential run's group-sequential gate test: each
    value x in [0, 1] counts with probability x, by a coin seeded with the condition and the
    sample (0 and 1 count as themselves; harness.stats.group_sequential.binary_count)"""
    holm_bounds: str | None
    """under `stats.family: holm`, the one-sided bounds at Holm's later levels, as JSON:
    {"levels": [...], "auc": [[lcb, ucb], ...], "final": [...]} (null: no bound); empty
    otherwise"""
    pass_1: float
    """pass^1: share of samples that pass (every decided position in [1, T] passes)"""
    pass_1_low: float
    pass_1_high: float
    pass_1_n: int | None
    pass_1_method: str | None
    pass_3: float
    """pass^3: probability that 3 repeats all pass (NaN below 3 samples: cannot tell)"""
    pass_3_low: float
    pass_3_high: float
    pass_3_n: int | None
    pass_3_method: str | None
    pass_5: float
    """pass^5 (NaN below 5 samples: cannot tell)"""
    pass_5_low: float
    pass_5_high: float
    pass_5_n: int | None
    pass_5_method: str | None
    aptitude: float
    """90th percentile of the per-sample AUCs (Laban et al. 2025)"""
    aptitude_low: float
    aptitude_high: float
    aptitude_n: int | None
    aptitude_method: str | None
    unreliability: float
    """90th minus 10th percentile of the per-sample AUCs (Laban et al. 2025)"""
    unreliability_low: float
    unreliability_high: float
    unreliability_n: int | None
    unreliability_method: str | None
    survival_median: float
    survival_median_low: float
    survival_median_high: float
    survival_median_n: int | None
    survival_median_method: str | None
    survival_censored_share: float
    """share of samples that never failed"""
    tokens_generated: int | None
    tokens_injected: int | None
    tokens_restated: int | None
    token_overhead: float
    """(injected + restated) / generated tokens"""
    auc_corrected: float
    """AUC corrected for the deciding check's measured error (adherence.csv's; the gate
    setting `corrected: true` bounds it)"""
    auc_corrected_low: float
    auc_corrected_high: float
    auc_corrected_n: int | None
    auc_corrected_method: str | None
    undecided_window_share: float
    """share of the condition's windows no check decided (adherence.csv's)"""
    t_unit: str = MODEL_TOKENS


class CorrelationRow(ResultRow):
    file = "correlation.csv"
    written_by = "analyse"
    row = "one (alpha column, behaviour column) pair"
    keys = ("x", "y")

    x: str
    """the alpha column of summary.csv"""
    y: str
    """the behaviour column of summary.csv"""
    n: int
    """conditions with both values"""
    spearman: float
    spearman_low: float
    spearman_high: float
    spearman_method: str
    """the interval's method (docs/architecture.md, "Statistics"); n is its n"""
    pearson: float
    pearson_low: float
    pearson_high: float
    pearson_method: str
    perm_p: float
    """permutation p-value of the Spearman coefficient"""
    perm_p_holm: float
    """perm_p Holm-adjusted over every row of correlation.csv with one (the report's
    "correlates" reads it at 1 - level)"""


class PredictorRow(ResultRow):
    file = "predictor.csv"
    written_by = "analyse"
    row = "one (model, feature set)"
    keys = ("model", "features")

    model: str
    features: str
    """`divergence+log_t` or the `log_t` baseline"""
    auroc: float
    """cross-validated AUROC of the window-violation predictor"""
    auroc_low: float
    auroc_high: float
    method: str
    """the interval's method; its n is n_samples"""
    n_windows: int
    n_samples: int
    """samples (the folds group by sample)"""
    n_violations: int
    folds: int
    reason: str


class PolicyRow(ResultRow):
    file = "policies.csv"
    written_by = "analyse"
    row = 'one (model, item or "all", policy, metric)'
    keys = (*CONDITION, "metric")

    model: str
    item: str
    """the item, or `all` pooled over the model's items"""
    policy: str
    metric: str
    """`auc`, `half_life_capped` or `final`"""
    value: float
    """the metric under the policy, over the samples (pooled: the items) it shares with `none`
    (the baseline's own rows: all of its samples and items)"""
    none_value: float
    """the metric under `none` over the same samples and items as `value`"""
    delta: float
    """value - none_value"""
    delta_low: float
    delta_high: float
    n: int
    """pairs (sample k of the policy and of `none`) the interval rests on"""
    method: str
    """the interval's method (docs/architecture.md, "Statistics")"""
    token_overhead: float
    pareto: bool
    """on the Pareto front of (paired auc gain `delta`, token overhead) among the policies of
    the (model, item): no other policy gains more for fewer tokens"""
    perplexity_ratio: float = math.nan
    """quality.csv's: the policy's replies' perplexity under the unsteered model / `none`'s
    (pooled: the worst item's; NaN where not measured, e.g. not an hf run)"""
    degeneration_delta: float = math.nan
    """quality.csv's: repeated-4-gram rate - `none`'s over paired samples (pooled: items' mean)"""
    quality_holds: bool | None = None
    """quality.csv's rule (docs/remedies.md: perplexity ratio <= 1.5, degeneration not shown
    above `none`'s); pooled: every item's holds; None where not measured"""


class CalibrationRow(ResultRow):
    file = "calibration.csv"
    written_by = "analyse"
    row = (
        "one (model, item, judge check, code check) meeting on the same windows, or pooled per "
        'model (item = judge = code = `all`); header-only without judge checks (see "Estimators:'
        ' judge calibration")'
    )
    keys = ("model", "item", "judge", "code")

    model: str
    item: str
    judge: str
    """the judge check's id"""
    code: str
    """the code check's id"""
    n: int
    """windows both decided"""
    n_records: int
    """records those windows come from (the units of the intervals)"""
    agree_pass: int
    agree_fail: int
    judge_only_pass: int
    code_only_pass: int
    undetermined: int
    """windows where one of the two could not decide"""
    accuracy: float
    accuracy_low: float
    accuracy_high: float
    accuracy_n: int
    """records the interval rests on"""
    accuracy_method: str
    """the interval's method (docs/architecture.md, "Statistics")"""
    kappa: float
    """Cohen's kappa"""
    kappa_low: float
    kappa_high: float
    kappa_n: int
    kappa_method: str
    reason: str
    sensitivity: float
    """share of the windows the code check passed that the judge passed too (the code's
    verdict as the truth, as a labelled set's label: see "Estimators: corrected")"""
    sensitivity_low: float
    sensitivity_high: float
    sensitivity_n: int
    """windows the code check passed (the interval's units: windows, as a labelled set's
    texts)"""
    sensitivity_method: str
    specificity: float
    """share of the windows the code check failed that the judge failed too"""
    specificity_low: float
    specificity_high: float
    specificity_n: int
    """windows the code check failed"""
    specificity_method: str


class CarriedRow(ResultRow):
    file = "carried.csv"
    written_by = "analyse"
    row = 'one (condition, fork position) (see "Estimators: carried")'
    keys = (*CONDITION, "fork_t")

    model: str
    item: str
    policy: str
    fork_t: int
    records: int
    """forked records"""
    draws: int
    """draws per arm and record"""
    adherence_with: float
    """mean over the records (n) of each record's share of passing draws of arm `with`"""
    adherence_without: float
    """the same for arm `without`"""
    dependence: float
    """adherence_with - adherence_without"""
    dependence_low: float
    """the interval at the run's family level: Bonferroni over carried.csv's rows"""
    dependence_high: float
    n: int
    """records with both arms decided: the units of the interval"""
    method: str
    """the interval's method (docs/architecture.md, "Statistics")"""
    verdict: Literal["depends", "within band", "cannot tell"]
    """depends: the CI excludes 0; within band: the CI lies within +-0.25 (removing the prompt
    changes adherence by less than that); cannot tell: neither (too few records)"""
    kl: float
    """mean next-token KL(p_with || p_without) at the fork"""
    abs_delta_logp: float
    """mean |delta log p| at the fork"""
    reason: str
    t_unit: str = MODEL_TOKENS


class LinkageRow(ResultRow):
    file = "linkage.csv"
    written_by = "analyse"
    row = 'one coefficient (see "Estimators: linkage")'
    keys = ("kind", "model", "item", "x", "y")

    kind: str
    """which linkage the coefficient measures"""
    model: str
    item: str
    x: str
    y: str
    n: int
    items: int | None
    """items pooled"""
    spearman: float
    spearman_low: float
    spearman_high: float
    method: str
    """the interval's method (docs/architecture.md, "Statistics")"""


class GateRow(ResultRow):
    file = "gates.csv"
    written_by = "gates"
    row = "one check of one gate on one (model, item); header-only without gates"
    keys = ("gate", "model", "item")

    gate: int
    """the gate's index in `gates:`"""
    metric: str
    policy: str
    rule: str = ""
    """the rule the gate bounds alone (rules.csv, rule_curves.csv); empty: all rules"""
    turn: int | None = None
    """the turn a_turn or survival_turn is read at; empty for the other metrics"""
    item: str
    model: str
    use: Literal["interval", "value"]
    """`interval` (min against `value_low`, max against `value_high`) or `value` (the point)"""
    value: float
    """the metric's estimate in summary.csv (rules.csv for a rule, turn_adherence.csv /
    conversations.csv for the turn metrics; inf: censored, see Gates)"""
    value_low: float
    """the lower bound the verdict reads: summary.csv's one-sided `<metric>_lcb` for auc and
    final, else `<metric>_low` (NaN: no interval)"""
    value_high: float
    """`<metric>_ucb` for auc and final, else `<metric>_high` (NaN: no interval)"""
    n: float
    """the units the interval rests on (`<metric>_n`, else `n`, of summary.csv; NaN: unknown)"""
    min: float
    max: float
    level: float
    """the level each bound of the check is tested at: 1 - the chance that the bound's verdict
    is wrong (auc, final: their one-sided bounds' level: under stats.family holm the level of
    the Holm step that decided it, or of the last step; bonferroni's; stats.level under none;
    other metrics: one side of the two-sided interval, 1 - (1 - level) / 2); NaN for a point
    comparison"""
    family: str
    """the error budget the check's bounds share (stats.family): `holm` or `bonferroni` (one
    budget of 1 - stats.level over the run's one-sided checks), `none` (per check: each
    bound's own), `outside` (under holm, a metric with no one-sided bounds at other levels:
    its own level, outside the shared budget); empty for a point comparison"""
    family_level: float
    """holm, bonferroni: 1 - the chance that any verdict of the family is wrong (stats.level);
    NaN otherwise"""
    verdict: Literal["pass", "fail", "undecided"]
    """`pass`, `fail` or `undecided` (the interval straddles a bound, or none was formed)"""
    passed: bool
    """verdict = pass"""
    samples_needed: float
    """undecided checks: about how many samples would decide it (see Gates); NaN otherwise"""
    detail: str
    """the verdict in words"""
