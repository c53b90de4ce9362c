"""Analysis: power-law fits of divergence curves (alpha, CI, local exponent, reference curves)
and the exactly solvable linear relay model."""

from harness.analysis.powerlaw import (
    FitResult,
    fit_alpha,
    fit_positions,
    local_exponent,
    reference_curves,
)
from harness.analysis.relay import RelayResult, relay_deltas, solve_relay, sweep_alpha

__all__ = [
    "FitResult",
    "RelayResult",
    "fit_alpha",
    "fit_positions",
    "local_exponent",
    "reference_curves",
    "relay_deltas",
    "solve_relay",
    "sweep_alpha",
]
