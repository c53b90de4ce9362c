"""samples_needed against simulated decisions: how far the gates' "about N samples would decide
it" is from the n at which more sampling actually decides.

    .venv/bin/python bench/samples_needed.py [--paths 400] [--fraction-paths 24] [--seed 0]

The grid (issue 32): every k of n passes, n = 4, 8, 16, 32, 64, against the bounds 0.5, 0.8 and
0.9 of a `min` gate at 95 %; a cell counts where the gate is undecided at n. For each cell the
projection is `harness.stats.sided.samples_to_decide` (at the mean k/n, order-neutral), and
the truth is what sampling on at a true rate of k/n does, the first n samples being the cell's:

- fixed n: a design of N samples decides when its one-sided Clopper-Pearson bound clears the
  bound; its decision n is the smallest N at which it decides with probability >= 1/2 (exact:
  the passes among the N - n new samples are binomial, no simulation);
- sequential, binary type: the one-sided beta-binomial confidence sequence looked at after
  every sample; its decision n is the median over --paths seeded paths of the first n at which
  it decides;
- sequential, fraction type (an `auc` / `final` gate: `beta-binomial-cs+betting-cs`, projected
  with `intersected`): the gate's real decision, `one_sided_bounds(..., anytime=True)` as the
  summary's auc_lcb / auc_ucb, on the cell's n values (k passes spread evenly) then
  Bernoulli(k/n) draws, --fraction-paths paths; a cell counts where those bounds on its n
  values are undecided. Its decision n is the smallest N by which half the paths decide, read
  against the projection at two N only (the bounds are running extremes, so a path decided by N is
  decided at N), see fraction_verdict; cells that miss are printed ("early": half the paths
  decide before projection / 1.5, "late": fewer than half by 1.5 x projection). --fractional
  also runs it on Beta-distributed values (fraction_cells; printed, not gated: the projection
  takes values as 0/1-like, so on fractional values it is known to be late).

A cell agrees when the projection is within a factor of 1.5 of the decision n (both beyond
1024, the gates' MAX_SAMPLES, agree too). Cells with k/n on the bound are left out (no n
decides them; the projection says so). Goal: >= 90 % of the cells agree, in each design and
type (exit 1 otherwise).
"""

from __future__ import annotations

import argparse
import math

import numpy as np
from scipy import stats

from harness.stats.sided import log_evalue_above, one_sided_bounds, samples_to_decide

NS = (4, 8, 16, 32, 64)
BOUNDS = (0.5, 0.8, 0.9)
LEVEL = 0.95
LARGEST = 1024  # harness.analysis.gates.MAX_SAMPLES
FACTOR = 1.5
BETA_C = 20  # the fractional values' Beta concentration


def thresholds(
    bound: float, anytime: bool, largest: int, alpha: float = 1 - LEVEL
) -> tuple[np.ndarray, np.ndarray]:
    """(k_pass, k_fail) per t = 0..largest: at t samples the one-sided bound decides a pass
    when the passes are >= k_pass[t], a fail when they are <= k_fail[t] (-1: never)."""
    k_pass, k_fail = np.full(largest + 1, largest + 2), np.full(largest + 1, -1)
    for t in range(1, largest + 1):
        k = np.arange(t + 1, dtype=float)
        if anytime:
            up = log_evalue_above(k, t, bound) >= math.log(1 / alpha)
            down = log_evalue_above(t - k, t, 1 - bound) >= math.log(1 / alpha)
        else:  # one-sided Clopper-Pearson: lcb >= bound, ucb < bound
            up = stats.binom.sf(k - 1, t, bound) <= alpha
            down = stats.binom.cdf(k, t, bound) < alpha
        if up.any():
            k_pass[t] = int(np.nonzero(up)[0][0])
        if down.any():
            k_fail[t] = int(np.nonzero(down)[0][-1])
    return k_pass, k_fail


def fixed_decision(k: int, n: int, cuts, p: float | None = None) -> int | None:
    """Smallest N > n at which N samples decide with probability >= 1/2 (exact); the new
    samples pass at the true rate p (default: the observed k / n, the projection's assumption)."""
    k_pass, k_fail = cuts
    p = k / n if p is None else p
    for big in range(n + 1, LARGEST + 1):
        new = big - n
        decided = stats.binom.sf(k_pass[big] - k - 1, new, p) + stats.binom.cdf(
            k_fail[big] - k, new, p
        )
        if decided >= 0.5:
            return big
    return None


def sequential_decision(k: int, n: int, cuts, paths: int, rng) -> int | None:
    """Median over paths of the first t > n at which the sequence decides (None: beyond)."""
    k_pass, k_fail = cuts
    draws = rng.random((paths, LARGEST - n)) < k / n
    passes = k + np.cumsum(draws, axis=1)
    t = np.arange(n + 1, LARGEST + 1)
    decided = (passes >= k_pass[t]) | (passes <= k_fail[t])
    first = np.where(decided.any(axis=1), t[decided.argmax(axis=1)], LARGEST + 1)
    median = float(np.median(first))
    return None if median > LARGEST else int(median)


def agrees(projected: int | None, truth: int | None) -> bool:
    if projected is None or truth is None:
        other = truth if projected is None else projected
        return other is None or other * FACTOR >= LARGEST
    return max(projected, truth) <= FACTOR * min(projected, truth)


def undecided_at(k: int, n: int, cuts) -> bool:
    k_pass, k_fail = cuts
    return k_fail[n] < k < k_pass[n]


def spread(k: int, n: int) -> np.ndarray:
    """The cell's first n values: k passes spread evenly (no run of passes first)."""
    x = np.zeros(n)
    x[(np.arange(k) * n) // max(k, 1)] = 1.0
    return x


def decided(x: np.ndarray, bound: float) -> bool:
    """The gate's decision on these values in sampling order: `auc_lcb` / `auc_ucb` as
    harness.scoring.adherence writes them (one_sided_bounds, anytime, the fraction type), read
    as analysis.gates does (lcb >= min: pass; ucb < min: fail)."""
    bounds = one_sided_bounds(x, level=LEVEL, anytime=True, value_type="fraction")
    return bool(bounds.lcb >= bound or bounds.ucb < bound)


def share_decided(first: np.ndarray, draws: np.ndarray, big: int, bound: float) -> float:
    """The share of paths (the cell's values, then each row of draws) decided by `big` samples:
    the real bounds at `big` (running extremes: decided at some look <= big is decided at big)."""
    rows = draws[:, : big - len(first)]
    return float(np.mean([decided(np.concatenate([first, row]), bound) for row in rows]))


def fraction_verdict(first: np.ndarray, bound: float, projected, cuts, draw) -> str:
    """ "agrees", "early" or "late": where the fraction type's decision n (the smallest N by
    which >= half the paths decide) lies against `projected` / FACTOR and FACTOR x projected,
    each path the cell's values `first`, then `draw(m)` (paths x m new values). "early": half
    the paths decide by the largest N below projected / FACTOR; "late": fewer than half by
    FACTOR x projected. The late side is answered first by the beta-binomial part at alpha/2
    (`cuts`, the same e-process; the sum reaching an integer cut suffices, log E increasing in
    it) where it can: the real bound is the tighter of its two parts, so it decides no later
    than that part."""
    n = len(first)
    low = math.ceil((projected or LARGEST * FACTOR) / FACTOR) - 1
    high = min(math.floor(FACTOR * projected), LARGEST) if projected else LARGEST
    draws = draw(max(high, low) - n)
    if low > n and share_decided(first, draws, low, bound) >= 0.5:
        return "early"
    if projected is None or FACTOR * projected >= LARGEST:
        return "agrees"  # both beyond LARGEST / FACTOR agree (see agrees)
    k_pass, k_fail = cuts
    t = np.arange(n + 1, high + 1)
    walk = first.sum() + np.cumsum(draws[:, : high - n], axis=1)
    if ((walk >= k_pass[t]) | (walk <= k_fail[t])).any(axis=1).mean() >= 0.5:
        return "agrees"
    return "agrees" if share_decided(first, draws, high, bound) >= 0.5 else "late"


def fraction_cells(fractional: bool, paths: int, rng):
    """(bound, first values, draw) per cell: k of n passes spread evenly then Bernoulli(k/n)
    (0/1 values); or, fractional, n = 8, 32 values of Beta(mu C, (1 - mu) C), C = 20 (sd 0.07
    at mu 0.9: per-sample AUCs), mu = 0.55..0.95, and further draws of the same law."""
    for bound in BOUNDS:
        for n in NS if not fractional else (8, 32):
            if not fractional:
                for k in range(n + 1):
                    p = k / n
                    yield bound, spread(k, n), lambda m, p=p: (rng.random((paths, m)) < p) * 1.0
                continue
            for mu in np.arange(0.55, 0.96, 0.05):
                a, b = mu * BETA_C, (1 - mu) * BETA_C
                yield bound, rng.beta(a, b, n), lambda m, a=a, b=b: rng.beta(a, b, (paths, m))


def check_fraction(paths: int, rng, fractional: bool = False) -> bool:
    """The fraction-type projection (samples_to_decide intersected, at the values' mean)
    against the gate's real sequential decision: the share of undecided cells that agree."""
    verdicts: list[str] = []
    cuts: dict[float, tuple] = {}  # the beta-binomial part's, per bound
    for bound, first, draw in fraction_cells(fractional, paths, rng):
        n, mean = len(first), float(first.mean())
        if math.isclose(mean, bound) or decided(first, bound):
            continue
        if bound not in cuts:
            cuts[bound] = thresholds(bound, True, LARGEST, alpha=(1 - LEVEL) / 2)
        projected = samples_to_decide(
            mean, n, bound=bound, level=LEVEL, anytime=True, intersected=True, max_n=LARGEST
        )
        assert projected is None or projected > n, (mean, n, bound, projected)
        verdicts.append(fraction_verdict(first, bound, projected, cuts[bound], draw))
        if verdicts[-1] != "agrees":
            print(f"  mean {mean:.3f} n {n} bound {bound}: projected {projected}, {verdicts[-1]}")
    good, cells = verdicts.count("agrees"), len(verdicts)
    share = good / cells
    print(
        f"sequential, fraction type ({'Beta' if fractional else '0/1'} values, {paths} paths): "
        f"{good} of {cells} undecided cells ({share:.1%}) within {FACTOR}x of the decision n; "
        f"too early {verdicts.count('early')}, too late {verdicts.count('late')}"
    )
    return share >= 0.9


OFFSETS = (-0.1, -0.05, 0.05, 0.1)  # true rate minus the observed one


def truth_differs() -> None:
    """The fixed-n projection (it assumes the observed mean stays) against the decision n when
    the true rate is the observed one plus each offset: the share within FACTOR x. Printed,
    not gated: no projection from n samples can know the truth."""
    for offset in OFFSETS:
        cells = good = 0
        for bound in BOUNDS:
            cuts = thresholds(bound, False, LARGEST)
            for n in NS:
                for k in range(n + 1):
                    p = k / n + offset
                    if math.isclose(k / n, bound) or not undecided_at(k, n, cuts):
                        continue
                    if not 0 < p < 1 or math.isclose(p, bound):
                        continue
                    projected = samples_to_decide(
                        k / n, n, bound=bound, level=LEVEL, anytime=False, max_n=LARGEST
                    )
                    cells += 1
                    good += agrees(projected, fixed_decision(k, n, cuts, p))
        print(f"fixed n, true rate = observed {offset:+.2f}: {good} of {cells} undecided cells "
              f"({good / cells:.1%}) within {FACTOR}x of the decision n")  # fmt: skip


SEQUENTIAL = {"min": 4, "max": 157}  # bench/sequential.py's shipped `samples: {min, max}`


def gsd_decision(test, look: int, k: int, p: float) -> int | None:
    """The look by which the group-sequential test, undecided with k passes at look index
    `look`, has decided with probability >= 1/2 when the true rate is p (exact: the law of the
    count carried over the later looks, decided paths taken out); None: not by its last."""
    from scipy.stats import binom

    open_ = np.zeros(test.looks[look] + 1)
    open_[k], decided, before = 1.0, 0.0, test.looks[look]
    for n, (up, down) in zip(test.looks[look + 1 :], test.boundaries[look + 1 :], strict=True):
        open_ = np.convolve(open_, binom.pmf(np.arange(n - before + 1), n - before, p))
        decided += open_[up | down].sum()
        open_, before = np.where(up | down, 0.0, open_), n
        if decided >= 0.5:
            return n
    return None


def sequential_truth_differs() -> None:
    """The shipped sequential rule's projection (gates.csv's samples_needed of a sequential
    run: the first later look at which the observed rate, if it stays, decides) against the
    look by which the test decides with probability >= 1/2 at the true rate, the observed one
    plus each offset (0: the arithmetic alone). Printed, not gated."""
    from harness.analysis.gate_sequential import sequential_check
    from harness.config.gate_specs import GateSpec
    from harness.config.sampling import SampleRange, schedule
    from harness.stats.group_sequential import gate_design

    looks = tuple(schedule(SampleRange(**SEQUENTIAL)))
    for offset in (0.0, *OFFSETS):
        cells = good = 0
        for bound in BOUNDS:
            gate = GateSpec(metric="auc", policy="none", min=bound)
            test = gate_design(looks, bound, 1 - LEVEL)
            for look, n in enumerate(looks[:-1]):
                for k in range(n + 1):
                    p = k / n + offset
                    row = {"auc": k / n, "auc_n": n, "auc_passes": k}
                    verdict, _, needed = sequential_check(gate, row, looks, LEVEL)
                    if verdict != "undecided" or not 0 < p < 1 or math.isclose(p, bound):
                        continue
                    if math.isclose(k / n, bound):
                        continue
                    truth = gsd_decision(test, look, k, p)
                    projected = None if math.isnan(needed) else int(needed)
                    cells += 1
                    good += (projected is None and truth is None) or (
                        None not in (projected, truth)
                        and max(projected, truth) <= FACTOR * min(projected, truth)
                    )
        print(f"sequential ({SEQUENTIAL}, group-sequential), true rate = observed {offset:+.2f}: "
              f"{good} of {cells} undecided cells ({good / cells:.1%}) within {FACTOR}x of the "
              "decision look (both beyond the last: agree)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--paths", type=int, default=400, help="sequential paths per cell")
    parser.add_argument(
        "--fraction-paths", type=int, default=24,
        help="paths per cell of the fraction type (each look is the real bounds: slow)",
    )  # fmt: skip
    parser.add_argument(
        "--fractional", action="store_true",
        help="also the fraction type on Beta-distributed values (printed, not gated: the "
        "projection takes values as 0/1-like)",
    )  # fmt: skip
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--truth-differs", action="store_true",
        help="only: the fixed-n and the sequential projection when the true rate is not the "
        "observed one",
    )  # fmt: skip
    args = parser.parse_args()
    if args.truth_differs:
        truth_differs()
        sequential_truth_differs()
        return
    rng = np.random.default_rng(args.seed)
    failed = False
    for anytime in (False, True):
        design = "sequential, binary type" if anytime else "fixed n"
        cells, good, ratios = 0, 0, []
        for bound in BOUNDS:
            cuts = thresholds(bound, anytime, LARGEST)
            for n in NS:
                for k in range(n + 1):
                    if math.isclose(k / n, bound) or not undecided_at(k, n, cuts):
                        continue
                    projected = samples_to_decide(
                        k / n, n, bound=bound, level=LEVEL, anytime=anytime, max_n=LARGEST
                    )
                    truth = (
                        sequential_decision(k, n, cuts, args.paths, rng)
                        if anytime
                        else fixed_decision(k, n, cuts)
                    )
                    assert projected is None or projected > n, (k, n, bound, projected)
                    cells += 1
                    good += agrees(projected, truth)
                    if projected and truth:
                        ratios.append(projected / truth)
        share = good / cells
        failed |= share < 0.9
        print(
            f"{design}: {good} of {cells} undecided cells ({share:.1%}) within {FACTOR}x of "
            f"the decision n; projected / decision n: median {np.median(ratios):.2f}, "
            f"range {min(ratios):.2f}-{max(ratios):.2f}"
        )
    failed |= not check_fraction(args.fraction_paths, rng)
    if args.fractional:
        check_fraction(args.fraction_paths, rng, fractional=True)
    raise SystemExit(1 if failed else 0)


if __name__ == "__main__":
    main()
