"""Sequential Monte-Carlo p-values (Besag and Clifford 1991), for the laws' bootstrap tests.

A bootstrap test draws datasets under its null and counts the draws whose statistic reaches the
observed one. Most sets are far from significance and need a few hundred draws; a set whose p
must pass Holm over a run of m sets needs ~2 m / alpha. The sequential rule stops once HITS
draws have reached the observed statistic (p = HITS / draws), else at `max_draws` (p = (hits +
1) / (draws + 1), valid at any number of draws), so the cost goes where the decision needs it.
Draws come in blocks, each FIRST_BLOCK x 4^k, so a block's fits run as one array operation.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

HITS = 10  # stop once this many draws reach the observed statistic
FIRST_BLOCK = 200  # draws of the first block; each later block 4x the one before


def sequential_p(
    observed: float, draw: Callable[[int], np.ndarray], max_draws: int
) -> tuple[float, int]:
    """(p-value, draws counted: up to the HITS-th that reached it) that a null statistic
    reaches `observed`: `draw(b)` returns b statistics drawn under the null (NaN or -inf: a
    draw that reaches nothing)."""
    tol = 1e-9 * max(abs(observed), 1.0)
    used = hits = 0
    block = FIRST_BLOCK
    while used < max_draws:
        b = min(block, max_draws - used)
        with np.errstate(invalid="ignore"):
            reached = np.cumsum(np.asarray(draw(b)) >= observed - tol) + hits
        if reached[-1] >= HITS:
            stop = used + int(np.argmax(reached >= HITS)) + 1
            return HITS / stop, stop
        hits, used, block = int(reached[-1]), used + b, block * 4
    return (hits + 1) / (used + 1), used
