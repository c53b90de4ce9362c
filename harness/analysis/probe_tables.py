"""The frames of `harness probe` from its curves: divergence.csv, nexttoken.csv, attention.csv
(every t) and fits.csv (the run's fits writer), one row model each (`harness.results.probe_cli`).

A probed pair is `(model, lam, pair, curves)`: the probe model's name, the attention-bias
strength (None without --attention-bias, and then no `lam` column), the pair's name and its
`PairDivergence` (`harness.probes.divergence`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from harness.analysis.attention import uniform_share
from harness.analysis.fits import FitMember, fit_table
from harness.probes.arrays import SHARE_METRICS
from harness.probes.precision import hidden_below_floor
from harness.results.probe_cli import ProbeAttentionRow

if TYPE_CHECKING:  # annotations only: the module loads torch
    from harness.probes.divergence import PairDivergence

ProbedPair = tuple[str, "float | None", str, "PairDivergence"]


def _head(model: str, lam: float | None, pair: str, with_lam: bool) -> dict[str, Any]:
    return {"model": model, **({"lam": lam} if with_lam else {}), "pair": pair}


def divergence_frame(curves: list[ProbedPair], with_lam: bool) -> pd.DataFrame:
    """Every (model[, lam], pair, layer, t) of l2, rel_l2 and cos_dist."""
    parts = []
    for model, lam, pair, res in curves:
        n_layers, total = res.l2.shape
        head = _head(model, lam, pair, with_lam)
        parts.append(pd.DataFrame({
            **{k: [v] * (n_layers * total) for k, v in head.items()},
            "layer": np.repeat(res.layers, total),
            "t": np.tile(np.arange(1, total + 1), n_layers),
            "l2": res.l2.reshape(-1),
            "rel_l2": res.rel_l2.reshape(-1),
            "cos_dist": res.cos_dist.reshape(-1),
            "below_floor": hidden_below_floor(res.to_arrays()).reshape(-1),
        }))  # fmt: skip
    return pd.concat(parts)


def nexttoken_frame(curves: list[ProbedPair], with_lam: bool, backend: str) -> pd.DataFrame:
    """Every (model[, lam], pair, t) of delta_logp and the KL with its bounds (= kl where the
    backend computes it exactly)."""
    parts = []
    for model, lam, pair, res in curves:
        total = res.l2.shape[1]
        head = _head(model, lam, pair, with_lam)
        parts.append(pd.DataFrame({
            **{k: [v] * total for k, v in head.items()},
            "t": np.arange(1, total + 1),
            "delta_logp": res.delta_logp,
            "kl": res.kl,
            "kl_low": res.kl if res.kl_low is None else res.kl_low,
            "kl_high": res.kl if res.kl_high is None else res.kl_high,
            "backend": backend,
        }))  # fmt: skip
    return pd.concat(parts)


def attention_frame(curves: list[ProbedPair], with_lam: bool) -> pd.DataFrame:
    """Every (model[, lam], pair, layer, t) of prompt A's attention share (as the run's
    attention.csv, without item/policy/sample/turn/role); header-only without shares."""
    parts = []
    for model, lam, pair, res in curves:
        if not res.attention:
            continue
        layers = res.attention["attn_layers"]
        total = res.attention[SHARE_METRICS[0]].shape[1]
        t = np.arange(1, total + 1)
        n = len(layers) * total
        parts.append(pd.DataFrame({
            **{k: [v] * n for k, v in _head(model, lam, pair, with_lam).items()},
            "layer": np.repeat(layers, total), "t": np.tile(t, len(layers)),
            "prompt_len": res.prompt_lens[0],
            **{m: res.attention[m].reshape(-1) for m in SHARE_METRICS},
            "uniform": np.tile(uniform_share(res.prompt_lens[0], t), len(layers)),
        }))  # fmt: skip
    if parts:
        return pd.concat(parts)
    columns = ProbeAttentionRow.columns()
    return pd.DataFrame(columns=[columns[0], *(["lam"] if with_lam else []), *columns[1:]])


def probe_fits(curves: list[ProbedPair], with_lam: bool, t_min: int, n_boot: int) -> pd.DataFrame:
    """fits.csv through the run's one fits writer: alpha per (model[, lam], pair, layer,
    metric), plus a pooled pair = "all" row per (model, lam) (bootstrap over pairs, identical
    pairs left out)."""
    groups: dict[tuple[str, float | None], list[FitMember]] = {}
    for model, lam, pair, res in curves:
        groups.setdefault((model, lam), []).append(FitMember(pair, res.to_arrays()))
    table = [
        ({"model": model, **({"lam": lam} if with_lam else {})}, members)
        for (model, lam), members in groups.items()
    ]
    return fit_table(table, t_min, n_boot, n_boot)
