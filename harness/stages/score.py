"""Scoring stage: every generation record -> windows.csv rows, one cached unit per record."""

from __future__ import annotations

from harness.config import RunConfig, TaskSuite
from harness.records import GenerationRecord
from harness.store import RunStore, content_key

STAGE = "score"


def score_stage(
    store: RunStore,
    config: RunConfig,
    suites: list[TaskSuite],
    records: list[GenerationRecord],
    tokenizer,
) -> list[dict]:
    """windows.csv rows for all records; uncached records are scored in one batch."""
    from harness.scoring import item_index, score_records

    index = item_index(suites)
    keys = [
        content_key(STAGE, r.key, index[r.item][1].model_dump(), config.scoring.model_dump())
        for r in records
    ]
    todo = [(r, k) for r, k in zip(records, keys, strict=True) if not store.has(STAGE, k)]
    if todo:
        rows = score_records([r for r, _ in todo], suites, tokenizer, config.scoring)
        by_record: dict[tuple, list[dict]] = {}
        for row in rows:
            ident = (row.model, row.item, row.policy, row.sample)
            by_record.setdefault(ident, []).append(row.model_dump(mode="json"))
        for record, key in todo:
            ident = (record.model, record.item, record.policy, record.sample)
            store.put(STAGE, key, by_record.get(ident, []))
    run_id = records[0].run_id if records else ""
    out: list[dict] = []
    for key in keys:  # units are keyed by content, not run: stamp this run's id
        out.extend({**row, "run_id": run_id} for row in store.get(STAGE, key) or [])
    return out


class ScoreStage:
    """Every record, window by window, against its item's checks -> windows.csv."""

    name = "score"

    def run(self, ctx) -> dict:
        import pandas as pd

        bar = ctx.progress.bar("score", 1)
        rows: list[dict] = []
        for model in ctx.models:
            rows += score_stage(
                ctx.store, ctx.config, ctx.suites, ctx.records_of(model.name), ctx.tokenizer(model)
            )
        bar.finish()
        return {"windows.csv": _sorted_windows(pd.DataFrame(rows))}


def _sorted_windows(frame):
    keys = [c for c in ("model", "item", "policy", "sample", "window", "check") if c in frame]
    return frame.sort_values(keys, kind="stable").reset_index(drop=True) if keys else frame
