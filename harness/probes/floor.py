"""A reduced-precision probe's rounding floor, measured on the pair itself.

The pair's first FLOOR_SPAN continuation positions are recomputed by a float32 copy of the
model (the reference numerics); per hidden-state index the floor is the FLOOR_QUANTILE of
|rel_l2(dtype) - rel_l2(float32)| over those positions, and the same for the next-token KL and
delta_logp: the error the dtype adds to the very curves the fits read. Rounding in bf16 is
relative to the values (~2^-8 per stored activation), so the absolute error of a divergence
settles to a level that does not shrink with t while the divergence does: past the span the
floor is taken as that level (docs/performance.md, "GPU precision", shows it per layer).
`harness.probes.precision` masks the positions within FLOOR_MULTIPLE x the floor.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from harness.probes.divergence import PairDivergence, pair_divergence

FLOOR_SPAN = 256  # continuation positions recomputed in float32
FLOOR_QUANTILE = 0.9


def measure_floor(
    result: PairDivergence,
    reference: Any,
    ids_a: list[int],
    ids_b: list[int],
    continuation: list[int],
    layers: Sequence[int] | None,
    lam: float | None = None,
) -> dict[str, np.ndarray]:
    """The floor arrays (`precision.FLOOR_KEYS`) of `result`, the pair's curves in a reduced
    dtype, against `reference` (the float32 model) over the first FLOOR_SPAN positions."""
    span = min(FLOOR_SPAN, len(continuation))
    ref = pair_divergence(reference, ids_a, ids_b, continuation[:span], layers, None, lam)

    def floor(low: np.ndarray, exact: np.ndarray) -> np.ndarray:
        return np.quantile(np.abs(low[..., :span] - exact), FLOOR_QUANTILE, axis=-1)

    return {
        "floor_rel_l2": floor(result.rel_l2, ref.rel_l2),
        "floor_kl": floor(result.kl, ref.kl),
        "floor_delta_logp": floor(result.delta_logp, ref.delta_logp),
    }
