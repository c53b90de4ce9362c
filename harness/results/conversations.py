"""Row models of a conversation's files: each reply's checks (turns.csv, written by score),
a(k) and S(k) by turn and the per-conversation summaries (analyse), a chat log's conversations
(harness score) and the single-turn twins (docs/architecture.md, "Conversations")."""

from __future__ import annotations

from typing import Literal

from harness.results.base import MODEL_TOKENS, RECORD, RUN_SAMPLE, TASK_CONDITION, ResultRow

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
    finish_reason: str = ""
    """why the reply ended: `stop` (EOS or a stop string), `length` (the token limit: a rule
    that needs the reply's end has no verdict, reason `no verdict (cut off)`),
    `content_filter`, `context`; empty when the record does not say (a logged reply)"""
    check: str
    rule: str = ""
    """the rule the check enforces (the check's `rule:`, else its id); empty in files from
    before rules were named (read as the check)"""
    value: float
    passed: bool | None
    reason: str
    t_unit: str = MODEL_TOKENS


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
    """share of samples whose reply k passes, among those where it was decided; NaN where no
    reply k was decided (the turn keeps its row: `undecided` says how many replies had no
    verdict, never read as 0 or as a pass)"""
    a_low: float
    a_high: float
    n: int
    """samples whose reply k was decided"""
    a_method: str
    """a(k)'s interval method (pointwise)"""
    survival: float
    """S(k): share of samples with no failing reply up to turn k; NaN at a turn with no
    decided reply. Its band counts a reply with no verdict as one that may have failed"""
    survival_low: float
    survival_high: float
    survival_method: str
    """S(k)'s band method (pointwise); NaN S(k) under the reference history, where each
    turn is replayed alone"""
    undecided: int
    """samples whose reply k has no all-rules verdict (a rule abstained, or the reply was cut
    before a whole-reply rule: missing evidence, left out of a)"""
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
    t_unit: str = MODEL_TOKENS


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
