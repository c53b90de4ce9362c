"""Forks stage: is the behaviour carried by the prompt or by the text written so far?

For a stored record and a continuation position t, arm `with` is the record's own prompt plus
its first t continuation token ids; arm `without` is the baseline prompt (the system turn
removed, as the probe's baseline) plus exactly the same t ids, never re-tokenised. Both arms
continue for `forks.tokens` tokens, `forks.draws` times, draw d of both arms seeded alike (a
paired comparison), and each arm's new text is scored with the item's checks.

One unit = one (model, policy): its forked records x positions x arms x draws in one engine
batch, stored with its check rows. The engine is the generation stage's (one start per model).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel

from harness.config.run import ForksConfig, RunConfig, TaskItem, policy_label
from harness.engines.base import Engine, GenerationRequest, GenerationResult, SamplingSettings
from harness.models import ResolvedModel
from harness.results import ForkRow, result_frame
from harness.scoring.judge import JudgeDefaults, JudgeRunner
from harness.scoring.score import item_checks, score_checks
from harness.stages.base import ForkArms, Records
from harness.stages.context import RunContext
from harness.stages.probe import record_baseline_ids
from harness.store import unit_key
from harness.text.records import GenerationRecord
from harness.units.run_units import sampling_settings

STAGE = "forks"
ARMS = ("with", "without")


class ForkArm(BaseModel):
    """One arm draw as generated: a forks.jsonl line (the report's sample viewer shows them)."""

    model: str
    item: str
    policy: str
    sample: int
    fork_t: int
    arm: Literal["with", "without"]
    draw: int
    seed: int
    prompt_tokens: int  # the arm's prompt: its chat prompt + the t shared continuation ids
    token_ids: list[int]
    text: str
    finish_reason: str


def fork_seed(record_seed: int, fork_t: int, draw: int) -> int:
    """The same for both arms of a draw (paired), distinct across positions and draws."""
    text = f"{record_seed}/{fork_t}/{draw}"
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16) % (2**31 - 1)


def forked_records(forks: ForksConfig, records: list[GenerationRecord]) -> list[GenerationRecord]:
    """The first `forks.records` samples of every condition of the forked policies."""
    policies = set(forks.policies) if forks.policies else None
    return [
        r
        for r in records
        if r.sample < forks.records and (policies is None or r.policy in policies)
    ]


def fork_positions(forks: ForksConfig, record: GenerationRecord) -> list[int]:
    """The configured positions inside the record: t <= its continuation length (a position
    past the end has no text to share; carried.csv says which were skipped). `at_turns`: the
    positions where those assistant turns start (the history up to the open turn), in the
    conversations that reached them."""
    if forks.at_turns is not None:
        starts = record.turn_starts()  # 1-based t of turns 2, 3, ...
        return [starts[k - 2] - 1 for k in forks.at_turns if k - 2 < len(starts)]
    return [t for t in forks.at or [] if t <= len(record.continuation_ids)]


def fork_requests(
    record: GenerationRecord,
    baseline: list[int],
    forks: ForksConfig,
    sampling: SamplingSettings,
) -> list[tuple[dict[str, Any], GenerationRequest]]:
    """(arm identity, request) for every position x draw x arm of one record."""
    out = []
    for t in fork_positions(forks, record):
        shared = record.continuation_ids[:t]
        for draw in range(forks.draws):
            seed = fork_seed(record.seed, t, draw)
            settings = sampling.model_copy(update={"max_tokens": forks.tokens, "seed": seed})
            for arm, prompt in zip(ARMS, (record.prompt_ids, baseline), strict=True):
                ident = {"fork_t": t, "arm": arm, "draw": draw, "seed": seed}
                request = GenerationRequest(prompt_ids=prompt + shared, sampling=settings)
                out.append((ident, request))
    return out


def fork_key(
    model: ResolvedModel, records: list[GenerationRecord], baselines: list[list[int]],
    forks: ForksConfig, sampling: SamplingSettings, engine: str, scoring: list[Any],
) -> str:  # fmt: skip
    """Everything a unit's arms and rows depend on. `scoring`: what the arms are scored
    against: the items (checks included), the candidate languages and the judges' identities."""
    settings = forks.model_dump(exclude={"records", "policies", "baseline", "baseline_text"})
    params = {
        "forks": settings,
        "sampling": sampling.model_dump(exclude={"max_tokens", "seed"}),
        "engine": engine,
        "scoring": scoring,
    }
    inputs = {"records": [r.key for r in records], "baselines": baselines}
    return unit_key(STAGE, model=model.content_key, inputs=inputs, params=params)


@dataclass
class TokenUsage:
    """What the engine computed for a set of forks (bench/forks.py reports it)."""

    requests: int = 0
    prompt: int = 0
    cached: int = 0  # prompt tokens served from the prefix cache
    generated: int = 0

    def add(self, results: list[GenerationResult]) -> None:
        self.requests += len(results)
        self.prompt += sum(r.prompt_tokens for r in results)
        self.cached += sum(r.cached_prompt_tokens or 0 for r in results)
        self.generated += sum(len(r.token_ids) for r in results)


def prime_prefixes(
    engine: Engine, records: list[GenerationRecord], baselines: list[list[int]],
    forks: ForksConfig, usage: TokenUsage,
) -> None:  # fmt: skip
    """Per record, one 1-token request for each arm's longest prompt (its prompt + the first
    t_max continuation ids), before the draws. Every arm prompt of the record is a prefix of
    one of these two, so the draws find it in the prefix cache (up to the last whole KV block):
    requests scheduled in the same step do not share a prefix still being computed, so without
    this each draw and each position would prefill its prompt again. Only engines with a
    prefix cache gain anything."""
    if not getattr(engine, "prefix_caching", False):
        return
    primes = []
    for record, baseline in zip(records, baselines, strict=True):
        positions = fork_positions(forks, record)
        if not positions or forks.draws * len(positions) < 2:
            continue
        shared = record.continuation_ids[: positions[-1]]
        settings = SamplingSettings(temperature=0, max_tokens=1)
        primes += [
            GenerationRequest(prompt_ids=prompt + shared, sampling=settings)
            for prompt in (record.prompt_ids, baseline)
        ]
    if primes:
        usage.add(engine.generate(primes))


def generate_arms(
    engine: Engine, records: list[GenerationRecord], baselines: list[list[int]],
    forks: ForksConfig, sampling: SamplingSettings, usage: TokenUsage | None = None,
    prime: bool = True,
) -> list[ForkArm]:  # fmt: skip
    """Every arm draw of `records` in one engine batch, after priming the arms' prompts
    (`prime=False`: without, for bench/forks.py to measure what priming saves)."""
    usage = usage if usage is not None else TokenUsage()
    jobs = []
    for record, baseline in zip(records, baselines, strict=True):
        requests = fork_requests(record, baseline, forks, sampling)
        jobs += [(record, ident, request) for ident, request in requests]
    if prime:
        prime_prefixes(engine, records, baselines, forks, usage)
    results = engine.generate([req for *_, req in jobs]) if jobs else []
    usage.add(results)
    return [
        ForkArm(
            model=record.model,
            item=record.item,
            policy=record.policy,
            sample=record.sample,
            prompt_tokens=len(request.prompt_ids),
            token_ids=result.token_ids,
            text=result.text,
            finish_reason=result.finish_reason,
            **ident,
        )
        for (record, ident, request), result in zip(jobs, results, strict=True)
    ]


def score_arms(
    arms: list[ForkArm], items: dict[str, TaskItem], languages: list[Any], judges: JudgeRunner
) -> list[ForkRow]:
    """forks.csv rows: every check of the arm's item on the arm's new text (`score_checks`)."""
    jobs = [
        (check, arm.model_dump(include=set(ForkRow.keys) - {"check"}), arm.text)
        for arm in arms
        for check in item_checks(items[arm.item], languages)
    ]
    return score_checks(ForkRow, jobs, judges)


class ForksStage:
    """Forked records x positions x arms x draws -> forks.jsonl (the arms' texts) and
    forks.csv (their checks). Closes the generation engines when done."""

    name = "forks"
    reads = (Records,)
    writes = (ForkRow, ForkArms)

    def run(self, ctx: RunContext) -> dict[str, object]:
        forks = ctx.config.forks
        if forks is None:
            return {}
        arms: list[ForkArm] = []
        rows: list[dict[str, Any]] = []
        try:
            for model in ctx.models:
                model_arms, model_rows = self._model(ctx, model)
                arms += model_arms
                rows += model_rows
        finally:
            ctx.engines.close()  # the probe runs transformers on these cores next
        frame = result_frame(ForkRow, rows)
        frame = frame.sort_values(list(ForkRow.keys), kind="stable").reset_index(drop=True)
        return {"forks.jsonl": arms, "forks.csv": frame}

    def _model(
        self, ctx: RunContext, model: ResolvedModel
    ) -> tuple[list[ForkArm], list[dict[str, Any]]]:
        config: RunConfig = ctx.config
        forks = config.forks
        assert forks is not None, "the stage returns early without forks"
        chosen = forked_records(forks, ctx.records_of(model.name))
        groups = [[r for r in chosen if r.policy == policy_label(p)] for p in config.policies]
        arm_draws = sum(len(fork_positions(forks, r)) for r in chosen) * forks.draws * len(ARMS)
        bar = ctx.progress.bar(f"forks {model.name}", arm_draws * forks.tokens)
        arms: list[ForkArm] = []
        rows: list[dict[str, Any]] = []
        defaults = JudgeDefaults(config.models[0], config.generation)
        with JudgeRunner(ctx.cache, defaults) as judges:
            for group in (g for g in groups if g):
                unit = _unit(ctx, model, group, judges)
                arms += [ForkArm.model_validate(a) for a in unit["arms"]]
                rows += unit["rows"]
                bar.advance(len(unit["arms"]) * forks.tokens)
        return arms, rows


def _unit(
    ctx: RunContext, model: ResolvedModel, group: list[GenerationRecord], judges: JudgeRunner
) -> dict[str, Any]:
    """One (model, policy) unit from the store, or generated, scored and stored."""

    config: RunConfig = ctx.config
    forks, langs = config.forks, config.scoring.languages
    assert forks is not None, "the stage returns early without forks"
    sampling = sampling_settings(config)
    tokenizer = ctx.tokenizer(model)
    base = [record_baseline_ids(tokenizer, r, forks.baseline, forks.baseline_text) for r in group]
    items = {sel.item.id: sel.item for sel in ctx.items}
    mine = [items[i] for i in sorted({r.item for r in group})]
    scoring = [
        [item.model_dump() for item in mine],
        langs,
        judges.identities(c for item in mine for c in item_checks(item, langs)),
    ]
    key = fork_key(model, group, base, forks, sampling, config.generation.engine, scoring)
    unit: dict[str, Any] | None = ctx.cache.get(STAGE, key)
    if unit is None:
        engine = ctx.engines.get(config, model)
        made = generate_arms(engine, group, base, forks, sampling)
        unit = {
            "arms": [a.model_dump() for a in made],
            "rows": [row.model_dump() for row in score_arms(made, items, langs, judges)],
        }
        ctx.cache.put(STAGE, key, unit)
    return unit
