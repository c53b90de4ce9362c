"""A group-sequential one-sided test of a 0/1 rate against a gate's bound, exact at its
planned looks: what a sequential run (`samples: {min, max}`, `harness run --until-decided`)
decides its `auc` and `final` gates with at the looks of `harness.config.sampling.schedule`
(harness.analysis.gate_sequential), and what bench/sequential.py measures.

At each planned look n_k the count S_k of successes is compared with the one-sided
Clopper-Pearson bounds at a nominal level: pass once lcb >= bound, fail once ucb < bound, else
sample on to the next look; undecided at the last. Looking K times at a fixed-n bound inflates
its error, so the nominal alpha is calibrated, per side, by the exact distribution of the
stopped binomial path at p = bound (a recursion over the looks, no Monte-Carlo): the largest
nominal alpha (bisection) whose probability of ever crossing that side is <= the stated alpha.
P(pass) rises with p (a coupling of paths: a path of a higher rate lies above at every look),
so the error of a pass at any p < bound is at most its value at the bound, and likewise for a
fail at p >= bound: each side errs with probability <= alpha at every true rate. The guarantee
holds only at the planned looks and only for 0/1 values (a fraction-valued metric needs the
confidence sequence; the runner rounds each fractional value to 0/1 by a seeded coin,
`binary_count`, which keeps the test exact).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cached_property, lru_cache

import numpy as np
from scipy import stats


def _crossings(n: int, bound: float, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """Over the counts 0..n: (lcb >= bound, ucb < bound), the one-sided Clopper-Pearson bounds
    at nominal alpha."""
    k = np.arange(n + 1)
    with np.errstate(invalid="ignore"):
        low = np.where(k > 0, stats.beta.ppf(alpha, np.maximum(k, 1), n - k + 1), 0.0)
        high = np.where(k < n, stats.beta.ppf(1 - alpha, k + 1, np.maximum(n - k, 1)), 1.0)
    return low >= bound, high < bound


@dataclass(frozen=True)
class Outcome:
    """Exact operating characteristics at one true rate."""

    passes: float  # P(pass)
    fails: float  # P(fail)
    samples: float  # expected samples taken (undecided paths take the last look)


@dataclass(frozen=True)
class GroupSequential:
    looks: tuple[int, ...]
    bound: float
    alpha_pass: float  # nominal one-sided alpha of the pass side (lcb >= bound)
    alpha_fail: float  # of the fail side (ucb < bound)

    @cached_property
    def boundaries(self) -> list[tuple[np.ndarray, np.ndarray]]:
        return [
            (
                _crossings(n, self.bound, self.alpha_pass)[0],
                _crossings(n, self.bound, self.alpha_fail)[1],
            )
            for n in self.looks
        ]

    def decide(self, successes: int, look: int) -> str | None:
        """'pass', 'fail' or None (sample on) at look index `look` with this count."""
        passes, fails = self.boundaries[look]
        return "pass" if passes[successes] else "fail" if fails[successes] else None

    def outcome(self, p: float) -> Outcome:
        open_ = np.array([1.0])  # P(S_k = s, still open)
        before = passes = fails = samples = 0.0
        for n, (up, down) in zip(self.looks, self.boundaries, strict=True):
            open_ = np.convolve(open_, stats.binom.pmf(np.arange(n - before + 1), n - before, p))
            up_p, down_p = open_[up].sum(), open_[down].sum()
            passes, fails = passes + up_p, fails + down_p
            samples += n * (up_p + down_p)
            open_ = np.where(up | down, 0.0, open_)
            before = n
        return Outcome(float(passes), float(fails), float(samples + before * open_.sum()))


def design(looks: list[int], bound: float, alpha: float, steps: int = 40) -> GroupSequential:
    """The group-sequential test at these looks whose pass and fail each err with probability
    <= alpha (exact, at p = bound: the worst case of either side); nominal alphas by bisection,
    the pass side first, then the fail side given it, then the pass side again given that."""
    if sorted(set(looks)) != list(looks) or looks[0] < 1:
        raise ValueError(f"looks must be increasing sample counts, got {looks}")
    a_pass = a_fail = alpha / len(looks)  # Bonferroni: valid, the start of the search

    def largest(side: str, other: float) -> float:
        lo, hi = alpha / len(looks), alpha
        for _ in range(steps):
            mid = (lo + hi) / 2
            test = GroupSequential(
                tuple(looks), bound, *((mid, other) if side == "pass" else (other, mid))
            )
            at = test.outcome(bound)
            lo, hi = (
                (mid, hi) if (at.passes if side == "pass" else at.fails) <= alpha else (lo, mid)
            )
        return lo

    for _ in range(2):
        a_pass = largest("pass", a_fail)
        a_fail = largest("fail", a_pass)
    return GroupSequential(tuple(looks), bound, a_pass, a_fail)


@lru_cache(maxsize=64)
def gate_design(looks: tuple[int, ...], bound: float, alpha: float) -> GroupSequential:
    """`design`, cached: a run evaluates the same gate's design at every look (~2 s each)."""
    return design(list(looks), bound, alpha)


def binary_count(values, key: str) -> int:
    """The number of passing samples when each value x_i in [0, 1] (in sampling order) counts
    as a pass with probability x_i, by a coin seeded with `key` and i: the i-th coin is the same
    at every look, so the counts form one sample path. A value of 0 or 1 is counted as itself;
    a fractional value's coin is a Bernoulli with the same mean, so the counts are exactly
    binomial at the condition's true mean and the test's error bounds hold for any values in
    [0, 1] (the price: the coin's variance, so a fractional metric needs more samples than its
    confidence sequence would, never fewer)."""
    count = 0
    for i, x in enumerate(values):
        digest = hashlib.blake2b(f"{key}|{i}".encode(), digest_size=8).digest()
        count += int(int.from_bytes(digest, "big") / 2**64 < float(x))
    return count
