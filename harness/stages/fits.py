"""alpha fits of the pipeline's probe curves: per pair and pooled per condition.

Pooled fits stack the condition's pairs over their common length (the shortest continuation),
so the bootstrap over pairs sees aligned curves.
"""

from __future__ import annotations

import numpy as np

from harness.records import GenerationRecord
from harness.stages.probe import METRICS

KL_LAYER = -1  # fits.csv rows of the next-token KL carry layer -1


def _curve_sets(arrays: dict) -> list[tuple[int, str, np.ndarray]]:
    """(layer, metric, (T,) curve) for every layer x metric, plus the KL curve."""
    out = [
        (layer, metric, arrays[metric][row].astype(np.float64))
        for row, layer in enumerate(arrays["layers"].tolist())
        for metric in METRICS
    ]
    out.append((KL_LAYER, "kl", arrays["kl"].astype(np.float64)))
    return out


def _row(model, item, policy, pair, layer, metric, fit) -> dict:
    return {
        "model": model,
        "item": item,
        "policy": policy,
        "pair": pair,
        "layer": layer,
        "metric": metric,
        **fit.model_dump(include={"alpha", "ci_low", "ci_high", "r2", "t_min", "t_max", "reason"}),
    }


def fit_rows(
    curves: dict[tuple[str, str], dict],
    records: list[GenerationRecord],
    t_min: int,
    n_boot_pair: int = 200,
    n_boot_pooled: int = 1000,
) -> list[dict]:
    from harness.analysis.powerlaw import fit_alpha

    by_key = {r.key: r for r in records}
    conditions: dict[tuple[str, str, str], list[tuple[GenerationRecord, dict]]] = {}
    for (model, rkey), arrays in sorted(curves.items()):
        record = by_key[rkey]
        conditions.setdefault((model, record.item, record.policy), []).append((record, arrays))
    rows = []
    for (model, item, policy), members in sorted(conditions.items()):
        members.sort(key=lambda m: m[0].sample)
        common = min(a["kl"].shape[0] for _, a in members)
        stacks: dict[tuple[int, str], list[np.ndarray]] = {}
        for record, arrays in members:
            pair = f"{item}/{policy}/{record.sample}"
            for layer, metric, curve in _curve_sets(arrays):
                t = np.arange(1, curve.shape[0] + 1)
                fit = fit_alpha(t, curve, t_min=t_min, n_boot=n_boot_pair, seed=record.sample)
                rows.append(_row(model, item, policy, pair, layer, metric, fit))
                stacks.setdefault((layer, metric), []).append(curve[:common])
        t = np.arange(1, common + 1)
        for (layer, metric), stack in stacks.items():
            fit = fit_alpha(t, np.vstack(stack), t_min=t_min, n_boot=n_boot_pooled, seed=0)
            rows.append(_row(model, item, policy, "all", layer, metric, fit))
    return rows
