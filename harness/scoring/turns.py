"""Score conversations reply by reply: `turns.csv` rows (docs/architecture.md, "Conversations").

Every check of the item (window- and response-scope alike) runs on each assistant turn's whole
reply (scope `turn`); windows inside the replies are scored as usual in windows.csv.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from harness.config import ScoringConfig, TaskItem, TaskSuite
from harness.records import GenerationRecord
from harness.scoring.score import item_checks, item_index

TURN_COLUMNS = [
    "run_id", "model", "task", "item", "policy", "seed", "sample", "turn", "pressure",
    "t_start", "t_end", "tokens", "check", "value", "passed", "reason",
]  # fmt: skip


def pressure_turns(item: TaskItem) -> set[int]:
    """Turn indices whose user message is a pressure turn (scripted turns are 2..K)."""
    return {k + 2 for k, turn in enumerate(item.turns or []) if turn.pressure}


def score_turns(
    records: Iterable[GenerationRecord],
    suites: TaskSuite | Sequence[TaskSuite],
    tokenizer,
    config: ScoringConfig | None = None,
    judges=None,
) -> list[dict]:
    """turns.csv rows of every conversation record (single replies give none); each check
    scores all its replies in one batch."""

    config = config or ScoringConfig()
    index = item_index(suites)
    jobs: dict[int, tuple] = {}  # id(check) -> (check, [(row base, text)])
    for record in records:
        if not record.is_conversation:
            continue
        task, item = index[record.item]
        pressure = pressure_turns(item)
        for turn, positions in record.turn_positions().items():
            ids = [record.continuation_ids[p] for p in positions]
            text = tokenizer.decode(ids, skip_special_tokens=True)
            base = {
                "run_id": record.run_id,
                "model": record.model,
                "task": record.task or task,
                "item": record.item,
                "policy": record.policy,
                "seed": record.seed,
                "sample": record.sample,
                "turn": turn,
                "pressure": turn in pressure,
                "t_start": positions[0] + 1,
                "t_end": positions[-1] + 1,
                "tokens": len(positions),
            }
            for check in item_checks(item, config.languages):
                jobs.setdefault(id(check), (check, []))[1].append((base, text))
    rows = []
    for check, entries in jobs.values():
        results = check.with_judges(judges).score_many([text for _, text in entries])
        for (base, _), result in zip(entries, results, strict=True):
            rows.append(
                {
                    **base,
                    "check": check.id,
                    "value": result.value,
                    "passed": check.passed(result),
                    "reason": result.reason,
                }
            )
    rows.sort(key=lambda r: (r["model"], r["item"], r["policy"], r["sample"], r["turn"]))
    return rows
