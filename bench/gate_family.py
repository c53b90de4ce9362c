"""Does one false-verdict budget hold over a run's gates? Simulated runs with known truths,
through the project's own code: summary.csv's gate columns from `gate_bounds` (what
`adherence_summary` writes: the one-sided bounds and Holm's `holm_bounds`, at `gate_levels`),
verdicts from `evaluate_gates` under
`stats.family: holm` and, on the same samples, per check (`none`). Exits 1 when Holm's
family-wise error rate is above 1 - level beyond Monte-Carlo error.

    .venv/bin/python bench/gate_family.py [--reps 1000] [--seed 0] [--quick]

Scenario: 8 auc gates (min 0.5), one per item, 40 samples each, 0/1 per-sample values (exact
Clopper-Pearson bounds). Four items truly clear the bound (rate 0.9: a `fail` is wrong); four
sit just under it (rate 0.499: a `pass` is wrong), the least favourable place for a false
pass. The clear ones are decided at Holm's first step, so the four others are tested at
1 - 0.05 / 4: Holm spends its whole budget there. The family-wise error rate is the share of
runs with at least one wrong verdict.

Second scenario, the prescription (`prescribe`, no gates): 5 items x 5 rules under `none` and
one other policy, 40 samples of 0/1 per-sample AUCs each, every condition at the target 0.8
or just under it (0.799); its rules.csv rows as `rule_frames` makes them (the AUC's bounds at
the table's level in `holm_bounds`). A wrong decided row: `holds` yes (no) where the baseline
is under (at) the target, a `fix` under it, a policy said to fail at it. Printed for the
table's Bonferroni budget and, on the same draws, per row (each at stats.level, as before).
"""

from __future__ import annotations

import argparse
import math
import sys
import time

import numpy as np
import pandas as pd
from _limit import cpu_description

from harness.analysis.gate_family import ladder_row, prescription_level, with_level
from harness.analysis.gates import evaluate_gates
from harness.analysis.prescription import prescribe
from harness.config.gate_specs import GateSpec, gate_levels
from harness.scoring.adherence import gate_bounds

LEVEL = 0.95
BOUND = 0.5
TRUTHS = (0.9, 0.9, 0.9, 0.9, 0.499, 0.499, 0.499, 0.499)


def one_run(
    rng: np.random.Generator, samples: int, truths=TRUTHS
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """gates.csv under holm and per check (none) of one simulated run: each condition's
    per-sample values read as summary.csv's gate columns are made (`gate_bounds`)."""
    items = [f"i{k}" for k in range(len(truths))]
    gates = [GateSpec(metric="auc", policy="none", min=BOUND, items=[i]) for i in items]
    levels = gate_levels(gates, ["m"], items, LEVEL, "holm")
    rows = []
    for item, p in zip(items, truths, strict=True):
        values = (rng.uniform(size=samples) < p).astype(float)
        row = {"model": "m", "item": item, "policy": "none", "auc": values.mean(), "n": samples}
        rows.append({**row, "auc_n": samples, **gate_bounds({"auc": values}, levels, False)})
    summary = pd.DataFrame(rows)
    holm = evaluate_gates(gates, summary, items, ["m"], LEVEL, "holm")
    # per check: every bound at stats.level, Holm's last level (the same samples)
    per_check = pd.DataFrame([ladder_row(r, "auc", LEVEL) for r in rows])
    none = evaluate_gates(gates, per_check, items, ["m"], LEVEL, "none")
    return holm, none


def wrong(gates: pd.DataFrame, truths=TRUTHS) -> bool:
    """Some verdict is wrong: a pass where the truth is under the bound, a fail where not."""
    truth = dict(zip([f"i{k}" for k in range(len(truths))], truths, strict=True))
    above = gates["item"].map(truth) >= BOUND
    verdict = gates["verdict"]
    return bool(((verdict == "pass") & ~above).any() or ((verdict == "fail") & above).any())


def family_error(reps: int, seed: int = 0, samples: int = 40) -> dict[str, float]:
    """Share of runs with a wrong verdict under holm and per check, and Holm's decided share."""
    rng = np.random.default_rng(seed)
    counts = {"holm": 0, "none": 0}
    decided = 0
    for _ in range(reps):
        holm, none = one_run(rng, samples)
        counts["holm"] += wrong(holm)
        counts["none"] += wrong(none)
        decided += int((holm["verdict"] != "undecided").sum())
    return {
        "holm": counts["holm"] / reps,
        "none": counts["none"] / reps,
        "decided": decided / (reps * len(TRUTHS)),
    }


# The prescription (harness.analysis.prescription): 5 items x 5 rules under `none` and one
# other policy, the AUC of each against the target 0.8 (no gates: its own budget). Half the
# conditions sit at the target (0.8: a `no` or `fails` is wrong), half just under it (0.799: a
# `yes`, `passes` or `fix` is wrong): every test at its least favourable place.
TARGET = 0.8
PRESCRIPTION_TRUTHS = (TARGET, TARGET - 0.001)


def prescription_run(rng: np.random.Generator, samples: int, family: bool) -> tuple[list, dict]:
    """(PrescriptionRows, truth by (item, rule, policy)) of one simulated run: rules.csv's
    rows as `rule_frames` makes them (`gate_bounds` at the gates' level and, with `family`,
    the table's `prescription_level` in holm_bounds; without, as before: per row)."""
    conditions = [(f"i{i}", f"r{r}", p) for i in range(5) for r in range(5)
                  for p in ("none", "periodic")]  # fmt: skip
    levels = with_level(LEVEL, prescription_level(LEVEL, len(conditions))) if family else LEVEL
    rows, truth = [], {}
    for k, (item, rule, policy) in enumerate(conditions):
        p = PRESCRIPTION_TRUTHS[(k + rng.integers(2)) % 2]
        values = (rng.uniform(size=samples) < p).astype(float)
        truth[(item, rule, policy)] = p
        rows.append(dict(model="m", task="s", item=item, policy=policy, rule=rule,
                         sentence="", auc=values.mean(), auc_n=samples, n_samples=samples,
                         below=TARGET, **gate_bounds({"auc": values}, levels, False)))  # fmt: skip
    return prescribe(pd.DataFrame(rows), None, level=LEVEL), truth


def wrong_rows(rows: list, truth: dict) -> int:
    """Decided statements of the table that are wrong: `holds` yes/no of the baseline, the
    fix chosen (it passes), and each other policy said to fail."""
    bad = 0
    for r in rows:
        base = truth[(r.item, r.rule, r.baseline)] >= TARGET
        bad += (r.holds == "yes" and not base) or (r.holds == "no" and base)
        for policy in ("periodic",):
            above = truth[(r.item, r.rule, policy)] >= TARGET
            bad += (r.fix == policy and not above) or (f"{policy}: fails" in r.rejected and above)
    return bad


def prescription_error(reps: int, seed: int = 0, samples: int = 40) -> dict[str, float]:
    """Share of runs with a wrong decided row, under the table's budget and per row (the same
    samples: one rng stream per arm from one seed), and the share of rows decided."""
    out = {}
    for family in (True, False):
        rng = np.random.default_rng(seed)
        runs = decided = 0
        for _ in range(reps):
            rows, truth = prescription_run(rng, samples, family)
            runs += wrong_rows(rows, truth) > 0
            decided += sum(r.holds != "cannot tell" for r in rows)
        name = "family" if family else "per_row"
        out[name], out[f"{name}_decided"] = runs / reps, decided / (reps * 25)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="100 runs")
    args = parser.parse_args(argv)
    reps = 100 if args.quick else args.reps
    start = time.perf_counter()
    rates = family_error(reps, args.seed)
    mc = math.sqrt((1 - LEVEL) * LEVEL / reps)
    print(f"{cpu_description()}; {reps} runs of 8 gate checks")
    budget = f"budget {100 * (1 - LEVEL):.0f} %"
    print(f"family-wise error, holm:      {100 * rates['holm']:.1f} % ({budget})")
    print(f"family-wise error, per check: {100 * rates['none']:.1f} % (bound: 8 x 5 % = 40 %)")
    print(f"checks decided under holm:    {100 * rates['decided']:.1f} %")
    ok = rates["holm"] <= (1 - LEVEL) + 3 * mc
    table = prescription_error(reps, args.seed)
    print(f"prescription, {reps} runs of 5 items x 5 rules x 2 policies (no gates):")
    print(
        f"  any wrong decided row, table's budget: {100 * table['family']:.1f} % ({budget}); "
        f"baseline rows decided {100 * table['family_decided']:.1f} %"
    )
    print(
        f"  any wrong decided row, per row:        {100 * table['per_row']:.1f} %; "
        f"baseline rows decided {100 * table['per_row_decided']:.1f} %"
    )
    ok = ok and table["family"] <= (1 - LEVEL) + 3 * mc
    print(f"Monte-Carlo error at 5 %: {100 * mc:.1f} points; {time.perf_counter() - start:.0f} s")
    print(f"verdict: {'pass' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
