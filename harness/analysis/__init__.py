"""Analysis: power-law fits of divergence curves (alpha, CI, local exponent, reference curves),
the exactly solvable linear relay model, and the run-level tables over pandas frames: per
condition summary, alpha <-> behaviour correlation, early-warning predictor, policy comparison.
"""

from harness.analysis.powerlaw import (
    FitResult,
    fit_alpha,
    fit_positions,
    local_exponent,
    reference_curves,
)
from harness.analysis.relay import RelayResult, relay_deltas, solve_relay, sweep_alpha

# The table builders import pandas/scikit-learn: loaded on first use so that importing
# harness.analysis (e.g. for fit_alpha) stays light.
_LAZY = {
    "summarise_conditions": "summary",
    "token_frame": "summary",
    "default_layers": "summary",
    "correlate_alpha_behaviour": "correlation",
    "window_features": "predictor",
    "predict_violations": "predictor",
    "compare_policies": "policies",
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"harness.analysis.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'harness.analysis' has no attribute {name!r}")


__all__ = [
    "FitResult",
    "RelayResult",
    "compare_policies",
    "correlate_alpha_behaviour",
    "default_layers",
    "predict_violations",
    "summarise_conditions",
    "token_frame",
    "window_features",
    "fit_alpha",
    "fit_positions",
    "local_exponent",
    "reference_curves",
    "relay_deltas",
    "solve_relay",
    "sweep_alpha",
]
