"""Analysis: power-law fits of divergence curves (alpha, CI, local exponent, reference curves)
and the exactly solvable relay model."""

from harness.analysis.powerlaw import (
    FitResult,
    fit_alpha,
    fit_positions,
    local_exponent,
    reference_curves,
)

__all__ = ["FitResult", "fit_alpha", "fit_positions", "local_exponent", "reference_curves"]
