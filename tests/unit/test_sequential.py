"""Sampling until decided, the logic alone (harness.units.sequential): the schedule of sample
counts, which conditions a look keeps open, what the manifest records, and (seeded simulation
through the project's interval code) that stopping at the first decided look keeps the error rate at
the level where a fixed-n interval looked at the same way does not."""

from __future__ import annotations

import numpy as np
import pytest

from harness.config.sampling import SampleRange, schedule
from harness.stats import mean_interval
from harness.units.sequential import DECIDED, MAX_REACHED, NOT_GATED, SamplePlan


@pytest.mark.parametrize(
    "samples, counts",
    [
        # round(4 x 1.3^i): the group-sequential design's looks (bench/sequential.py's LOOKS)
        ({"min": 4, "max": 157}, [4, 5, 7, 9, 11, 15, 19, 25, 33, 42, 55, 72, 93, 121, 157]),
        ({"min": 4, "max": 20}, [4, 5, 7, 9, 11, 15, 19, 20]),  # the last batch stops at max
        ({"min": 2, "max": 4}, [2, 3, 4]),  # at least one more sample per look
        ({"min": 4, "max": 20, "batch": 6}, [4, 10, 16, 20]),
        ({"min": 8, "max": 8}, [8]),
    ],
)
def test_schedule_grows_by_1_3_or_adds_the_batch_and_ends_at_max(samples, counts):
    assert schedule(SampleRange(**samples)) == counts


def test_a_look_stops_decided_conditions_and_queues_a_batch_for_the_rest_only():
    a, b, c = ("m", "a", "none"), ("m", "b", "none"), ("m", "c", "none")
    plan = SamplePlan.start(SampleRange(min=4, max=16, batch=4), {a, b, c})
    assert [(x.start, x.stop, x.open) for x in plan.batches] == [(0, 4, None)]

    assert plan.step(undecided={b, c})
    assert (plan.batches[-1].start, plan.batches[-1].stop) == (4, 8)
    assert plan.batches[-1].open == {b, c} and not plan.batches[-1].covers(a)
    assert plan.stopped == {a: DECIDED} and plan.taken[a] == 4

    assert plan.step(undecided={c})
    assert (plan.batches[-1].start, plan.batches[-1].stop, plan.batches[-1].open) == (8, 12, {c})
    assert plan.step(undecided={c})
    assert not plan.step(undecided={c})  # 16 = max: c stops undecided
    assert plan.stopped == {a: DECIDED, b: DECIDED, c: MAX_REACHED}
    assert plan.taken == {a: 4, b: 8, c: 16}

    other = ("m", "a", "restate")  # no gate reads it: it keeps min
    record = plan.manifest([a, b, c, other])
    assert (record["min"], record["max"], record["rule"], record["looks"]) == (
        4, 16, "+4 per batch", [4, 8, 12, 16]
    )  # fmt: skip
    rows = {(r["item"], r["policy"]): (r["samples"], r["stopped"]) for r in record["conditions"]}
    assert rows == {
        ("a", "none"): (4, DECIDED), ("b", "none"): (8, DECIDED),
        ("c", "none"): (16, MAX_REACHED), ("a", "restate"): (4, NOT_GATED),
    }  # fmt: skip


def test_a_look_where_everything_decided_ends_the_loop_without_a_batch():
    a = ("m", "a", "none")
    plan = SamplePlan.start(SampleRange(min=4, max=64, batch=4), {a})
    assert not plan.step(undecided=set())
    assert len(plan.batches) == 1 and plan.stopped == {a: DECIDED}


def _anytime(x: np.ndarray) -> tuple[float, float]:
    ci = mean_interval(x, level=0.95, lower=0, upper=1, anytime=True)
    return ci.low, ci.high


def _clopper_pearson(x: np.ndarray) -> tuple[float, float]:
    """The exact fixed-n binomial interval: valid at one n chosen in advance."""
    from scipy.stats import beta

    k, n = int(x.sum()), len(x)
    low = beta.ppf(0.025, k, n - k + 1) if k > 0 else 0.0
    high = beta.ppf(0.975, k + 1, n - k) if k < n else 1.0
    return low, high


def _sequential_errors(p: float, bound: float, interval, runs: int, seed: int, batch=None):
    """Share of simulated conditions (true pass rate p, 0/1 samples) whose gate `ci_low >=
    bound` decided the wrong way, and the mean samples taken, when the loop looks after every
    batch of a {min 4, max 64, batch?} schedule and stops at the first decided look."""
    rng = np.random.default_rng(seed)
    draws = (rng.random((runs, 64)) < p).astype(float)
    conditions = {("m", str(i), "none") for i in range(runs)}
    plan = SamplePlan.start(SampleRange(min=4, max=64, batch=batch), conditions)
    verdicts: dict = {}
    open_ = conditions
    while True:
        n = plan.looked_at
        undecided = set()
        for cond in open_:
            low, high = interval(draws[int(cond[1]), :n])
            if low >= bound:
                verdicts[cond] = "pass"
            elif high < bound:
                verdicts[cond] = "fail"
            else:
                undecided.add(cond)
        if not plan.step(undecided):
            break
        open_ = plan.batches[-1].open
    truth = "pass" if p >= bound else "fail"
    wrong = sum(v != truth for v in verdicts.values()) / runs
    return wrong, float(np.mean([plan.taken[c] for c in conditions]))


def test_stopping_at_the_first_decided_look_keeps_the_error_rate_with_anytime_intervals():
    # p just below the bound: every "pass" is an error (at most 2.5 % for a 95 % interval).
    # Looking 16 times (4, 8, ..., 64) at a fixed-n interval adds up its chances to err; a
    # confidence sequence's do not.
    wrong_anytime, _ = _sequential_errors(0.79, 0.8, _anytime, runs=400, seed=1, batch=4)
    wrong_fixed, _ = _sequential_errors(0.79, 0.8, _clopper_pearson, runs=400, seed=1, batch=4)
    assert wrong_anytime <= 0.025 < wrong_fixed


def test_clear_conditions_stop_early_and_close_ones_sample_on():
    _, clear = _sequential_errors(0.99, 0.5, _anytime, runs=100, seed=2)
    _, close = _sequential_errors(0.85, 0.8, _anytime, runs=100, seed=2)
    assert clear <= 16 and close >= 48


def test_a_gate_out_of_reach_of_max_gets_the_max_that_reaches_it():
    """`min: 0.99` by 157 samples: 157 of 157 give a one-sided 95 % bound of 0.05^(1/157) =
    0.981 < 0.99, so it can never pass (issue 54); the max given makes the design pass on
    every sample passing."""
    from harness.config.sampling import max_needed
    from harness.stats.group_sequential import gate_design

    shipped = SampleRange(min=4, max=157)
    assert max_needed(0.8, "min", shipped, 0.05) is None
    assert max_needed(0.2, "max", shipped, 0.05) is None
    assert max_needed(1.0, "min", shipped, 0.05) == (0, 0)  # no max passes a bound of 1
    needed = max_needed(0.99, "min", shipped, 0.05)
    assert needed is not None and needed[0] == 299  # ln 0.05 / ln 0.99 = 298.1
    assert max_needed(0.01, "max", shipped, 0.05) == needed  # the mirror image
    # the two ends against the design itself, where it is cheap: min 0.95 by 40
    low, surely = max_needed(0.95, "min", SampleRange(min=4, max=40), 0.05)
    assert low == 59  # ln 0.05 / ln 0.95 = 58.4
    at_least = tuple(schedule(SampleRange(min=4, max=low - 1)))
    assert not gate_design(at_least, 0.95, 0.05).boundaries[-1][0][-1]  # all passing: no pass
    looks = tuple(schedule(SampleRange(min=4, max=surely)))
    assert gate_design(looks, 0.95, 0.05).boundaries[-1][0][-1]  # all passing passes
