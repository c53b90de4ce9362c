"""Single-turn twins (docs/architecture.md, "Single-turn twins"): does the drop over a
conversation follow the tokens (the theorem's t) or the turns?

For each scripted conversation run under policy `none` and each turn k >= 2 whose reply
exists, the twin is one user message holding the conversation's first k user turns and the
sample's own first k - 1 replies as a labelled transcript ("User: ...", "Assistant: ..."),
under the same system prompt, answered once with `turn_tokens` tokens. Its reply therefore
starts at about the token distance from the system prompt where turn k's reply starts (both
positions are in single_turn.csv), after one turn instead of k. Each twin reply is scored with
the item's checks, like a conversation's reply.

One unit = one model: its twins in one engine batch, stored with their check rows. The engine is
the generation stage's; the stage closes it when no forks come next.
"""

from __future__ import annotations

import hashlib
from typing import Any

from harness.config.run import RunConfig, TaskItem
from harness.engines.base import GenerationRequest, SamplingSettings
from harness.models import ResolvedModel
from harness.results import SingleTurnRow, result_frame
from harness.scoring.judge import JudgeDefaults, JudgeRunner
from harness.scoring.score import item_checks, score_checks
from harness.stages.base import Records
from harness.stages.context import RunContext
from harness.store import unit_key
from harness.text.chat import ChatFormat
from harness.text.records import GenerationRecord
from harness.units.run_units import sampling_settings

STAGE = "single-turn"
POLICY = "none"


def enabled(config: RunConfig) -> bool:
    return config.conversations is not None and config.conversations.twin


def twinned_records(records: list[GenerationRecord], scripted: set[str]) -> list[GenerationRecord]:
    """The generated conversations of the scripted items under policy none."""
    return [
        r
        for r in records
        if r.is_conversation and r.policy == POLICY and r.history is None and r.item in scripted
    ]


def transcript(record: GenerationRecord, k: int) -> str | None:
    """The first k user turns and the first k - 1 replies of a conversation as one message;
    None when the record has no reply k (it ended early)."""
    users = {1: next(m["content"] for m in record.prompt_messages if m["role"] == "user")}
    replies: dict[int, str] = {}
    for seg in record.segments:
        if seg.kind == "user" and seg.turn:
            users[seg.turn] = users.get(seg.turn, "") + seg.text
        elif seg.kind == "generated" and seg.turn:
            replies[seg.turn] = replies.get(seg.turn, "") + seg.text
    if k not in replies or any(j not in users for j in range(1, k + 1)):
        return None
    parts = []
    for j in range(1, k):
        parts += [f"User: {users[j].strip()}", f"Assistant: {replies[j].strip()}"]
    parts.append(f"User: {users[k].strip()}")
    return "\n\n".join(parts)


def twin_seed(record_seed: int, k: int) -> int:
    """Distinct per (sample, turn), reproducible."""
    text = f"{record_seed}/twin/{k}"
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16) % (2**31 - 1)


def twin_requests(
    chat: ChatFormat, record: GenerationRecord, sampling: SamplingSettings
) -> list[tuple[dict[str, int], GenerationRequest]]:
    """(identity, request) of every twin of one conversation, turn 2 on."""
    system = next((m["content"] for m in record.prompt_messages if m["role"] == "system"), None)
    starts = record.turn_positions()
    out = []
    for k in sorted(starts):
        text = transcript(record, k) if k >= 2 and starts[k] else None
        if text is None:
            continue
        prompt = chat.prompt_ids(system, text)
        ident = {"turn": k, "twin_t": len(prompt) + 1,
                 "conversation_t": len(record.prompt_ids) + starts[k][0] + 1}  # fmt: skip
        settings = sampling.model_copy(update={"seed": twin_seed(record.seed, k)})
        out.append((ident, GenerationRequest(prompt_ids=prompt, sampling=settings)))
    return out


class SingleTurnStage:
    """Twins of the scripted conversations -> single_turn.csv (their check rows)."""

    name = "single-turn"
    reads = (Records,)
    writes = (SingleTurnRow,)

    def run(self, ctx: RunContext) -> dict[str, object]:
        config: RunConfig = ctx.config
        if not enabled(config):
            return {}
        rows: list[dict[str, Any]] = []
        try:
            for model in ctx.models:
                rows += self._model(ctx, model)
        finally:
            if config.forks is None:  # else the forks stage generates on the engine next
                ctx.engines.close()
        frame = result_frame(SingleTurnRow, rows)
        keys = list(SingleTurnRow.keys)
        return {"single_turn.csv": frame.sort_values(keys, kind="stable").reset_index(drop=True)}

    def _model(self, ctx: RunContext, model: ResolvedModel) -> list[dict[str, Any]]:
        config: RunConfig = ctx.config
        items = {sel.item.id: sel.item for sel in ctx.items}
        scripted = {i for i, item in items.items() if item.turns and not item.is_replay}
        records = twinned_records(ctx.records_of(model.name), scripted)
        if not records:
            return []
        sampling = sampling_settings(config).model_copy(
            update={"max_tokens": config.generation.turn_tokens}
        )
        langs = config.scoring.languages
        mine = [items[i] for i in sorted({r.item for r in records})]
        defaults = JudgeDefaults(config.models[0], config.generation)
        with JudgeRunner(ctx.cache, defaults) as judges:
            scoring = [
                [item.model_dump() for item in mine],
                langs,
                judges.identities(c for item in mine for c in item_checks(item, langs)),
            ]
            params = {"sampling": sampling.model_dump(), "engine": config.generation.engine,
                      "scoring": scoring, "format": "labelled transcript v1"}  # fmt: skip
            inputs = {"records": [r.key for r in records]}
            key = unit_key(STAGE, model=model.content_key, inputs=inputs, params=params)
            unit = ctx.cache.get(STAGE, key)
            if unit is None:
                unit = {"rows": self._generate(ctx, model, records, sampling, items, judges)}
                ctx.cache.put(STAGE, key, unit)
        rows: list[dict[str, Any]] = unit["rows"]
        return rows

    @staticmethod
    def _generate(
        ctx: RunContext, model: ResolvedModel, records: list[GenerationRecord],
        sampling: SamplingSettings, items: dict[str, TaskItem], judges: JudgeRunner,
    ) -> list[dict[str, Any]]:  # fmt: skip
        chat = ChatFormat(ctx.tokenizer(model))
        jobs = [(r, ident, req) for r in records for ident, req in twin_requests(chat, r, sampling)]
        bar = ctx.progress.bar(f"single-turn twins {model.name}", len(jobs))
        engine = ctx.engines.get(ctx.config, model)
        results = engine.generate([req for *_, req in jobs]) if jobs else []
        bar.finish()
        langs = ctx.config.scoring.languages
        checks = []
        for (record, ident, _), result in zip(jobs, results, strict=True):
            base = {"model": record.model, "item": record.item, "policy": record.policy,
                    "sample": record.sample, **ident, "tokens": len(result.token_ids)}  # fmt: skip
            checks += [(c, base, result.text) for c in item_checks(items[record.item], langs)]
        return [row.model_dump() for row in score_checks(SingleTurnRow, checks, judges)]
