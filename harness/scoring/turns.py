"""Score conversations reply by reply: `turns.csv` rows (docs/architecture.md, "Conversations").

Every check of the item (window- and response-scope alike) runs on each assistant turn's whole
reply (scope `turn`); windows inside the replies are scored as usual in windows.csv.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from harness.config.run import ScoringConfig, TaskItem, TaskSuite
from harness.results import TurnRow
from harness.scoring.score import item_checks, item_index, row_key, score_checks
from harness.scoring.windows import reply_text
from harness.text.records import GenerationRecord


def pressure_turns(item: TaskItem) -> set[int]:
    """Turn indices whose user message is a pressure turn (scripted turns are 2..K)."""
    return {k + 2 for k, turn in enumerate(item.turns or []) if turn.pressure}


def score_turns(
    records: Iterable[GenerationRecord],
    suites: TaskSuite | Sequence[TaskSuite],
    tokenizer,
    config: ScoringConfig | None = None,
    judges=None,
    memo: dict | None = None,
    as_dicts: bool = False,
) -> list[TurnRow]:
    """turns.csv rows of every conversation record (single replies give none); each check
    scores all its replies in one batch (`score_checks`, `memo` and `as_dicts` as there)."""
    jobs = turn_jobs(records, suites, tokenizer, config or ScoringConfig())
    rows = score_checks(TurnRow, jobs, judges, memo, as_dicts)
    rows.sort(key=row_key("model", "item", "policy", "history", "sample", "turn"))
    return rows


def turn_jobs(
    records: Iterable[GenerationRecord],
    suites: TaskSuite | Sequence[TaskSuite],
    tokenizer,
    config: ScoringConfig,
) -> list[tuple]:
    """(check, the row's other columns, reply text) of every check on every reply of the
    conversation records: what `score_turns` scores."""
    index = item_index(suites)
    jobs = []
    for record in records:
        if not record.is_conversation:
            continue
        task, item = index[record.item]
        # a logged or replayed conversation's user turns are the log's, not the item's
        pressure = pressure_turns(item) if record.history is None else set()
        # a replay's record of the log itself: its logged replies (kind `logged`) are scored
        logged = any(seg.kind == "logged" for seg in record.segments)
        kind = "logged" if record.history == "logged" and logged else "generated"
        checks = item_checks(item, config.languages)
        ident = {k: getattr(record, k) for k in ("run_id", "model", "item", "policy", "seed")}
        finishes = record.reply_finishes(kind)
        for turn, positions in record.turn_positions(kind).items():
            text = reply_text(record, tokenizer, positions)
            base = {
                **ident,
                "task": record.task or task,
                "history": record.history or "generated",
                "sample": record.sample,
                "conversation_id": record.conversation_id or "",
                "turn": turn,
                "pressure": turn in pressure,
                "t_start": positions[0] + 1,
                "t_end": positions[-1] + 1,
                "tokens": len(positions),
                "finish_reason": finishes.get(turn, ""),
            }
            jobs += [(check, base, text) for check in checks]
    return jobs
