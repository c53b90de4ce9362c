"""Row models of the files the score and forks stages write and of the adherence files the
analyse stage derives from them (docs/architecture.md, "Adherence", "Conversations")."""

from __future__ import annotations

from typing import Literal

from harness.results.base import RECORD, RUN_SAMPLE, TASK_CONDITION, ResultRow

Role = Literal["assistant", "user", "markup", "reminder", "restatement"]


class WindowRow(ResultRow):
    file = "windows.csv"
    written_by = "score"
    row = "one check on one window (window >= 0) or on the whole response (window = -1)"
    keys = (*TASK_CONDITION, *RUN_SAMPLE, "window", "check")

    run_id: str
    model: str
    task: str
    item: str
    policy: str
    seed: int
    sample: int
    window: int
    """0-based window index; -1 for a response-scope check"""
    t_start: int
    """continuation position of the window's first token (inclusive)"""
    t_end: int
    """continuation position of the window's last token (inclusive)"""
    t_gen_start: int
    """generated-token index (1-based) of the window's first token"""
    check: str
    scope: Literal["window", "response"]
    value: float
    passed: bool | None
    reason: str


History = Literal["generated", "logged", "reference", "own"]


class TurnRow(ResultRow):
    file = "turns.csv"
    written_by = "score (only with conversations)"
    row = 'one check on one reply (see "Conversations")'
    keys = (*TASK_CONDITION, "history", *RUN_SAMPLE, "conversation_id", "turn", "check")

    run_id: str
    model: str
    task: str
    item: str
    policy: str
    history: History
    """whose replies came before this one: `generated` (a run's own conversation), `logged`
    (a chat log's reply, scored as logged), `reference` / `own` (a replayed reply after the
    logged history / after its own replies)"""
    seed: int
    sample: int
    conversation_id: str
    """the logged conversation's id (its `id`, else `<file stem>:<line>`); empty for a run's
    generated conversations"""
    turn: int
    pressure: bool
    """the turn's user message is a scripted turn with `pressure: true`"""
    t_start: int
    """continuation position of the reply's first generated token"""
    t_end: int
    """continuation position of the reply's last generated token"""
    tokens: int
    """generated tokens in the reply"""
    check: str
    value: float
    passed: bool | None
    reason: str


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
    half_life: float
    """first checkpoint t where a(t) < a_first / 2 (8 fixed points over [1, T]); NaN when
    censored"""
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
    """Kaplan-Meier median time to the first failing window; inf when fewer than half fail"""
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
    """windows no check could decide (e.g. too few letters): left out of every metric above"""
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
    """time of the step (a window's t_start, or a censoring t_end)"""
    survival: float
    """S(t): share of samples with no failing window up to t"""
    survival_low: float
    survival_high: float
    n: int
    """samples of the condition"""
    method: str
    """the band's method (pointwise)"""


class TurnAdherenceRow(ResultRow):
    file = "turn_adherence.csv"
    written_by = "analyse"
    row = "a(k) and S(k) of one condition and history at one turn"
    keys = (*TASK_CONDITION, "history", "turn")

    model: str
    task: str
    item: str
    policy: str
    history: History
    """as in turns.csv: logged, replayed and generated turns are aggregated apart"""
    turn: int
    pressure: bool
    """the turn's user message is a pressure turn"""
    a: float
    """share of samples whose reply k passes, among those where it was decided"""
    a_low: float
    a_high: float
    n: int
    """samples whose reply k was decided"""
    a_method: str
    """a(k)'s interval method (pointwise)"""
    survival: float
    """S(k): share of samples with no failing reply up to turn k"""
    survival_low: float
    survival_high: float
    survival_method: str
    """S(k)'s band method (pointwise); NaN S(k) under the reference history, where each
    turn is replayed alone"""
    undecided: int
    """samples whose reply k no check could decide (left out of a)"""
    undecided_share: float
    """undecided / (n + undecided)"""
    a_corrected: float
    """a corrected for the deciding check's measured sensitivity and specificity
    (Rogan-Gladen, clipped to [0, 1]; see "Estimators: corrected"); NaN without validation
    data for a single deciding check"""
    a_corrected_low: float
    a_corrected_high: float
    a_corrected_method: str
    """pointwise; carries the sampling and the validation uncertainty (Bonferroni)"""


class ConversationRow(ResultRow):
    file = "conversations.csv"
    written_by = "analyse"
    row = (
        "one (condition, history); then per (model, policy, history) a pooled pressure row "
        "(task = item = `all`)"
    )
    keys = (*TASK_CONDITION, "history")

    model: str
    task: str
    item: str
    policy: str
    history: History
    """as in turns.csv: logged, replayed and generated turns are aggregated apart"""
    n_samples: int
    """samples (conversations: the units of the intervals)"""
    n_turns: int | None
    """the last turn scored; empty in pooled rows"""
    a_first: float
    a_last: float
    mean: float
    """mean of a(k) over the turns"""
    mean_low: float
    mean_high: float
    mean_n: int | None
    mean_method: str | None
    """the interval's method (docs/architecture.md, "Statistics")"""
    first_fail_median: float
    """first turn where S(k) <= 0.5; inf if never"""
    first_fail_median_low: float
    first_fail_median_high: float
    first_fail_median_n: int | None
    first_fail_median_method: str | None
    pressure_turn: float
    """the condition's first pressure turn; NaN without one"""
    before: float
    """share of passing replies before the pressure turn"""
    after: float
    """share of passing replies from the pressure turn on"""
    pressure_delta: float
    """after - before"""
    pressure_delta_low: float
    pressure_delta_high: float
    pressure_delta_n: int | None
    pressure_delta_method: str | None
    tokens_generated: int | None
    tokens_injected: int | None
    token_overhead: float
    """injected / generated tokens"""
    undecided_turns: int | None
    """replies no check could decide (left out of every figure above); empty in pooled rows"""
    undecided_turn_share: float
    """undecided_turns / replies scored"""


class SingleTurnRow(ResultRow):
    file = "single_turn.csv"
    written_by = "single-turn (only with `conversations.twin`)"
    row = (
        "one check on one single-turn twin: turn k of a conversation sent as one message "
        '(see "Single-turn twins")'
    )
    keys = (*RECORD, "turn", "check")

    model: str
    item: str
    policy: str
    sample: int
    turn: int
    """k: the twin holds the first k user turns and the sample's first k - 1 replies"""
    twin_t: int
    """token position (from the start of the prompt, 1-based) of the twin's first reply token"""
    conversation_t: int
    """the same position of turn k's reply in the conversation"""
    tokens: int
    """generated tokens in the twin's reply"""
    check: str
    value: float
    passed: bool | None
    reason: str


class LoggedRow(ResultRow):
    file = "logged_conversations.csv"
    written_by = "score (only with chat logs)"
    row = 'one logged conversation (see "Logged conversations")'
    keys = ("conversation_id",)

    conversation_id: str
    """the line's `id`, else `<file stem>:<line>`"""
    where: str
    """`<file>:<line>` of the conversation in its log"""
    model: str
    task: str
    item: str
    matched_by: Literal["item", "system", "--item", "shared system"]
    """how its item was found: the line's `item`, its system prompt, `--item`, or the first
    (in suite order) of the items whose system prompt it is"""
    sample: int
    """its sample index in turns.csv (0-based within its item, in file order)"""
    turns: int
    """user messages"""
    scored_turns: int
    """turns with assistant text (each one reply in turns.csv)"""
    failed_turns: int
    """scored turns with a failing check"""
    first_failed_turn: int | None
    """the first turn with a failing check; empty when none failed"""
    first_failed_check: str
    """that turn's first failing check (empty when none failed)"""
    first_failed_reason: str
    """that check's reason (empty when it gave none)"""
    tool_calls: int
    """tool calls the assistant made (kept in the history as text, not scored)"""
    tool_results: int
    """`tool` (or older `function`) messages"""
    tool_only_messages: int
    """assistant messages with tool calls and no text: not scored"""
    skipped_parts: int
    """content parts that are not text (images, audio, files): left out"""
    metadata: str
    """the line's own `metadata` object, as compact JSON (`{}` without one)"""
    tags: str
    """the line's `tags`, as a JSON list (`[]` without)"""
