"""bench/laws.py --runs: whole runs of mixed truths through `law_table.law_rows` (Holm over the
run's sets, bootstrap draws VERDICT_DRAWS), counting runs with any false decided verdict.

Each run holds --sets curve sets, the truths in turn: mechanism curves (the four noise models in
turn, pairs in --units in turn) that decay to zero as a power law (a uniform in [0.3, 1]) or an
exponential (10-20x over [16, 320]), settle at 25 % of D(1) (power-floor a in [0.5, 1], or
exp-equilibrium lam 1/32), stay flat, or rise (t^0.5); behaviour a(t) (0/1 windows, 48 of them,
16 or 8 samples) that decays to zero (power a in [0.5, 1], exponential 3-10 e-folds), settles
at 20-30 % (the adherence-floor table's approaches: power rate in [1, 2], exponential 3-5
e-folds), stays flat at 0.5, or rises 2x. A verdict
is false when it says what the truth is not: a decay to zero read `settles`, `flat` or `grows`;
a floor `vanishes`, `flat` or `grows`; a flat curve `vanishes`, `settles` or `grows`; a rise
`vanishes`, `settles` or `flat`. `flat` promises only that the curve moves less than the flat
band allows over the fitted range (an exponent within +-FLAT_BAND: x_max / x_min to the 0.1, 1.35
over [16, 320]): a 25 % floor approached at a = 1 falls 15 % there, and `flat` is true of it.
The goal: the share of runs with any false verdict at most the
family level 1 - DEFAULT_LEVEL.
"""

from __future__ import annotations

import time

import numpy as np
from _law_truths import (
    EXP_TENFOLD,
    NOISE_MODELS,
    _set,
    adherence_curve,
    adherence_set,
    adherence_units,
    model_units,
    truth,
    windows_x,
)

from harness.analysis import laws as L
from harness.analysis.law_table import law_rows
from harness.analysis.law_verdict import FLAT_BAND
from harness.analysis.powerlaw import fit_positions
from harness.stats import DEFAULT_LEVEL

FALSE = {
    "zero": {"settles", "flat", "grows"},
    "floor": {"vanishes", "flat", "grows"},
    "flat": {"vanishes", "settles", "grows"},
    "rise": {"vanishes", "settles", "flat"},
}
MECHANISM = ("zero", "zero-exp", "floor", "floor-exp", "flat", "rise")
BEHAVIOUR = ("zero", "zero-exp", "floor", "floor-exp", "flat", "rise")


def _mechanism(kind, i, n, rng, x):
    noise = NOISE_MODELS[i % len(NOISE_MODELS)]
    law, rate, floor = {
        "zero": (L.LAW_ZERO, rng.uniform(0.3, 1.0), 0.0),
        "zero-exp": (L.LAW_EQUILIBRIUM, EXP_TENFOLD * rng.uniform(1.0, 2.0), 0.0),
        "floor": (L.LAW_FLOOR, rng.uniform(0.5, 1.0), 0.25),
        "floor-exp": (L.LAW_EQUILIBRIUM, 1 / 32, 0.25),
        "flat": (L.LAW_ZERO, 0.0, 0.0),
        "rise": (L.LAW_ZERO, -0.5, 0.0),
    }[kind]
    return _set(model_units(noise, law, rate, floor, n, rng, x), x, i), truth(law, x, rate, floor)


def _behaviour(kind, i, n, rng, xb):
    shape, rate, floor = {
        "zero": ("power", rng.uniform(0.5, 1.0), 0.0),
        "zero-exp": ("exp", rng.uniform(3.0, 10.0), 0.0),
        "floor": ("power", rng.uniform(1.0, 2.0), rng.uniform(0.2, 0.3)),
        "floor-exp": ("exp", rng.uniform(3.0, 5.0), rng.uniform(0.2, 0.3)),
        "flat": ("flat", 0.0, 0.5),
        "rise": ("rise", 2.0, 0.3),
    }[kind]
    units = adherence_units(shape, rate, floor, n, rng, xb)
    return adherence_set(units, xb, i), adherence_curve(shape, xb, rate, floor)


def _moves(curve: np.ndarray, x: np.ndarray) -> bool:
    """Whether a true curve moves more over x than `flat` allows."""
    band = (x.max() / x.min()) ** FLAT_BAND
    return bool(curve.max() / max(curve.min(), 1e-12) > band)


def one_run(n_sets, units, rng, x, xb, draws):
    """(false verdicts by truth, decided verdicts by truth) of one whole run."""
    sets, truths, moving = [], [], {}
    for i in range(n_sets):
        behaviour = i % 2 == 1
        kind = (BEHAVIOUR if behaviour else MECHANISM)[(i // 2) % 6]
        if behaviour:
            made, curve = _behaviour(kind, i, (16, 8)[(i // 12) % 2], rng, xb)
        else:
            made, curve = _mechanism(kind, i, units[(i // 12) % len(units)], rng, x)
        sets.append(made)
        moving[made.ident["item"]] = _moves(curve, made.x)
        truths.append(("behaviour " if behaviour else "mechanism ") + kind)
    by_set = {s.ident["item"]: t for s, t in zip(sets, truths, strict=True)}
    wrong: dict[str, int] = {}
    decided: dict[str, int] = {}
    for row in law_rows(sets, draws=draws):
        if not row["chosen"]:
            continue
        truth = by_set[row["item"]]
        klass = truth.split()[1].removesuffix("-exp")
        if row["verdict"] != "cannot tell":
            key = f"{truth} {row['verdict']}"
            decided[key] = decided.get(key, 0) + 1
        if row["verdict"] in FALSE[klass] and (row["verdict"] != "flat" or moving[row["item"]]):
            wrong[f"{truth} -> {row['verdict']}"] = wrong.get(f"{truth} -> {row['verdict']}", 0) + 1
    return wrong, decided


def mixed_runs(args, draws: int) -> bool:
    """The share of whole runs with any false decided verdict against the family level."""
    x = fit_positions(args.t_min, args.tokens).astype(np.float64)
    xb = windows_x()
    rng = np.random.default_rng(args.seed)
    alpha, start = 1 - DEFAULT_LEVEL, time.perf_counter()
    bad, wrong_all, decided_all = 0, {}, {}
    for _ in range(args.runs):
        wrong, decided = one_run(args.sets, args.units, rng, x, xb, draws)
        bad += bool(wrong)
        for k, v in wrong.items():
            wrong_all[k] = wrong_all.get(k, 0) + v
        for k, v in decided.items():
            decided_all[k] = decided_all.get(k, 0) + v
    share = bad / args.runs
    per_truth = args.runs * args.sets / 12
    print(f"{args.runs} whole runs of {args.sets} sets, mixed truths (mechanism pairs in "
          f"{args.units}, noise {', '.join(NOISE_MODELS)}; behaviour 16 / 8 samples x 48 "
          f"windows), bootstrap draws {draws}: {bad} runs with a false decided verdict "
          f"({share:.3f}; family level {alpha:g}); "
          f"{time.perf_counter() - start:.0f} s")  # fmt: skip
    print(
        "decided verdicts per truth (share of its sets, by verdict): "
        + ", ".join(f"{k} {v / per_truth:.2f}" for k, v in sorted(decided_all.items()))
    )
    print("false verdicts: " + (", ".join(f"{k} {v}" for k, v in sorted(wrong_all.items()))
                                or "none"))  # fmt: skip
    return share <= alpha
