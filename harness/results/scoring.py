"""Row models of the windows and forks files the score and forks stages write and of the
adherence files the analyse stage derives from them (docs/architecture.md, "Adherence"); a
conversation's files are in `harness.results.conversations`."""

from __future__ import annotations

from typing import Literal

from harness.results.base import MODEL_TOKENS, RECORD, RUN_SAMPLE, TASK_CONDITION, ResultRow


class WindowRow(ResultRow):
    file = "windows.csv"
    written_by = "score"
    row = (
        "one check on one window (window >= 0) or a whole-reply check on one reply (window = "
        "-1: the response of a single reply, each reply of a conversation)"
    )
    keys = (*TASK_CONDITION, *RUN_SAMPLE, "window", "turn", "check")

    run_id: str
    model: str
    task: str
    item: str
    policy: str
    seed: int
    sample: int
    window: int
    """0-based window index; -1 for a response-scope (whole-reply) check"""
    turn: int = 1
    """the reply the window is cut from, or the reply a whole-reply check judged (a
    conversation's turn, as in turns.csv; 1 in a single reply)"""
    t_start: int
    """continuation position of the window's (or the reply's) first token (inclusive)"""
    t_end: int
    """continuation position of the window's (or the reply's) last token (inclusive)"""
    t_gen_start: int
    """generated-token index (1-based) of the window's (or the reply's) first token"""
    finish_reason: str = ""
    """why the row's reply ended: `stop` (EOS or a stop string), `length` (the token limit),
    `content_filter`, `context` (the context window); empty when the record does not say"""
    check: str
    rule: str = ""
    """the rule the check enforces (the check's `rule:`, else its id); empty in files from
    before rules were named (read as the check)"""
    scope: Literal["window", "response"]
    value: float
    passed: bool | None
    reason: str
    t_unit: str = MODEL_TOKENS


class ForkRow(ResultRow):
    file = "forks.csv"
    written_by = "forks"
    row = "one check on one arm draw's new text"
    keys = (*RECORD, "fork_t", "arm", "draw", "check")

    model: str
    item: str
    policy: str
    sample: int
    fork_t: int
    """continuation tokens both arms share before they continue"""
    arm: Literal["with", "without"]
    """`with` the record's own prompt, `without` the baseline prompt"""
    draw: int
    """draw index (draw d of both arms share a seed)"""
    check: str
    scope: Literal["window", "response"]
    value: float
    passed: bool | None
    reason: str
    t_unit: str = MODEL_TOKENS


class AdherenceRow(ResultRow):
    file = "adherence.csv"
    written_by = "analyse"
    row = "one condition (with task)"
    keys = TASK_CONDITION

    model: str
    task: str
    item: str
    policy: str
    n_samples: int
    """samples with a decided window (the units of every interval in the row)"""
    n_points: int
    """grid points of a(t): the window starts seen in the condition"""
    a_first: float
    """a(t) at t = 1, the first checkpoint"""
    auc: float
    """mean over samples of each sample's own share of passing positions in [1, T]"""
    auc_low: float
    auc_high: float
    auc_n: int
    """samples the AUC interval rests on"""
    auc_method: str
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
    """first checkpoint where a < a_first / 2 (8 fixed points over [1, T] of generated tokens,
    the clock of AUC: injected reminders are cost, not time); NaN when censored"""
    half_life_low: float
    """inf: the band says a(t) never halved within the run"""
    half_life_high: float
    """inf: a(t) may never halve within the run"""
    half_life_n: int
    half_life_method: str
    half_life_censored: bool
    """a(t) never fell below half its first value within the run"""
    final: float
    """mean over samples of each sample's share of passing positions in (3T/4, T]"""
    final_low: float
    final_high: float
    final_n: int
    final_method: str
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
    pass_1_n: int
    pass_1_method: str
    pass_3: float
    """pass^3: probability that 3 repeats all pass (NaN below 3 samples: cannot tell)"""
    pass_3_low: float
    pass_3_high: float
    pass_3_n: int
    pass_3_method: str
    pass_5: float
    """pass^5 (NaN below 5 samples: cannot tell)"""
    pass_5_low: float
    pass_5_high: float
    pass_5_n: int
    pass_5_method: str
    aptitude: float
    """90th percentile of the per-sample AUCs (Laban et al. 2025)"""
    aptitude_low: float
    aptitude_high: float
    aptitude_n: int
    aptitude_method: str
    unreliability: float
    """90th minus 10th percentile of the per-sample AUCs (Laban et al. 2025)"""
    unreliability_low: float
    unreliability_high: float
    unreliability_n: int
    unreliability_method: str
    survival_median: float
    """Kaplan-Meier median of the generated tokens before the first failing window; inf when
    fewer than half fail"""
    survival_median_low: float
    survival_median_high: float
    survival_median_n: int
    survival_median_method: str
    failures: int
    """samples with a failing window"""
    censored: int
    """samples that never failed"""
    windows_total: int
    """windows of the condition's samples, decided or not"""
    undecided_windows: int
    """windows with no all-rules verdict from their window-scope rules: none decided, or one
    had no verdict (e.g. too few letters, a judge that abstained: missing evidence); left out
    of every metric above"""
    undecided_window_share: float
    """undecided_windows / windows_total"""
    auc_corrected: float
    """AUC corrected for the deciding check's measured sensitivity and specificity
    (Rogan-Gladen, clipped to [0, 1]; see "Estimators: corrected"); NaN without validation
    data for a single deciding check (the method says why)"""
    auc_corrected_low: float
    auc_corrected_high: float
    auc_corrected_n: int
    auc_corrected_method: str
    """the interval carries the sampling and the validation uncertainty (Bonferroni)"""
    t_unit: str = MODEL_TOKENS


class AdherenceCurveRow(ResultRow):
    file = "adherence_curve.csv"
    written_by = "analyse"
    row = "a(t) of one condition at one grid point"
    keys = (*TASK_CONDITION, "t")

    model: str
    task: str
    item: str
    policy: str
    t: int
    a: float
    """share of samples whose window covering t passes"""
    a_low: float
    a_high: float
    n: int
    """samples with a decided window covering t"""
    method: str
    """the interval's method (pointwise)"""
    t_unit: str = MODEL_TOKENS


class SurvivalRow(ResultRow):
    file = "survival.csv"
    written_by = "analyse"
    row = "one Kaplan-Meier step of one condition"
    keys = (*TASK_CONDITION, "t")

    model: str
    task: str
    item: str
    policy: str
    t: float
    """generated tokens at the step (a window's first generated token, or a censoring last):
    the clock of AUC, injected reminders not counted"""
    survival: float
    """S(t): share of samples with no failing window up to t"""
    survival_low: float
    survival_high: float
    n: int
    """samples of the condition"""
    method: str
    """the band's method (pointwise)"""
    t_unit: str = MODEL_TOKENS
