"""Scoring stage: every generation record -> windows.csv rows, one cached unit per record.

Judge checks ask their judge through one JudgeRunner per stage run (engines closed when the
stage ends); their verdicts have a cache of their own (`cache/judge/`, see
`harness.scoring.judge`), and a record's unit key holds its judges' identities, since the
default judge (the run's first model) is not written in the item.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from harness.config.run import RunConfig, TaskItem, TaskSuite
from harness.results import TurnRow, WindowRow, result_frame
from harness.scoring import item_index, score_records
from harness.scoring.judge import JudgeDefaults, JudgeRunner
from harness.scoring.turns import score_turns
from harness.stages.base import Records
from harness.stages.context import RunContext
from harness.store import RunStore, unit_key
from harness.text.records import GenerationRecord

STAGE = "score"
TURNS = "turns"  # the per-reply scores of conversations, one unit per record


def score_stage(
    store: RunStore,
    config: RunConfig,
    suites: list[TaskSuite],
    records: list[GenerationRecord],
    tokenizer: Any,
    model_key: str,
    judges: JudgeRunner | None = None,
) -> list[dict[str, Any]]:
    """windows.csv rows for all records; uncached records are scored in one batch. `model_key`:
    the content key of the model whose tokenizer cuts the windows; `judges`: the JudgeRunner
    the items' judge checks ask (needed only when there are any)."""

    def score(todo: list[GenerationRecord]) -> list[dict[str, Any]]:
        rows = score_records(todo, suites, tokenizer, config.scoring, judges)
        return [row.model_dump(mode="json") for row in rows]

    return _cached_per_record(store, STAGE, config, suites, records, judges, score, model_key)


def turns_stage(
    store: RunStore,
    config: RunConfig,
    suites: list[TaskSuite],
    records: list[GenerationRecord],
    tokenizer: Any,
    model_key: str,
    judges: JudgeRunner | None = None,
) -> list[dict[str, Any]]:
    """turns.csv rows of the conversation records; one cached unit (stage `turns`) each."""

    talks = [r for r in records if r.is_conversation]

    def score(todo: list[GenerationRecord]) -> list[dict[str, Any]]:
        rows = score_turns(todo, suites, tokenizer, config.scoring, judges)
        return [row.model_dump() for row in rows]

    return _cached_per_record(
        store, TURNS, config, suites, talks, judges, score, model_key, stamp=_turn_labels
    )


def _turn_labels(record: GenerationRecord) -> dict[str, Any]:
    """A reply's conversation id and history, stamped like run_id: units are keyed by content
    (units stored before these columns existed read back with them)."""
    return {
        "history": record.history or "generated",
        "conversation_id": record.conversation_id or "",
    }


def _cached_per_record(
    store: RunStore, stage: str, config: RunConfig, suites: list[TaskSuite],
    records: list[GenerationRecord], judges: JudgeRunner | None,
    score: Callable[[list[GenerationRecord]], list[dict[str, Any]]], model_key: str,
    stamp: Callable[[GenerationRecord], dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:  # fmt: skip
    """One cached unit of rows per record: the uncached records scored in one `score` batch,
    each record's rows stored under its key, then every unit read back in record order with
    this run's id stamped (units are keyed by content, not run), and `stamp(record)`'s
    columns where given."""

    index = item_index(suites)
    keys = [score_key(r, index[r.item][1], config, judges, stage, model_key) for r in records]
    todo = [(r, k) for r, k in zip(records, keys, strict=True) if not store.has(stage, k)]
    if todo:
        by_record: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
        for row in score([r for r, _ in todo]):
            ident = (row["model"], row["item"], row["policy"], row["sample"])
            by_record.setdefault(ident, []).append(row)
        for record, key in todo:
            ident = (record.model, record.item, record.policy, record.sample)
            store.put(stage, key, by_record.get(ident, []))
    run_id = records[0].run_id if records else ""
    return [
        {**row, "run_id": run_id, **(stamp(record) if stamp else {})}
        for record, key in zip(records, keys, strict=True)
        for row in store.get(stage, key) or []
    ]


# The rows' shape and meaning: 2 since windows.csv has each reply's whole-reply rows (turn,
# finish_reason) and a rule needing a reply's end has no verdict on a cut reply (units
# stored before would read back without those columns).
ROWS_VERSION = 2


def score_key(
    record: GenerationRecord, item: TaskItem, config: RunConfig, judges: JudgeRunner | None,
    stage: str, model_key: str,
) -> str:  # fmt: skip
    """One record's scores: its content, its item (checks included), the scoring settings and
    the identities of the judges its judge checks ask (none: an empty list)."""
    judge_ids = judges.identities(item.checks) if judges is not None else []
    params = {"scoring": config.scoring.model_dump(), "judges": judge_ids, "rows": ROWS_VERSION}
    return unit_key(stage, model=model_key, inputs=[record.key, item.model_dump()], params=params)


class ScoreStage:
    """Every record, window by window, against its item's checks -> windows.csv."""

    name = "score"
    reads = (Records,)
    writes = (WindowRow, TurnRow)

    def run(self, ctx: RunContext) -> dict[str, object]:
        bar = ctx.progress.bar("score", 1)
        rows: list[dict[str, Any]] = []
        turns: list[dict[str, Any]] = []
        defaults = JudgeDefaults(ctx.config.models[0], ctx.config.generation)
        budget_of = functools.partial(ctx.engines.budget, ctx.config)
        cache = ctx.cache.cache / "requests"  # the run's request cache (stages/generate.py)
        with JudgeRunner(ctx.cache, defaults, budget_of=budget_of, request_cache=cache) as judges:
            for model in ctx.models:
                records = ctx.records_of(model.name)
                tokenizer = ctx.tokenizer(model)
                args = (
                    ctx.cache,
                    ctx.config,
                    ctx.suites,
                    records,
                    tokenizer,
                    model.content_key,
                    judges,
                )
                rows += score_stage(*args)
                turns += turns_stage(*args)
        bar.finish()
        windows = result_frame(WindowRow, rows)
        keys = ["model", "item", "policy", "sample", "window", "turn", "check"]
        out = {"windows.csv": windows.sort_values(keys, kind="stable").reset_index(drop=True)}
        if any(r.is_conversation for r in ctx.records()):  # single-reply runs keep their files
            out["turns.csv"] = result_frame(TurnRow, turns)
        return out
