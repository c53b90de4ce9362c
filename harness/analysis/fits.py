"""alpha fits of probe curves -> fits.csv: the one writer for `harness run` and `harness probe`.

A fit group is a set of pairs that belong together (a run's condition: model, item, policy;
`harness probe` fits each pair alone and pools a lam sweep's policies itself). For every group
the table holds:
- one row per (pair, layer, metric): that pair's own curve, bootstrap over log-t blocks;
- a pooled row per (layer, metric) with pair = "all" when the group has several pairs: the
  pairs stacked over their common length (the shortest curve), bootstrap over pairs.
`pool_models` adds, per model, a row pooled over every pair of every group of that model
(item = policy = pair = "all"): the report's alpha by layer reads these rows.

Metrics: l2, rel_l2 and cos_dist per hidden-state index (layer 0..L), the next-token
|delta log p| and KL at layer -1, and (hf probe) the prompt's attention share
`share_prompt_mean` per layer 1..L (`analysis/attention.py`;
a pair's own share is fitted even when its two prompts are identical, the share being the
record's own; pooled rows leave such pairs out, as for every metric). Identical prompts give
NaN with reason "identical prompts"; curves that are all zero although the prompts differ
(hidden-state index 0: the shared continuation's embeddings) give NaN with `REASON_ZERO`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from harness.analysis.attention import FIT_METRICS as SHARE_FIT_METRICS
from harness.analysis.attention import share_curves
from harness.analysis.powerlaw import REASON_IDENTICAL, fit_alpha_batch, fit_positions
from harness.probes.precision import FLOOR_MULTIPLE, MIN_KEPT_DECADES, has_floor, resolved
from harness.stats import DEFAULT_LEVEL

POOLED = "all"
NEXT_LAYER = -1  # rows of the next-token metrics carry layer -1
HIDDEN_METRICS = ("l2", "rel_l2", "cos_dist")
REASON_ZERO = "all distances zero (no path from the prompt yet, e.g. layer 0)"
FIT_FIELDS = ["alpha", "alpha_low", "alpha_high", "n", "method", "r2", "t_min", "t_max", "reason"]
# A FitResult's interval under fits.csv's names (`<metric>_low`, `<metric>_high`).
INTERVAL_NAMES = {"ci_low": "alpha_low", "ci_high": "alpha_high"}


@dataclass(frozen=True)
class FitMember:
    """One pair's curves (the `PairDivergence.to_arrays` layout) and its bootstrap seed."""

    pair: str
    arrays: dict
    seed: int = 0

    @property
    def identical(self) -> bool:
        return bool(self.arrays.get("identical", False))


def layer_groups(layers: list[int]) -> list[tuple[str, list[int]]]:
    """Layers 1..L cut into early / middle / late thirds (fewer groups for few layers): the
    groups the report shows and laws.csv fits."""
    layers = sorted(layer for layer in layers if layer >= 1)
    if len(layers) <= 3:
        return [(f"layer {layer}", [layer]) for layer in layers]
    parts = np.array_split(np.array(layers), 3)
    names = ("early", "middle", "late")
    return [
        (f"{n} (layers {p[0]}–{p[-1]})", [int(x) for x in p])
        for n, p in zip(names, parts, strict=False)
    ]


def curve_sets(arrays: dict, t_min: int | None = None) -> dict[tuple[int, str], np.ndarray]:
    """(layer, metric) -> (T,) float64 curve, hidden metrics first, then the next-token ones.
    A conversation's arrays carry `assistant` (a (T,) mask of the generated positions): its
    hidden metrics are fitted again over those positions only, as `<metric>@assistant`.
    Below float32, positions under the measured rounding floor are NaN (`precision.resolved`,
    with t_min: a curve left too short is NaN throughout), which the fits skip."""
    arrays = resolved(arrays, t_min)
    out = {
        (layer, metric): np.asarray(arrays[metric][row], dtype=np.float64)
        for row, layer in enumerate(np.asarray(arrays["layers"]).tolist())
        for metric in HIDDEN_METRICS
    }
    out[(NEXT_LAYER, "abs_delta_logp")] = np.abs(np.asarray(arrays["delta_logp"], np.float64))
    out[(NEXT_LAYER, "kl")] = np.asarray(arrays["kl"], dtype=np.float64)
    out.update(share_curves(arrays))
    mask = arrays.get("assistant")
    if mask is not None:
        for (layer, metric), curve in list(out.items()):
            if metric in HIDDEN_METRICS:
                out[(layer, f"{metric}@assistant")] = np.where(mask, curve, np.nan)
    return out


def _fits(
    curves: dict[tuple[int, str], np.ndarray],
    t_min: int,
    n_boot: int,
    seed: int,
    identical: bool,
    level: float = DEFAULT_LEVEL,
    cut: dict[tuple[int, str], np.ndarray] | None = None,
) -> dict[tuple[int, str], dict]:
    """fits.csv fields per (layer, metric) of curves that share t (one pair, or one group's
    pairs stacked), fitted in one batch. `cut`: below float32, the same curves cut at their
    rounding floor but none dropped for being short, whose kept positions each row states
    (`_floor_note`)."""

    if not curves:
        return {}
    t = np.arange(1, next(iter(curves.values())).shape[-1] + 1)
    fits = fit_alpha_batch(
        t, list(curves.values()), t_min=t_min, n_boot=n_boot, ci=level, seed=seed
    )
    out = {}
    for key, fit in zip(curves, fits, strict=True):
        dump = fit.model_dump(include=set(FIT_FIELDS) | set(INTERVAL_NAMES))
        row = {INTERVAL_NAMES.get(k, k): v for k, v in dump.items()}
        if identical and key[1] not in SHARE_FIT_METRICS:
            row.update(alpha=float("nan"), reason=REASON_IDENTICAL)
        elif fit.reason == REASON_IDENTICAL:  # all zero although the prompts differ
            row.update(reason=REASON_ZERO)
        if cut is not None:
            _floor_note(row, cut[key], t_min)
        out[key] = row
    return out


def _floor_note(row: dict, curve: np.ndarray, t_min: int) -> None:
    """A fit of a curve cut at its rounding floor says how many fit positions lie above it:
    in `method` beside a finite alpha (t_max: the last one kept), as the `reason` of a fit the
    cut left without one ("cannot tell", never an alpha of the rounding; t_max: the last
    position above the floor)."""
    grid = fit_positions(t_min, curve.shape[-1])
    kept = grid[np.isfinite(np.atleast_2d(curve)[:, grid - 1]).any(axis=0)]
    if len(kept) == len(grid) or row["reason"] in (REASON_IDENTICAL, REASON_ZERO):
        return
    share = f"{len(kept)} of {len(grid)} fit positions above {FLOOR_MULTIPLE:g}x the rounding floor"
    if np.isfinite(row["alpha"]):
        row.update(method=f"{row['method']}; {share}", t_max=int(kept[-1]))
    else:
        row.update(
            method=f"none ({share})", t_max=int(kept[-1]) if len(kept) else 0,
            reason=f"cannot tell: {share} (a fit needs them to span >= {MIN_KEPT_DECADES:g} "
            "decade of t)",
        )  # fmt: skip


def _pooled(
    members: list[FitMember], t_min: int, n_boot: int, level: float = DEFAULT_LEVEL
) -> dict[tuple[int, str], dict] | None:
    """Pooled fits of the members whose prompts differ (None when the group has no such pair)."""
    usable = [m for m in members if not m.identical]
    if not usable:
        return None
    sets = [curve_sets(m.arrays, t_min) for m in usable]
    common = min(next(iter(s.values())).shape[0] for s in sets)
    keys = [key for key in sets[0] if all(key in s for s in sets)]  # @assistant: all talks
    stacked = {key: np.vstack([s[key][:common] for s in sets]) for key in keys}
    cut = None
    if any(has_floor(m.arrays) for m in usable):
        cuts = [curve_sets(m.arrays) for m in usable]
        cut = {key: np.vstack([c[key][:common] for c in cuts]) for key in keys}
    return _fits(stacked, t_min, n_boot, 0, False, level, cut)


def _rows(ident: dict, pair: str, fits: dict[tuple[int, str], dict]) -> list[dict]:
    return [
        {**ident, "pair": pair, "layer": layer, "metric": metric, **fit}
        for (layer, metric), fit in fits.items()
    ]


def _identical_rows(ident: dict, keys, t_min: int) -> list[dict]:
    nan = float("nan")
    fit = dict(alpha=nan, alpha_low=nan, alpha_high=nan, n=0, r2=nan, t_min=t_min, t_max=0)
    fit["method"] = f"none ({REASON_IDENTICAL})"
    return _rows(ident, POOLED, {k: {**fit, "reason": REASON_IDENTICAL} for k in keys})


def fit_table(
    groups: list[tuple[dict, list[FitMember]]],
    t_min: int,
    n_boot_pair: int = 200,
    n_boot_pooled: int = 1000,
    pool_models: bool = False,
    ident: list[str] | None = None,
    level: float = DEFAULT_LEVEL,
) -> pd.DataFrame:
    """fits.csv rows. `groups`: (identity columns, e.g. {model, item, policy}, members);
    `ident` names those columns when there may be no group at all (the probe was off)."""
    rows: list[dict] = []
    for ident, members in groups:
        for member in members:
            curves = curve_sets(member.arrays, t_min)
            cut = curve_sets(member.arrays) if has_floor(member.arrays) else None
            fits = _fits(curves, t_min, n_boot_pair, member.seed, member.identical, level, cut)
            rows += _rows(ident, member.pair, fits)
        if len(members) > 1:
            rows += pooled_fit_rows(ident, members, t_min, n_boot_pooled, level)
    if pool_models:
        rows += _model_rows(groups, t_min, n_boot_pooled, level)
    names = ident or list(dict.fromkeys(k for group, _ in groups for k in group))
    return pd.DataFrame(rows, columns=[*names, "pair", "layer", "metric", *FIT_FIELDS])


def pooled_fit_rows(
    ident: dict, members: list[FitMember], t_min: int, n_boot: int, level: float = DEFAULT_LEVEL
) -> list[dict]:
    """The pair = "all" rows of `members` pooled (bootstrap over pairs); NaN rows with their
    reason when every member's prompts are identical."""
    pooled = _pooled(members, t_min, n_boot, level)
    keys = curve_sets(members[0].arrays, t_min).keys()
    return _rows(ident, POOLED, pooled) if pooled else _identical_rows(ident, keys, t_min)


def _model_rows(groups, t_min: int, n_boot: int, level: float) -> list[dict]:
    by_model: dict[str, list[FitMember]] = {}
    for ident, members in groups:
        by_model.setdefault(ident["model"], []).extend(members)
    rows: list[dict] = []
    for model, members in by_model.items():
        ident = {k: POOLED for k in groups[0][0]} | {"model": model}
        pooled = _pooled(members, t_min, n_boot, level)
        if pooled:
            rows += _rows(ident, POOLED, pooled)
    return rows
