"""Sampling until decided: which conditions get more samples after each look at the gates.

A sequential run (`samples: {min, max, batch?}` or `harness run --until-decided`) gives every
condition (model, item, policy) `min` samples, evaluates the gates, then adds a batch of samples
only to the gated conditions whose gates are still undecided, until they decide or reach `max`.
Every condition follows the same schedule of sample counts (`schedule`): min, then x1.3 each
look (or + `batch`), capped at max, so batch k covers the same sample indices [s_k, s_k+1) in
every condition that is still open at look k, and the generation units of a batch are keyed by
exactly those (item, sample) seeds: a resumed run finds them in the cache.

The stopping rule is only as good as the tests the gates make: a sequential run's `auc` and
`final` gates are a group-sequential test planned for exactly these looks (its nominal levels
calibrated so each side errs <= 1 - level over all of them, harness.analysis.gate_sequential);
its other gates read anytime-valid confidence sequences (docs/architecture.md, "Sampling until
decided"). Either way looking after every batch keeps each gate's error rate at its level.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.config.gate_specs import LOOP_METRICS
from harness.config.run import RunConfig
from harness.config.sampling import SampleRange, schedule

Condition = tuple[str, str, str]  # (model, item, policy)

DECIDED = "decided"
MAX_REACHED = "max reached"
NOT_GATED = "not gated"  # no gate reads this condition: it keeps its first `min` samples


@dataclass(frozen=True)
class SampleBatch:
    """Samples [start, stop) of the conditions in `open` (None: every condition of the run)."""

    start: int
    stop: int
    open: frozenset[Condition] | None = None

    def covers(self, condition: Condition) -> bool:
        return self.open is None or condition in self.open


def fixed_batches(config: RunConfig) -> list[SampleBatch]:
    """The one batch of a run with a fixed sample count (or the first of a sequential run)."""
    return [SampleBatch(0, config.first_samples)]


@dataclass
class SamplePlan:
    """Where a sequential run stands: the batches generated so far and why each gated
    condition stopped."""

    samples: SampleRange
    gated: frozenset[Condition]  # the conditions some gate of the loop reads
    batches: list[SampleBatch] = field(default_factory=list)
    stopped: dict[Condition, str] = field(default_factory=dict)
    taken: dict[Condition, int] = field(default_factory=dict)  # samples of stopped conditions

    @classmethod
    def start(cls, samples: SampleRange, gated: set[Condition]) -> SamplePlan:
        return cls(samples, frozenset(gated), [SampleBatch(0, samples.min)])

    @property
    def looked_at(self) -> int:
        """Samples of every condition still open (the stop of the last batch)."""
        return self.batches[-1].stop

    def step(self, undecided: set[Condition]) -> bool:
        """After a look: stop the gated conditions that decided or are at max, queue the next
        batch for the rest. Returns whether a batch was queued (False: the loop is over)."""
        n = self.looked_at
        still_open = set()
        for condition in sorted(self.gated - set(self.stopped)):
            if condition not in undecided:
                self._stop(condition, DECIDED, n)
            elif n >= self.samples.max:
                self._stop(condition, MAX_REACHED, n)
            else:
                still_open.add(condition)
        if not still_open:
            return False
        counts = schedule(self.samples)
        stop = counts[counts.index(n) + 1]
        self.batches.append(SampleBatch(n, stop, frozenset(still_open)))
        return True

    def _stop(self, condition: Condition, why: str, n: int) -> None:
        self.stopped[condition] = why
        self.taken[condition] = n

    def manifest(self, conditions: list[Condition]) -> dict:
        """manifest.json's `sequential`: the rule, the looks, and per condition its samples and
        why it stopped."""
        rows = [
            {
                "model": m, "item": i, "policy": p,
                "samples": self.taken.get((m, i, p), self.samples.min),
                "stopped": self.stopped.get((m, i, p), NOT_GATED),
            }
            for m, i, p in sorted(conditions)
        ]  # fmt: skip
        return {
            "min": self.samples.min,
            "max": self.samples.max,
            "rule": f"+{self.samples.batch} per batch" if self.samples.batch else "x1.3 per look",
            "looks": [b.stop for b in self.batches],
            "conditions": rows,
        }


def gated_conditions(config: RunConfig, items: list[str]) -> set[Condition]:
    """The conditions the loop's gates read: each gate x its models x its items, under its
    policy (alpha_mean gates are checked once, after the loop, with the probe)."""
    out = set()
    for gate in config.gates:
        if gate.metric not in LOOP_METRICS:
            continue
        for model in [gate.model] if gate.model else config.models:
            out |= {(model, item, gate.policy) for item in gate.items or items}
    return out
