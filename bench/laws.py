"""Does laws.csv pick the right law? Simulated mechanism curves with a known law, through the
project's own chooser (`law_table.choose_law`: leave-one-pair-out with a paired test from 4
pairs, else rolling-origin tail errors with the 5 % margin), side by side over a grid of truths
in one run.

    .venv/bin/python bench/laws.py [--reps 100] [--quick] [--seed S] [--units N ...]
        [--verdicts | --tail-only] [--bound] [--tokens T] [--t-min T0] [--measure RUN_DIR]

Truth, per unit (a probe pair), at continuation positions t = 1..T (T = 320, the quickstart's
reply), relative to D(1) = 1: `power-zero` t^-a; `power-floor` f + (1 - f) t^-a;
`exp-equilibrium` f + (1 - f) e^(-lam (t - 1)); f the floor's share of the initial value D(1).
Each unit's log curve gets the embedded model's noise: a per-unit offset (sd `--unit-sd`: pairs
differ in level) plus AR(1) noise along the fit grid (sd `--point-sd`, lag-one correlation
`--rho` between neighbouring fit positions). The defaults were measured on a quickstart run
(`--measure RUN_DIR` prints them from its divergence.csv: residuals of each pair's late-layer
log rel_l2 around the power-floor fit of the same pair). Units are fitted at the fit grid of
[t_min = 16, T], pooled as laws.csv pools them (the mean over units at each position), at the
shipped configs' unit counts: 2 pairs (a quickstart condition), 6 (a quickstart policy over the
items), 24 (the quickstart's model); 4 / 8 / 16 (configs/equilibrium.yaml: a condition, a
policy, the model).

Per cell: the share of runs whose chosen law is the true one, [the share choosing a floored
law]. Goal: >= 0.90 in every cell of the grid in docs/performance.md. Monte-Carlo error of a
share near 0.9 over R runs: sqrt(0.09 / R). `--tail-only`: the chooser before leave-one-pair-out,
on the same simulated runs. `--bound`: per floored truth, its distance from the nearest power
law to zero and the most any chooser can recover (`bound`), no simulation.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from _law_truths import NOISE_MODELS, _set, model_units, truth  # noqa: F401 (the tests' too)
from _limit import cpu_description

from harness.analysis import laws as L
from harness.analysis.law_sets import CurveSet
from harness.analysis.law_table import choose_law, law_rows, run_holm, set_choice, set_rows
from harness.analysis.law_verdict import close_floored, verdict
from harness.analysis.powerlaw import fit_positions

T, T_MIN = 320, 16
UNITS = (2, 4, 6, 8, 16, 24)  # quickstart 2 / 6 / 24; configs/equilibrium.yaml 4 / 8 / 16
VERDICT_DRAWS = 100  # bootstrap draws per simulated run when verdicts are counted
from _law_truths import POINT_SD, RHO, UNIT_SD  # noqa: E402 (measured on the quickstart)


def grid_cells(quick: bool) -> list[tuple[str, float, float]]:
    """(law, rate, floor share) of every truth simulated."""
    alphas = (0.3, 1.0) if quick else (0.3, 0.5, 0.7, 1.0)
    cells = [(L.LAW_ZERO, a, 0.0) for a in alphas]
    cells += [(L.LAW_FLOOR, a, f) for f in (0.1, 0.25) for a in alphas]
    lams = (1 / 32,) if quick else (1 / 64, 1 / 32, 1 / 16)
    cells += [(L.LAW_EQUILIBRIUM, lam, f) for f in (0.1, 0.25) for lam in lams]
    return cells


def noisy_units(truth_curve, n, rng, point_sd, rho, unit_sd) -> np.ndarray:
    """(n, len(truth_curve)) units: truth x exp(unit offset + AR(1) noise along the grid)."""
    k = len(truth_curve)
    z = rng.normal(0.0, point_sd, (n, k))
    e = np.empty_like(z)
    e[:, 0] = z[:, 0]
    for i in range(1, k):
        e[:, i] = rho * e[:, i - 1] + np.sqrt(1 - rho**2) * z[:, i]
    return truth_curve[None, :] * np.exp(e + rng.normal(0.0, unit_sd, (n, 1)))


WRONG = {L.LAW_ZERO: "settles", L.LAW_FLOOR: "vanishes", L.LAW_EQUILIBRIUM: "vanishes"}


def chosen_law(x: np.ndarray, units: np.ndarray, tail_only: bool = False) -> str | None:
    """The law laws.csv chooses for these pairs (`law_table.choose_law`: leave-one-pair-out
    from PAIRED_MIN_UNITS pairs, else the rolling-origin tail); `tail_only`: the chooser before
    leave-one-pair-out (the tail of the mean curve, the 5 % margin, any floor)."""
    if tail_only:
        return L.choose(L.tail_errors(x, L.mean_curve(units), "relative"))
    curve = CurveSet({}, "rel_l2", "late", "t", "relative", x, units, "pair")
    mean = L.mean_curve(units)
    fits = {law: L.fit_law(law, x, mean, "relative") for law in L.LAWS}
    return choose_law(curve, x, units, mean, fits, units.shape[0])[2]


def recovery(law, rate, floor, n, reps, seed, noise, x, verdicts=False, tail_only=False):
    """(share of runs choosing the true law, share choosing a floored law, share whose verdict
    is decided and wrong: a decay to zero read `settles`, a floor read `vanishes`; NaN unless
    `verdicts`). x: the fit positions."""
    y = truth(law, x, rate, floor)
    rng = np.random.default_rng(seed)
    right = floored = wrong = 0
    for _ in range(reps):
        units = noisy_units(y, n, rng, *noise)
        chosen = chosen_law(x, units, tail_only)
        right += chosen == law
        floored += chosen in L.FLOORED
        if verdicts:
            ident = {"model": "m", "item": "i", "policy": "none"}
            curve = CurveSet(ident, "rel_l2", "late", "t", "relative", x, units, "pair")
            row = next(r for r in law_rows([curve], draws=VERDICT_DRAWS) if r["chosen"])
            wrong += row["verdict"] == WRONG[law]
    return right / reps, floored / reps, (wrong / reps if verdicts else float("nan"))


def bound(law, rate, floor, n, noise, x, zero_share=0.9, exponents=None) -> tuple[float, float]:
    """(distance, best recovery) of a floored truth from the power laws to zero: the distance
    in noise sds between the truth's log curve (mean of n pairs: sd point_sd / sqrt(n), AR(1)
    rho along the fit grid; a pair's level is a free scale) and the nearest power law to zero
    (generalised least squares in log x; `exponents` (lo, hi): the nearest with its exponent in
    that range, else any exponent), and Phi(distance - z), z the zero_share quantile: by
    Neyman-Pearson no chooser that reads that nearest decay to zero as a decay in zero_share of
    its runs recovers the floor in more of the truth's runs."""
    from scipy import stats

    point_sd, rho, _ = noise
    i = np.arange(len(x))
    cov = point_sd**2 / n * rho ** np.abs(i[:, None] - i[None, :])
    inv = np.linalg.inv(cov)
    log_y = np.log(truth(law, x, rate, floor))
    if exponents is None:
        design = np.column_stack([np.ones_like(x), np.log(x)])
        coef = np.linalg.solve(design.T @ inv @ design, design.T @ inv @ log_y)
        resid = log_y - design @ coef
        distance = float(np.sqrt(resid @ inv @ resid))
    else:  # the level is free, the exponent on a 0.01 grid of the range
        ones = np.ones_like(x)
        best = np.inf
        for a in np.arange(exponents[0], exponents[1] + 1e-9, 0.01):
            r0 = log_y + a * np.log(x)
            level = (ones @ inv @ r0) / (ones @ inv @ ones)
            resid = r0 - level
            best = min(best, float(resid @ inv @ resid))
        distance = float(np.sqrt(best))
    return distance, float(stats.norm.cdf(distance - stats.norm.ppf(zero_share)))


def _noise(x: np.ndarray, units: np.ndarray) -> tuple[float, float, float]:
    """(point sd, lag-one correlation, unit sd) of log curves around each one's power-floor fit."""
    units = units[np.all(units > 0, axis=1)]
    fit = L.fit_law(L.LAW_FLOOR, x, units, "relative")
    resid = np.log(units) - np.log(np.maximum(L.predict(L.LAW_FLOOR, fit, x, x.min()), 1e-30))
    rho = np.nanmean([np.corrcoef(r[:-1], r[1:])[0, 1] for r in resid])
    return float(resid.std()), float(rho), float(np.log(units).mean(axis=1).std())


def measure(run_dir: Path) -> dict[str, tuple[float, float, float]]:
    """The noise of the trained model's single-reply curves in a run folder: the late layer
    group's rel_l2 (divergence.csv) and the next-token KL (nexttoken.csv), at the fit grid."""
    import pandas as pd

    from harness.analysis.fits import layer_groups

    div = pd.read_csv(run_dir / "divergence.csv")
    single = div.groupby("pair")["turn"].transform("max") == 1  # conversations have turns
    div = div[single & (div["t"] >= T_MIN) & ~div["model"].str.startswith("untrained:")]
    name, members = layer_groups(sorted(int(v) for v in div["layer"].unique()))[-1]
    wide = div[div["layer"].isin(members)].groupby(["model", "pair", "t"])["rel_l2"].mean()
    table = wide.unstack("t").dropna(axis=1)
    out = {f"rel_l2 {name}": _noise(table.columns.to_numpy(float), table.to_numpy())}
    nxt = pd.read_csv(run_dir / "nexttoken.csv")
    nxt = nxt[nxt["pair"].isin(div["pair"].unique()) & ~nxt["model"].str.startswith("untrained:")]
    kl = nxt[nxt["t"].isin(table.columns)].groupby(["model", "pair", "t"])["kl"].mean()
    kl = kl.unstack("t").dropna(axis=1)
    out["kl"] = _noise(kl.columns.to_numpy(float), kl.to_numpy())
    print(f"measured on {len(table)} pairs, {len(table.columns)} fit positions")
    return out


def verdict_cells(quick: bool) -> list[tuple[str, float, float]]:
    """Truths of the verdict table: decays to zero with a in 0.1-1, floors at 10 % and 25 %."""
    alphas = (0.1, 1.0) if quick else (0.1, 0.3, 0.5, 1.0)
    cells = [(L.LAW_ZERO, a, 0.0) for a in alphas]
    cells += [(L.LAW_FLOOR, a, f) for f in (0.1, 0.25) for a in ((0.5,) if quick else (0.3, 1.0))]
    cells += [(L.LAW_EQUILIBRIUM, 1 / 32, f) for f in (0.1, 0.25)]
    return cells


def verdict_shares(kind, law, rate, floor, n, reps, seed, x) -> dict[str, float]:
    """Shares of runs (one curve set each, through law_rows) per verdict."""
    rng = np.random.default_rng(seed)
    counts: dict[str, int] = {}
    for _ in range(reps):
        units = model_units(kind, law, rate, floor, n, rng, x)
        row = next(r for r in law_rows([_set(units, x)], draws=VERDICT_DRAWS) if r["chosen"])
        counts[row["verdict"]] = counts.get(row["verdict"], 0) + 1
    return {k: v / reps for k, v in counts.items()}


def _verdict_table(args) -> bool:
    """Per noise model, truth and n: shares of `settles` / `vanishes` / `flat` / other; False
    when a decay reads `settles` in more than 2 % of runs or a floor reads `vanishes` at all."""
    x = fit_positions(args.t_min, args.tokens).astype(np.float64)
    print(f"verdicts, {args.reps} runs per cell, one set of n pairs each, draws {VERDICT_DRAWS}; "
          "cells: settles / vanishes / flat / cannot tell")  # fmt: skip
    ok, start = True, time.perf_counter()
    print(f"{'noise':<11} {'truth':<16} {'rate':>6} {'floor':>5} "
          + " ".join(f"n={n:<22}" for n in args.units))  # fmt: skip
    for kind in NOISE_MODELS:
        for i, (law, rate, floor) in enumerate(verdict_cells(args.quick)):
            cells = []
            for n in args.units:
                sh = verdict_shares(kind, law, rate, floor, n, args.reps,
                                    args.seed + 1000 * i + n, x)  # fmt: skip
                got = [sh.get(v, 0.0) for v in ("settles", "vanishes", "flat", "cannot tell")]
                ok &= not (law == L.LAW_ZERO and got[0] > 0.02)
                ok &= not (law in L.FLOORED and got[1] > 0)
                cells.append(" / ".join(f"{g:.2f}" for g in got))
            print(f"{kind:<11} {law:<16} {rate:>6.3f} {floor:>5.2f} "
                  + " ".join(f"{c:<24}" for c in cells))  # fmt: skip
    print(
        f"decays settle <= 2 % and floors never vanish: {'yes' if ok else 'NO'}; "
        f"{time.perf_counter() - start:.0f} s"
    )
    return ok


def run_false_settles(sets: list[CurveSet], draws: int, level: float) -> int:
    """How many sets of one whole run read `settles`, through law_rows' own steps: the choice
    and its test for every set, Holm over the run, then the bootstrap and verdict only of the
    sets that can still read `settles` (a chosen floored law with law_p_holm < 1 - level: no
    other set can, whatever its bootstrap gives; test_laws checks it against law_rows)."""
    choices = [set_choice(s) for s in sets]
    count = 0
    for s, c, p in zip(sets, choices, run_holm(choices), strict=True):
        if c.chosen not in L.FLOORED or not p < 1 - level:
            continue
        rows, _ = set_rows(s, c, draws, level)
        for r in rows:
            r["law_p_holm"] = p
        row = next(r for r in rows if r["chosen"])
        count += verdict(row, close_floored(rows, c.per_unit), 1 - level)[0] == "settles"
    return count


def _table(args, noise) -> None:
    """Per cell: the share choosing the true law, [the share choosing a floored law], and with
    --verdicts the share with a decided, wrong verdict."""
    chooser = ", tail only" if args.tail_only else ""
    print(f"noise: point sd {noise[0]}, rho {noise[1]}, unit sd {noise[2]}; "
          f"t in [{args.t_min}, {args.tokens}]; {args.reps} runs, seed {args.seed}{chooser}; "
          "cells: share choosing the true law [share choosing a floored law]"
          + (" / share with a decided, wrong verdict" if args.verdicts else ""))  # fmt: skip
    print(f"{'truth':<16} {'rate':>6} {'floor':>6} " + " ".join(f"n={n:<14}" for n in args.units))
    x = fit_positions(args.t_min, args.tokens).astype(np.float64)
    start, worst, worst_wrong = time.perf_counter(), 1.0, 0.0
    for i, (law, rate, floor) in enumerate(grid_cells(args.quick)):
        cells = []
        for n in args.units:
            share, floored, wrong = recovery(law, rate, floor, n, args.reps,
                                             args.seed + 1000 * i + n, noise, x,
                                             args.verdicts and n >= 3, args.tail_only)  # fmt: skip
            worst = min(worst, share)
            worst_wrong = max(worst_wrong, wrong) if wrong == wrong else worst_wrong
            cells.append(f"{share:.2f} [{floored:.2f}]"
                         + (f" / {wrong:.2f}" if wrong == wrong else ""))  # fmt: skip
        print(f"{law:<16} {rate:>6.3f} {floor:>6.2f} " + " ".join(f"{c:<16}" for c in cells))
    print(f"worst recovery {worst:.2f} (goal >= 0.90); worst wrong-verdict share "
          f"{worst_wrong:.2f}; {time.perf_counter() - start:.0f} s")  # fmt: skip


def _bounds(args, noise) -> None:
    print(f"floored truths against the nearest power law to zero, t in [{args.t_min}, "
          f"{args.tokens}]: the most any chooser recovers while reading that decay as a decay in "
          "90 % of its runs; the nearest decay of any exponent / of an exponent in [0.3, 1] "
          "(the goal: every decay read as a decay, whatever its exponent)")  # fmt: skip
    print(f"{'truth':<16} {'rate':>6} {'floor':>6} " + " ".join(f"n={n:<11}" for n in args.units))
    x = fit_positions(args.t_min, args.tokens).astype(np.float64)
    for law, rate, floor in grid_cells(args.quick):
        if law in L.FLOORED:
            cells = [(bound(law, rate, floor, n, noise, x)[1],
                      bound(law, rate, floor, n, noise, x, exponents=(0.3, 1.0))[1])
                     for n in args.units]  # fmt: skip
            print(f"{law:<16} {rate:>6.3f} {floor:>6.2f} "
                  + " ".join(f"{a:4.2f} / {b:4.2f}  " for a, b in cells))  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=100)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--seed", type=int, default=0, help="added to every cell's seed")
    parser.add_argument("--units", type=int, nargs="+", default=list(UNITS))
    parser.add_argument("--measure", type=Path, help="print the noise of a run folder's curves")
    parser.add_argument("--bound", action="store_true", help="the best recovery any chooser has")
    parser.add_argument("--point-sd", type=float, default=POINT_SD)
    parser.add_argument("--rho", type=float, default=RHO)
    parser.add_argument("--unit-sd", type=float, default=UNIT_SD)
    parser.add_argument("--tokens", type=int, default=T, help="curve length T")
    parser.add_argument("--t-min", type=int, default=T_MIN, help="first position fitted")
    parser.add_argument("--tail-only", action="store_true", help="the chooser before (tail)")
    parser.add_argument("--verdicts", action="store_true", help="count wrong decided verdicts")
    parser.add_argument(
        "--noise-models",
        action="store_true",
        help="verdict shares under the four noise models (exit 1: goal missed)",
    )
    parser.add_argument(
        "--runs",
        type=int,
        default=0,
        help="whole runs of --sets sets of mixed truths (bench/_law_runs.py): exit "
        "1 when the share with a false decided verdict exceeds the family level",
    )
    parser.add_argument("--sets", type=int, default=300, help="curve sets per whole run")
    args = parser.parse_args()
    print(cpu_description())
    if args.tail_only and args.verdicts:
        parser.error("--verdicts reads laws.csv's rows, which --tail-only does not change")
    if args.measure:
        for curve, (sd, rho, unit) in measure(args.measure).items():
            print(f"{curve}: point sd {sd:.3f}  rho {rho:.2f}  unit sd {unit:.3f}")
        return
    if args.runs:
        from _law_runs import mixed_runs

        raise SystemExit(0 if mixed_runs(args, VERDICT_DRAWS) else 1)
    if args.noise_models:
        raise SystemExit(0 if _verdict_table(args) else 1)
    noise = (args.point_sd, args.rho, args.unit_sd)
    (_bounds if args.bound else _table)(args, noise)


if __name__ == "__main__":
    main()
