"""bench/sequential.py's default: the designs over many simulated runs (its docstring says what
each design is). One run: every condition's 0/1 sample path drawn once (seeded by run and
condition), read by every design, so the designs compare on the same samples."""

from __future__ import annotations

import math
import time

import numpy as np
from _sequential_cost import cost_lines, per_sample_budget
from sequential import BOUND, GOAL_RATIO, LEVEL, LOOKS, RATES, SHIPPED, fixed_n, fixed_powers

from harness.sampling import SampleRange, schedule
from harness.stats.group_sequential import GroupSequential, design
from harness.stats.sided import one_sided_bounds


def shipped_decision(path: np.ndarray, looks: list[int]) -> tuple[str, int]:
    """(verdict, samples) of the shipped rule: at each look the gate's anytime one-sided bounds
    on the samples so far (AUC is a fraction metric), pass at lcb >= BOUND, fail at ucb < BOUND."""
    for n in looks:
        b = one_sided_bounds(path[:n], level=LEVEL, anytime=True, value_type="fraction")
        if b.lcb >= BOUND:
            return "pass", n
        if b.ucb < BOUND:
            return "fail", n
    return "undecided", looks[-1]


def gsd_decision(path: np.ndarray, test: GroupSequential) -> tuple[str, int]:
    for index, n in enumerate(test.looks):
        verdict = test.decide(int(path[:n].sum()), index)
        if verdict:
            return verdict, n
    return "undecided", test.looks[-1]


def simulate(runs: int, seed: int, rules: dict) -> dict[str, dict[str, np.ndarray]]:
    """Per rule: verdicts (runs x conditions) and samples (runs x conditions)."""
    longest = max(SHIPPED["max"], LOOKS[-1])
    out = {
        r: {"verdict": np.empty((runs, len(RATES)), object), "n": np.zeros((runs, len(RATES)))}
        for r in rules
    }
    for run in range(runs):
        for c, rate in enumerate(RATES.values()):
            path = (np.random.default_rng([seed, run, c]).random(longest) < rate).astype(float)
            for name, decide in rules.items():
                verdict, n = decide(path)
                out[name]["verdict"][run, c], out[name]["n"][run, c] = verdict, n
    return out


def _right(rate: float) -> str:
    return "pass" if rate >= BOUND else "fail"


def report(name: str, sim: dict[str, np.ndarray], fixed_total: int, exact=None) -> list[str]:
    """Prints the rule's ratio and per-condition rates; returns what misses the goal."""
    totals = sim["n"].sum(axis=1)
    ratios = fixed_total / totals
    runs = len(totals)
    lo, hi = np.percentile(ratios, [5, 95])
    print(
        f"{name}: samples per run {totals.mean():.1f} (sd {totals.std(ddof=1):.1f}); ratio per run "
        f"mean {ratios.mean():.2f}, sd {ratios.std(ddof=1):.2f}, 5-95 % {lo:.2f}-{hi:.2f}; "
        f"ratio of expectations {fixed_total / totals.mean():.2f}"
    )
    misses = []
    for c, (item, rate) in enumerate(RATES.items()):
        verdicts = sim["verdict"][:, c]
        right = float(np.mean(verdicts == _right(rate)))
        wrong = float(np.mean(verdicts == ("fail" if rate >= BOUND else "pass")))
        mean_n = sim["n"][:, c].mean()
        line = (
            f"  {item:9} p {rate:.2f}: right {right:.3f}, wrong {wrong:.3f}, mean n {mean_n:6.1f}"
        )
        if exact is not None:
            o = exact.outcome(rate)
            power = o.passes if rate >= BOUND else o.fails
            se = math.sqrt(max(power * (1 - power), 1 / runs) / runs)
            line += f" (exact: right {power:.3f}, mean n {o.samples:.1f})"
            if abs(right - power) > 4 * se:
                misses.append(f"{item}: simulated right {right:.3f} vs exact {power:.3f}")
        print(line)
    all_right = (sim["verdict"] == [_right(r) for r in RATES.values()]).all(axis=1)
    print(f"  all ten right in {all_right.mean():.3f} of runs")
    return misses


def errors_at_bound(test: GroupSequential, runs: int, seed: int) -> list[str]:
    """The group-sequential rule on `runs` paths at p = BOUND (the worst case of both errors):
    simulated pass and fail shares beside the exact ones."""
    got = [
        gsd_decision(
            (np.random.default_rng([seed, run, 99]).random(test.looks[-1]) < BOUND).astype(float),
            test,
        )[0]
        for run in range(runs)
    ]
    at = test.outcome(BOUND)
    misses = []
    for side, exact in (("pass", at.passes), ("fail", at.fails)):
        share = got.count(side) / runs
        print(f"  at p = {BOUND}, {runs} paths: {side} {share:.3f} (exact {exact:.4f})")
        if share - exact > 4 * math.sqrt(exact * (1 - exact) / runs):
            misses.append(f"simulated {side} at the bound {share:.3f} vs exact {exact:.4f}")
    return misses


def simulate_main(runs: int, seed: int, power: float, tokens: int = 64) -> int:
    start = time.process_time()
    n = fixed_n(power)
    per_condition = int(next(m for m in range(4, 2049) if fixed_powers(m).min() >= power))
    print(
        f"gate auc >= {BOUND}, one-sided at {LEVEL:.0%}; {runs} simulated runs, seed {seed}\n"
        f"fixed baseline: n = {n} per condition ({10 * n} samples), all ten right with "
        f"{fixed_powers(n).prod():.3f} (exact); the smallest n with each condition's power >= "
        f"{power} is {per_condition}: all ten right with {fixed_powers(per_condition).prod():.3f}"
    )
    alpha = 1 - LEVEL
    test = design(LOOKS, BOUND, alpha)
    looks = schedule(SampleRange(**SHIPPED))
    sims = simulate(
        runs,
        seed,
        {"shipped": lambda x: shipped_decision(x, looks), "group": lambda x: gsd_decision(x, test)},
    )
    print(f"\nshipped rule (samples: {SHIPPED}, doubling, looks {looks}, anytime bounds):")
    report("shipped", sims["shipped"], 10 * n)
    at = test.outcome(BOUND)
    print(
        f"\ngroup-sequential (harness.stats.group_sequential), looks {LOOKS}; nominal alpha "
        f"pass {test.alpha_pass:.4f}, fail {test.alpha_fail:.4f}; exact error at p = {BOUND}: "
        f"pass {at.passes:.4f} (the sup over p < {BOUND}), fail {at.fails:.4f}:"
    )
    misses = report("group-sequential", sims["group"], 10 * n, exact=test)
    exact_total = sum(test.outcome(r).samples for r in RATES.values())
    mean_ratio = float(np.mean(10 * n / sims["group"]["n"].sum(axis=1)))
    print(
        f"  exact expected samples {exact_total:.1f}: "
        f"ratio of expectations {10 * n / exact_total:.2f}"
    )
    expected_ratio = 10 * n / sims["group"]["n"].sum(axis=1).mean()
    worst = min(mean_ratio, expected_ratio, 10 * n / exact_total)
    if worst < GOAL_RATIO:  # the goal holds for the mean ratio and the ratio of expectations
        misses.append(f"ratio {worst:.2f} < {GOAL_RATIO}")
    misses += errors_at_bound(test, runs, seed)
    if max(at.passes, at.fails) > alpha:
        misses.append(f"exact error at the bound {max(at.passes, at.fails):.4f} > {alpha:.2f}")
    for item, rate in RATES.items():
        o = test.outcome(rate)
        if (o.passes if rate >= BOUND else o.fails) < power:
            misses.append(f"{item}: exact power below {power}")
    per = per_sample_budget(tokens)
    print(
        f"\nin requests and tokens (one request a sample; the run plan's budget per sample: "
        f"{per.input_tokens:.1f} input + {per.output_tokens:.0f} output tokens, replies of "
        f"<= {tokens}):"
    )
    totals = {name: sims[name]["n"].sum(axis=1) for name in ("shipped", "group")}
    for line in cost_lines({"shipped": totals["shipped"], "group-sequential": totals["group"]},
                           10 * n, per):  # fmt: skip
        print(f"  {line}")
    print(f"CPU {time.process_time() - start:.0f} s")
    for miss in misses:
        print(f"MISS: {miss}")
    return 1 if misses else 0
