"""A sequential run's `auc` and `final` gates: the group-sequential test at the run's looks.

A sequential run (`samples: {min, max}`, `harness run --until-decided`) looks at its gates at
the sample counts of `harness.config.sampling.schedule`. A one-sided interval gate on `auc` or
`final` of summary.csv is decided there by `harness.stats.group_sequential`: the passing
samples counted at this look (`<metric>_passes`: 0/1 values as themselves, fractional ones by
a seeded coin) against the design's boundaries for the gate's bound, its error on each side at
most 1 - the gates' tested level at every true rate (exact, over all the looks together). Each
bound of the gate is its own test: a `min` passes once the count reaches the pass boundary and
fails once it falls to the fail boundary; a `max` the other way round. Where the condition's n
is not one of the looks (a sample without a decided window has no value, so n falls short of the
samples taken), the test decides at the nearest look below n: the count among the first n_k of
the n values lies in [count - (n - n_k), min(count, n_k)], and a side is decided only when the
whole range crosses its boundary (so the decision is one the design itself would take at that
look; falling back to the wider confidence sequence gave errors of 0.003 and 0.011 where 0.05
was allowed with 10 % such samples: issue 54). Below the first look, or where summary.csv has
no count, the gate reads the confidence sequence as before (`None` here).
"""

from __future__ import annotations

import math

import numpy as np

from harness.config.gate_specs import GateSpec
from harness.stats.group_sequential import GroupSequential, gate_design


def _thresholds(test: GroupSequential, look: int) -> tuple[int | None, int | None]:
    """(the fewest passes that pass, the most that fail) at this look; None: none does."""
    passes, fails = test.boundaries[look]
    up, down = np.flatnonzero(passes), np.flatnonzero(fails)
    return (int(up[0]) if len(up) else None), (int(down[-1]) if len(down) else None)


def _side(test: GroupSequential, count: int | tuple[int, int], look: int, side: str) -> str:
    """The verdict of one bound: the design's pass (the rate is at least the bound) is a `min`
    gate's pass and a `max` gate's fail. `count` may be a range (low, high) of the counts the
    look's samples can hold: the design's pass needs its low end, its fail its high end."""
    low, high = count if isinstance(count, tuple) else (count, count)
    passes, fails = test.boundaries[look]
    decided = "pass" if passes[low] else "fail" if fails[high] else None
    if decided is None:
        return "undecided"
    return decided if side == "min" else {"pass": "fail", "fail": "pass"}[decided]


def _needed(tests: list[tuple[str, GroupSequential]], mean: float, look: int) -> float:
    """The first later look at which counts at the observed rate (mean x n, rounded) decide
    every bound: an estimate that assumes the observed rate stays (NaN: not by the last)."""
    looks = tests[0][1].looks
    for later in range(look + 1, len(looks)):
        count = round(mean * looks[later])
        if all(_side(t, count, later, s) != "undecided" for s, t in tests):
            return float(looks[later])
    return math.nan


def sequential_check(
    gate: GateSpec, row: dict | None, looks: tuple[int, ...] | None, level: float
) -> tuple[str, str, float] | None:
    """(verdict, detail, samples needed) of a sequential run's one-sided `auc`/`final` gate
    at `looks` with each bound's error <= 1 - level; None where the design does not apply."""
    if not looks or row is None or gate.metric not in ("auc", "final") or gate.corrected:
        return None
    try:
        count, n = int(float(row[f"{gate.metric}_passes"])), int(float(row[f"{gate.metric}_n"]))
    except (KeyError, TypeError, ValueError):  # an older summary.csv, or no samples
        return None
    below = [i for i, at in enumerate(looks) if at <= n]
    if not below:
        return None
    look, alpha = below[-1], 1 - level
    at = looks[look]
    reached = (max(0, count - (n - at)), min(count, at))  # the count among its first `at` values
    sides = (("min", gate.min), ("max", gate.max))
    bounds = [(side, bound) for side, bound in sides if bound is not None]
    tests = [(side, gate_design(looks, float(bound), alpha)) for side, bound in bounds]
    each = [_side(t, reached, look, side) for side, t in tests]
    verdict = (
        "fail" if "fail" in each else "pass" if all(v == "pass" for v in each) else "undecided"
    )
    parts = []
    for side, test in tests:
        up, down = _thresholds(test, look)
        need_pass = f">= {up}" if up is not None else "none"
        need_fail = f"<= {down}" if down is not None else "none"
        parts.append(
            f"{side} {test.bound:g}: at least the bound on {need_pass} passes, below it on "
            f"{need_fail}"
        )
    off = "" if at == n else (f", decided at the look of {at} below it: {reached[0]}-"
                              f"{reached[1]} passes among its first {at}")  # fmt: skip
    detail = (
        f"{gate.metric} {float(row[gate.metric]):.4g}, {count} of {n} samples passing{off} "
        f"(group-sequential, look {look + 1} of {len(looks)}, each side's error <= "
        f"{alpha:.4g}; {'; '.join(parts)}): {verdict}"
    )
    needed = math.nan
    if verdict == "undecided":
        needed = _needed(tests, count / n, look)
        detail += (
            f"; about {int(needed)} samples would decide it if the observed rate "
            f"{count / n:.3g} stays"
            if not math.isnan(needed)
            else f"; not decided by the last look ({looks[-1]}) if the observed rate stays"
        )
    return verdict, detail, needed
