"""Simulated windows.csv rows for the coverage benches (bench/coverage.py, bench/corrected.py):
known verdicts put through the harness's own estimators, as a run's windows would be.

Processes of (reps, n, WINDOWS) verdicts (`flat`), by how a sample's windows hang together:
`sticky` (a sample complies in every window or in none, as the embedded model does),
`markov 0.7` (a window keeps the previous window's draw with probability 0.7, else draws
afresh), `independent` windows, `mixed` (each sample sticky or independent, a coin flip: its
AUC is 0/1 or fractional) and `early stop` (independent windows, each sample stopping after
2..8 of them, uniformly: ragged samples). `breaks`: a sample complies until a window it
breaks at (hazard h per window) and fails from then on, the survival the half-life and median
read; `fades`: independent windows passing with probability p0 d^w at window w.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

WINDOWS, TOKENS = 8, 64  # windows per sample, tokens per window
PERSISTENCE = {"sticky": 1.0, "markov 0.7": 0.7, "independent": 0.0}
FLAT = (*PERSISTENCE, "mixed", "early stop")


def window_rows(
    passes: np.ndarray, policy: str = "none", check_per_run: bool = False, keep=None
) -> pd.DataFrame:
    """windows.csv rows of (reps, n, WINDOWS) verdicts: run r is item r<index>; its check is
    `c`, or c<index> with `check_per_run` (a check's measured error rates are keyed by its id).
    keep: (reps, n, WINDOWS) bool, the windows a sample has (None: all)."""
    r, s, w = (a.ravel() for a in np.meshgrid(*map(np.arange, passes.shape), indexing="ij"))
    frame = pd.DataFrame(
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
    return frame if keep is None else frame[np.asarray(keep).ravel()].reset_index(drop=True)


def uniforms(rho: float, reps: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """(reps, n, WINDOWS) uniforms; window w keeps window w-1's with probability rho."""
    u = rng.random((reps, n, WINDOWS))
    keep = rng.random((reps, n, WINDOWS)) < rho
    for w in range(1, WINDOWS):
        u[:, :, w] = np.where(keep[:, :, w], u[:, :, w - 1], u[:, :, w])
    return u


def flat(process: str, reps: int, n: int, rng: np.random.Generator):
    """(uniforms (reps, n, WINDOWS), keep mask or None) of a flat process: window passes are
    u < p for any p, so two policies at p and p - gap share their draws (seed pairing)."""
    if process in PERSISTENCE:
        return uniforms(PERSISTENCE[process], reps, n, rng), None
    u = uniforms(0.0, reps, n, rng)
    if process == "mixed":
        sticky = rng.random((reps, n, 1)) < 0.5
        return np.where(sticky, u[:, :, :1], u), None
    if process == "early stop":
        stop = rng.integers(2, WINDOWS + 1, size=(reps, n, 1))
        return u, np.arange(WINDOWS)[None, None, :] < stop
    raise ValueError(f"unknown process {process!r}")


def break_windows(u: np.ndarray, hazard: float) -> np.ndarray:
    """(reps, n) uniforms -> the window each sample breaks at (geometric, WINDOWS+: never)."""
    return np.floor(np.log(u) / np.log1p(-hazard)).astype(int)


def breaks(u: np.ndarray, hazard: float) -> np.ndarray:
    """(reps, n) uniforms -> (reps, n, WINDOWS) verdicts: pass before the break window."""
    return np.arange(WINDOWS)[None, None, :] < break_windows(u, hazard)[:, :, None]


def fade_rates(p0: float, decay: float) -> np.ndarray:
    """(WINDOWS,) pass probability of window w under `fades`."""
    return p0 * decay ** np.arange(WINDOWS)
