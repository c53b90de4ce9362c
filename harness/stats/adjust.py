"""Multiple-testing adjustment of p-values, shared by the laws (laws.csv's `law_p`), the
cross-condition correlations and the coverage bench."""

from __future__ import annotations

import numpy as np


def holm(p: np.ndarray) -> np.ndarray:
    """Holm's step-down adjusted p-values (NaN entries are not tests and stay NaN)."""
    p = np.asarray(p, dtype=np.float64)
    out = np.full_like(p, np.nan)
    idx = np.flatnonzero(np.isfinite(p))
    m = len(idx)
    if not m:
        return out
    order = idx[np.argsort(p[idx], kind="stable")]
    adjusted = np.maximum.accumulate(np.minimum((m - np.arange(m)) * p[order], 1.0))
    out[order] = adjusted
    return out
