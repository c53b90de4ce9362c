"""Do the harness's 95 % intervals cover the truth? Simulated runs with known truths, through
the project's own code; exits 1 when a cell's coverage is too low.

    .venv/bin/python bench/coverage.py [--reps 200] [--quick] [--only FAMILY ...]

Every interval the harness writes from sampled verdicts, each read from the table the harness
writes (the column `<metric>_low/_high`; a missing column or row stops the bench):
summary.csv (`adherence_summary`: AUC, final, pass^1, pass^3, aptitude, unreliability,
half-life, survival median), a(t) (`adherence_curves`), policies.csv (`compare_policies`:
delta AUC, final and half_life_capped, per item and pooled), conversations
(`turn_curves`: a(k), S(k); `conversation_summary`: mean, first failing turn, pressure change
per item and pooled), fork dependence (`carried.dependence_interval`), calibration.csv
(`judge_calibration`: accuracy, kappa of one rule, sensitivity, specificity) and sequential
decisions (the confidence sequence of a sequential run, decided by the gates'
`interval_verdict`). The corrected estimates are bench/corrected.py's (same verdict,
bench/_cover.py). What each truth is: bench/_adherence_cells.py and bench/_more_cells.py.
Not covered: intervals that resample (alpha fits, law_table, the predictor's AUROC, the
pooled judge kappa, correlations: their methods say "approximate" and claim no small-n
coverage) and the survival curve S(t) (the same binomial bounds as the survival median's).

Verdict (bench/_cover.py): per cell, a one-sided exact binomial test of coverage >= 95 %,
Holm over all cells at 5 %; and a floor on each cell (0.93 coverage, 0.95 = a wrong-decision
rate <= 5 % for decisions; a quick run's floor is the rate a cell at exactly 95 % stays above
with probability 0.999). A cell below its floor or with p < 0.05 before Holm is topped up
(4 x its runs more, at a seed fixed by the run's seed and the scenario) and judged on the
pooled runs; the topped-up cells are printed. Seeded (--seed 0), so a run's verdict is
reproducible. Monte-Carlo
error of a coverage near 0.95 over R runs: sqrt(0.05 x 0.95 / R) (0.015 at 200).
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
from _adherence_cells import flat_cells, survival_cells
from _cover import TOP_UP, needs_top_up, pool, print_cells, verdict
from _more_cells import calibration_cells, conversation_cells, fork_cells, sequential_cells
from _simulated import FLAT

FAMILIES = ("adherence", "survival", "conversations", "forks", "calibration", "sequential")
# the full grid: (family, function, arguments before reps and rng)
FULL = (  # the cheap families first: a run stopped early has measured them
    [("forks", fork_cells, (n, d, s)) for n in (4, 16, 64) for d in (2, 4) for s in (0, 0.5)]
    + [("calibration", calibration_cells, (proc, n)) for proc in ("independent", "sticky")
       for n in (4, 16, 64)]
    + [("conversations", conversation_cells, (proc, n)) for n in (4, 16, 64)
       for proc in ("independent", "markov 0.7", "sticky", "breaks h=0.2", "breaks h=0.45",
                    "breaks h=0.2 cut=0.3")]
    + [("sequential", sequential_cells, (proc, p)) for proc in ("sticky", "independent", "mixed")
       for p in (0.72, 0.88)]
    + [("survival", survival_cells, ("breaks", n, (h,))) for n in (4, 16, 64)
       for h in (0.08, 0.2, 0.45)]
    + [("survival", survival_cells, ("fades", n, (0.95, d))) for n in (4, 16, 64)
       for d in (0.85, 0.7)]
    + [("adherence", flat_cells, (proc, n, p, p == 0.9)) for proc in FLAT for n in (4, 16, 64)
     for p in (0.5, 0.9, 0.99)]
)  # fmt: skip
QUICK = (
    ("adherence", flat_cells, ("sticky", 8, 0.9, True)),
    ("adherence", flat_cells, ("mixed", 8, 0.9, False)),
    ("survival", survival_cells, ("breaks", 8, (0.2,))),
    ("conversations", conversation_cells, ("independent", 8)),
    ("forks", fork_cells, (8, 2, 0.5)),
    ("calibration", calibration_cells, ("independent", 8)),
    ("sequential", sequential_cells, ("mixed", 0.88)),
)
QUICK_REPS = 40


def measure(grid, reps: int, seed: int, only: set[str], progress: bool, quick: bool) -> list:
    """Every cell of the grid's families in `only`, the flagged ones topped up (`top_up`);
    `progress`: each scenario's cells are printed as they come (a long run that is stopped
    still shows what it measured)."""
    rng = np.random.default_rng(seed)
    cells = []
    for index, (family, function, args) in enumerate(grid):
        if family in only:
            new = top_up(function(*args, reps, rng), (function, args), reps, (seed, index), quick)
            cells += new
            if progress:
                text = ", ".join(f"{c.metric} {c.rate:.3f}/{c.width:.3g}" for c in new)
                print(f"[{family} {new[0].scenario}] coverage/width: {text}", flush=True)
    return cells


def top_up(cells: list, scenario, reps: int, key: tuple[int, int], quick: bool) -> list:
    """The scenario's cells, those below the floor or with p < FAMILY before Holm pooled with
    TOP_UP x reps more runs of the scenario drawn at a seed fixed by (run seed, scenario
    index), so a cell's extra runs are the same whether or not others were topped up
    (bench/_cover.py says why the pooled verdict keeps Holm's family error)."""
    flagged = [needs_top_up(c, quick) for c in cells]
    if not any(flagged):
        return cells
    function, args = scenario
    more = function(*args, TOP_UP * reps, np.random.default_rng([*key, 1]))
    # the same scenario gives the same cells in the same order (pool checks the names)
    return [pool(c, m) if f else c for c, f, m in zip(cells, flagged, more, strict=True)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=200, help="simulated runs per cell")
    parser.add_argument(
        "--quick", action="store_true", help=f"a few cells at {QUICK_REPS} runs (CI)"
    )
    parser.add_argument("--only", nargs="+", choices=FAMILIES, default=list(FAMILIES))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    reps = QUICK_REPS if args.quick else args.reps
    start = time.perf_counter()
    grid = QUICK if args.quick else FULL
    cells = measure(grid, reps, args.seed, set(args.only), not args.quick, args.quick)
    print(f"{reps} simulated runs per cell, seed {args.seed}; 95 % intervals")
    print_cells(cells)
    code = verdict(cells, quick=args.quick)
    print(f"({time.perf_counter() - start:.0f} s)")
    return code


if __name__ == "__main__":
    sys.exit(main())
