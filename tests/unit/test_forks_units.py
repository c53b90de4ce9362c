"""Fork requests and priming with a scripted engine: which prompts, seeds and batches."""

from __future__ import annotations

from harness.config.run import ForksConfig
from harness.engines.base import GenerationResult, SamplingSettings
from harness.stages.forks import TokenUsage, fork_positions, forked_records, generate_arms
from harness.text.records import GenerationRecord, Segment

SAMPLING = SamplingSettings(temperature=0.7, top_p=0.95, max_tokens=99)


class ScriptedEngine:
    """Answers every request with its own seed as the only token; logs every batch."""

    name = "scripted"
    max_model_len = 4096

    def __init__(self, prefix_caching: bool) -> None:
        self.prefix_caching = prefix_caching
        self.batches: list[list] = []

    def generate(self, requests):
        self.batches.append(requests)
        return [
            GenerationResult(
                token_ids=[r.sampling.seed or 0] * r.sampling.max_tokens,
                text=f"seed {r.sampling.seed}",
                finish_reason="length",
                prompt_tokens=len(r.prompt_ids),
                cached_prompt_tokens=0,
            )
            for r in requests
        ]

    def close(self) -> None:
        pass


def _record(sample: int, policy: str = "none", length: int = 100) -> GenerationRecord:
    return GenerationRecord(
        model="m", item="fr", policy=policy, seed=11 + sample, sample=sample,
        prompt_ids=[1, 2, 3, 4], continuation_ids=list(range(100, 100 + length)),
        segments=[Segment(kind="generated", start=0, end=length)], text="", finish_reason="length",
        engine="scripted",
    )  # fmt: skip


def test_forked_records_are_the_first_samples_of_the_chosen_policies():
    records = [_record(s, p) for p in ("none", "restate", "periodic") for s in range(4)]
    chosen = forked_records(ForksConfig(at=[0], records=2, policies=["none", "restate"]), records)
    assert [(r.policy, r.sample) for r in chosen] == [
        ("none", 0), ("none", 1), ("restate", 0), ("restate", 1),
    ]  # fmt: skip
    assert fork_positions(ForksConfig(at=[0, 50, 100, 101]), _record(0)) == [0, 50, 100]


def test_primed_engine_gets_one_short_request_per_arm_prompt_then_every_draw():
    engine = ScriptedEngine(prefix_caching=True)
    forks = ForksConfig(at=[0, 40], tokens=5, draws=3)
    usage = TokenUsage()
    arms = generate_arms(engine, [_record(0)], [[9, 9]], forks, SAMPLING, usage)
    prime, draws = engine.batches
    # each arm's longest prompt once: every draw's prompt is a prefix of one of them
    record = _record(0)
    assert [r.prompt_ids for r in prime] == [
        record.prompt_ids + record.continuation_ids[:40],
        [9, 9] + record.continuation_ids[:40],
    ]
    assert {r.sampling.max_tokens for r in prime} == {1}
    assert all(any(p.prompt_ids[: len(d.prompt_ids)] == d.prompt_ids for p in prime) for d in draws)
    assert len(draws) == 2 * 2 * 3 and len(arms) == 12
    assert usage.requests == 14 and usage.generated == 2 * 1 + 12 * 5
    # draw d of both arms shares its seed; positions and draws differ
    seeds = {(a.fork_t, a.draw, a.arm): a.seed for a in arms}
    assert all(seeds[(t, d, "with")] == seeds[(t, d, "without")] for t, d, _ in seeds)
    assert len({seeds[(t, d, "with")] for t, d, _ in seeds}) == 6
    assert all(a.token_ids == [a.seed] * 5 for a in arms)


def test_engine_without_prefix_cache_is_not_primed():
    engine = ScriptedEngine(prefix_caching=False)
    generate_arms(engine, [_record(0)], [[9, 9]], ForksConfig(at=[0], draws=2), SAMPLING)
    assert len(engine.batches) == 1 and len(engine.batches[0]) == 4
