"""Simulated windows.csv rows for the coverage benches (bench/coverage.py, bench/corrected.py):
known verdicts put through the harness's own estimators, as a run's windows would be."""

from __future__ import annotations

import numpy as np
import pandas as pd

WINDOWS, TOKENS = 8, 64  # windows per sample, tokens per window


def window_rows(passes: np.ndarray, policy: str = "none", check_per_run: bool = False):
    """windows.csv rows of (reps, n, WINDOWS) verdicts: run r is item r<index>; its check is
    `c`, or c<index> with `check_per_run` (a check's measured error rates are keyed by its id)."""
    r, s, w = (a.ravel() for a in np.meshgrid(*map(np.arange, passes.shape), indexing="ij"))
    return pd.DataFrame(
        {
            "run_id": "sim",
            "model": "m",
            "task": "t",
            "item": [f"r{i:05d}" for i in r],
            "policy": policy,
            "seed": s,
            "sample": s,
            "window": w,
            "t_start": w * TOKENS,
            "t_end": w * TOKENS + TOKENS - 1,
            "t_gen_start": w * TOKENS,
            "check": [f"c{i:05d}" for i in r] if check_per_run else "c",
            "scope": "window",
            "value": passes.ravel().astype(float),
            "passed": passes.ravel(),
            "reason": "",
        }  # fmt: skip
    )
