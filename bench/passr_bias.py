"""pass^r's bias in a sequential run: exact over the stopped paths of the shipped design.

    .venv/bin/python bench/passr_bias.py [--bound 0.8] [--r 3]

The estimate C(c, r) / C(n, r) (harness.scoring.reliability.pass_power) is unbiased at a fixed
n. A sequential run (`samples: {min: 4, max: 157}`) stops a condition once its gate decides, so
n depends on the passes seen. Here the gate is `min: --bound` on the same 0/1 passes, decided by
the group-sequential design the gates stage uses (harness.stats.group_sequential.gate_design,
looks of harness.config.sampling.schedule); the mean of the estimate over every stopped path
(an exact recursion over the looks, no simulation) against p^r, per true pass rate p.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
from scipy import stats

from harness.config.sampling import SampleRange, schedule
from harness.stats.group_sequential import gate_design


def mean_estimate(p: float, r: int, looks: tuple[int, ...], test) -> float:
    """E[C(S, r) / C(n, r)] at the look where the path stops (decided, or the last look)."""
    open_, before, total = np.array([1.0]), 0, 0.0
    for i, (n, (up, down)) in enumerate(zip(looks, test.boundaries, strict=True)):
        open_ = np.convolve(open_, stats.binom.pmf(np.arange(n - before + 1), n - before, p))
        stop = (up | down) if i < len(looks) - 1 else np.ones_like(up)
        if n >= r:  # below r repeats the estimate is "cannot tell": such stops are left out
            value = np.array([math.comb(k, r) / math.comb(n, r) for k in range(n + 1)])
            total += float((open_ * stop * value).sum())
        open_ = np.where(stop, 0.0, open_)
        before = n
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bound", type=float, default=0.8)
    parser.add_argument("--r", type=int, default=3)
    parser.add_argument("--max", type=int, default=157)
    args = parser.parse_args()
    start = time.perf_counter()
    looks = tuple(schedule(SampleRange(min=4, max=args.max)))
    test = gate_design(looks, args.bound, 0.05)
    print(f"pass^{args.r}, gate min {args.bound} over looks {looks}: relative bias of the mean")
    for p in np.round(np.arange(0.3, 0.96, 0.05), 2):
        bias = mean_estimate(float(p), args.r, looks, test) / p**args.r - 1
        print(f"p = {p:.2f}: {bias:+.3f}")
    print(f"{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
