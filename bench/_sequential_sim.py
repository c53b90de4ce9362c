"""bench/sequential.py's default: the rules over many simulated runs (its docstring says what
each rule is). One run: every condition's 0/1 sample path drawn once (seeded by run and
condition), read by every rule, so the rules compare on the same samples. The shipped rule is
read through the runner's own code: the looks of harness.config.sampling.schedule, the passes
counted by harness.stats.group_sequential.binary_count as the analyse stage counts them, the
verdict of harness.analysis.gate_sequential.sequential_check as the gates stage makes it."""

from __future__ import annotations

import math
import time

import numpy as np
from _sequential_cost import cost_lines, per_sample_budget
from sequential import BOUND, GOAL_RATIO, LEVEL, RATES, SHIPPED, fixed_n, fixed_powers

from harness.analysis.gate_sequential import sequential_check
from harness.config.gate_specs import GateSpec
from harness.config.sampling import SampleRange, schedule
from harness.stats.group_sequential import GroupSequential, binary_count, gate_design
from harness.stats.sided import one_sided_bounds

GATE = GateSpec(metric="auc", policy="none", min=BOUND)
DOUBLING = [4, 8, 16, 32, 64, 128, 256]  # the rule shipped before (samples: {min 4, max 256})


def shipped_decision(path: np.ndarray, looks: tuple[int, ...], key: str) -> tuple[str, int]:
    """(verdict, samples) of the shipped rule, through the runner's functions: at each look the
    condition's summary.csv fields (auc, auc_n, auc_passes) and the gate's check."""
    for n in looks:
        row = {"auc": path[:n].mean(), "auc_n": n, "auc_passes": binary_count(path[:n], key)}
        verdict, _, _ = sequential_check(GATE, row, looks, LEVEL)
        if verdict != "undecided":
            return verdict, n
    return "undecided", looks[-1]


def doubling_decision(path: np.ndarray, looks: list[int]) -> tuple[str, int]:
    """(verdict, samples) of the rule shipped before: at each doubling look the gate's anytime
    one-sided bounds on the samples so far (AUC is a fraction metric), pass at lcb >= BOUND,
    fail at ucb < BOUND."""
    for n in looks:
        b = one_sided_bounds(path[:n], level=LEVEL, anytime=True, value_type="fraction")
        if b.lcb >= BOUND:
            return "pass", n
        if b.ucb < BOUND:
            return "fail", n
    return "undecided", looks[-1]


def simulate(runs: int, seed: int, rules: dict) -> dict[str, dict[str, np.ndarray]]:
    """Per rule: verdicts (runs x conditions) and samples (runs x conditions)."""
    longest = max(SHIPPED["max"], DOUBLING[-1])
    out = {
        r: {"verdict": np.empty((runs, len(RATES)), object), "n": np.zeros((runs, len(RATES)))}
        for r in rules
    }
    for run in range(runs):
        for c, rate in enumerate(RATES.values()):
            path = (np.random.default_rng([seed, run, c]).random(longest) < rate).astype(float)
            for name, decide in rules.items():
                verdict, n = decide(path, f"{run}|{c}")
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
    """The shipped rule on `runs` paths at p = BOUND (the worst case of both errors): simulated
    pass and fail shares beside the exact ones of its design."""
    got = [
        shipped_decision(
            (np.random.default_rng([seed, run, 99]).random(test.looks[-1]) < BOUND).astype(float),
            test.looks,
            f"bound|{run}",
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
    looks = tuple(schedule(SampleRange(**SHIPPED)))
    test = gate_design(looks, BOUND, alpha)  # the design the runner's gates use at these looks
    sims = simulate(
        runs,
        seed,
        {
            "shipped": lambda x, key: shipped_decision(x, looks, key),
            "doubling": lambda x, _key: doubling_decision(x, DOUBLING),
        },
    )
    print(f"\nbefore: doubling (samples: {{min: 4, max: 256}}, looks {DOUBLING}, anytime bounds):")
    report("doubling", sims["doubling"], 10 * n)
    at = test.outcome(BOUND)
    print(
        f"\nshipped rule (samples: {SHIPPED}: looks {list(looks)}, "
        f"harness.config.sampling.schedule; "
        f"group-sequential, harness.analysis.gate_sequential); nominal alpha pass "
        f"{test.alpha_pass:.4f}, fail {test.alpha_fail:.4f}; exact error at p = {BOUND}: "
        f"pass {at.passes:.4f} (the sup over p < {BOUND}), fail {at.fails:.4f}:"
    )
    misses = report("shipped", sims["shipped"], 10 * n, exact=test)
    exact_total = sum(test.outcome(r).samples for r in RATES.values())
    mean_ratio = float(np.mean(10 * n / sims["shipped"]["n"].sum(axis=1)))
    print(
        f"  exact expected samples {exact_total:.1f}: "
        f"ratio of expectations {10 * n / exact_total:.2f}"
    )
    for largest in (64, 256):  # the ratio depends on max: undecided paths run to it
        other = gate_design(tuple(schedule(SampleRange(min=4, max=largest))), BOUND, alpha)
        total = sum(other.outcome(r).samples for r in RATES.values())
        worst = min(
            (other.outcome(r).passes if r >= BOUND else other.outcome(r).fails)
            for r in RATES.values()
        )
        print(
            f"  exact, max {largest}: expected samples {total:.1f}, ratio {10 * n / total:.2f}, "
            f"least power {worst:.3f}"
        )
    expected_ratio = 10 * n / sims["shipped"]["n"].sum(axis=1).mean()
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
    totals = {name: sims[name]["n"].sum(axis=1) for name in ("doubling", "shipped")}
    named = {
        "doubling (before)": totals["doubling"],
        "shipped (group-sequential)": totals["shipped"],
    }
    for line in cost_lines(named, 10 * n, per):
        print(f"  {line}")
    print(f"CPU {time.process_time() - start:.0f} s")
    for miss in misses:
        print(f"MISS: {miss}")
    return 1 if misses else 0
