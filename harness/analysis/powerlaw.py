"""Power-law fits of a decaying distance D(t) ~ t^-alpha (docs/architecture.md,
"Estimators: alpha fits").

alpha is the OLS slope of -log D on log t at the geometric positions
unique(round(geomspace(t_min, t_max, 64))), D being the mean over pairs at each position. The
CI comes from a bootstrap over pairs, or, with a single curve, from a block bootstrap over log-t
bins (neighbouring points of one curve are correlated, so points are resampled bin by bin).
With one or two pairs the interval reflects the curve's noise, not sample-to-sample variation,
and its `method` says so ("block-bootstrap (curve noise)", "bootstrap over 2 pairs (curve
noise)"); `n` is the number of pairs. The percentile step is
`harness.stats.bootstrap.bootstrap_interval`.
Degenerate input (identical prompts, NaNs, too short) gives NaN and a reason, never an error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel

from harness.stats.bootstrap import bootstrap_interval

# Block bootstrap: the fit positions are cut into this many equal-width bins of log t.
N_LOG_BINS = 8

REASON_IDENTICAL = "identical prompts"
REASON_FEW_POINTS = "fewer than 3 usable points"
REASON_SHORT = "continuation shorter than t_min"


class FitResult(BaseModel):
    """One alpha fit. Floats are NaN when the fit is degenerate; `reason` says why ("" if ok)."""

    alpha: float
    ci_low: float
    ci_high: float
    r2: float
    t_min: int
    t_max: int
    n_points: int
    n: int = 0  # pairs the interval rests on
    method: str = ""
    reason: str = ""


def bootstrap_method(n_pairs: int) -> str:
    """What the alpha interval over n_pairs pairs reflects."""
    if n_pairs < 2:
        return "block-bootstrap (curve noise)"
    if n_pairs == 2:
        return "bootstrap over 2 pairs (curve noise)"
    return "percentile-bootstrap over pairs"


def fit_positions(t_min: int, t_max: int, n: int = 64) -> np.ndarray:
    """unique(round(geomspace(t_min, t_max, n))) as ints: the positions every alpha is fit at."""
    if t_max < t_min or t_min < 1:
        return np.zeros(0, dtype=np.int64)
    return np.unique(np.round(np.geomspace(t_min, t_max, n)).astype(np.int64))


def _weighted_slope(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """OLS slope of y on x with integer-like weights w (0 = point unused), row by row.

    x: (n,), y: (..., n) or (n,), w: (..., n) -> (...). NaN where fewer than 3 points carry
    weight or x does not vary.
    """
    y = np.where(w > 0, y, 0.0)  # NaN/-inf in unused points must not leak into the sums
    sw = w.sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mx = (w * x).sum(axis=-1) / sw
        my = (w * y).sum(axis=-1) / sw
        dx = x - mx[..., None]
        sxx = (w * dx * dx).sum(axis=-1)
        sxy = (w * dx * (y - my[..., None])).sum(axis=-1)
        slope = sxy / sxx
    enough = ((w > 0).sum(axis=-1) >= 3) & (sxx > 1e-12 * np.maximum(sw, 1.0))
    return np.where(enough, slope, np.nan)


def _as_pairs(t: np.ndarray, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    t = np.asarray(t).reshape(-1)
    d = np.asarray(d, dtype=np.float64)
    if d.ndim == 1:
        d = d[None, :]
    if d.ndim != 2 or d.shape[1] != t.shape[0]:
        raise ValueError(f"d must have shape (T,) or (n_pairs, T) with T = {t.shape[0]}")
    return t, d  # (T,), (n_pairs, T)


def _select(t: np.ndarray, t_min: int, t_max: int) -> np.ndarray:
    """Indices of t at the fit positions. When t is sparser than the fit grid (fewer than half
    of the grid present, e.g. t is itself a log grid), every t inside [t_min, t_max] is used."""
    grid = fit_positions(t_min, t_max)
    idx = np.flatnonzero(np.isin(t, grid))
    if len(idx) * 2 < len(grid):
        idx = np.flatnonzero((t >= t_min) & (t <= t_max))
    return idx


def _nan_result(reason: str, t_min: int, t_max: int, n_points: int = 0) -> FitResult:
    nan = math.nan
    return FitResult(
        alpha=nan, ci_low=nan, ci_high=nan, r2=nan,
        t_min=t_min, t_max=t_max, n_points=n_points, method=f"none ({reason})", reason=reason,
    )  # fmt: skip


def fit_alpha(
    t: np.ndarray,
    d: np.ndarray,
    t_min: int = 16,
    t_max: int | None = None,
    n_boot: int = 1000,
    ci: float = 0.95,
    seed: int = 0,
) -> FitResult:
    """alpha of D(t) ~ t^-alpha over [t_min, t_max] (default t_max = largest t), with a CI.

    t: (T,) positions; d: (T,) one curve or (n_pairs, T). NaNs are ignored (D is the mean of the
    finite values at each position); only positive finite D enter the fit.
    """
    return fit_alpha_batch(t, [d], t_min, t_max, n_boot, ci, seed)[0]


# curves resampled together: bounds the (curves, n_boot, points) temporaries (~16 MB at 1000)
BATCH_CURVES = 32


def fit_alpha_batch(
    t: np.ndarray,
    curves: list[np.ndarray],
    t_min: int = 16,
    t_max: int | None = None,
    n_boot: int = 1000,
    ci: float = 0.95,
    seed: int = 0,
) -> list[FitResult]:
    """`fit_alpha` of each curve over the same t, equal to it, result for result. Every fit
    draws its bootstrap from a fresh generator seeded with `seed`, so curves with the same
    number of pairs (single curves: the same usable points) get the same draws: they are
    resampled together, one array operation for many fits (fits.csv: ~100 curves per pair)."""
    t = np.asarray(t).reshape(-1)
    # the fit positions depend on t alone: found once for the whole batch
    t_top = int(t.max()) if t.size else 0
    t_max = t_top if t_max is None else min(int(t_max), t_top)
    idx = _select(t, t_min, t_max) if t_max >= t_min else np.zeros(0, dtype=np.int64)
    x = np.log(t[idx].astype(np.float64))  # (n,)
    results: list[FitResult | None] = [None] * len(curves)
    shared: dict[tuple, list[tuple[int, _Prepared]]] = {}
    for i, d in enumerate(curves):
        prepared = _prepare(t, d, t_min, t_max, idx, x)
        if isinstance(prepared, FitResult):
            results[i] = prepared
            continue
        single = prepared.d0.shape[0] < 2
        draws = (prepared.d0.shape[0], prepared.usable.tobytes() if single else b"")
        shared.setdefault(draws, []).append((i, prepared))
    for members in shared.values():
        for start in range(0, len(members), BATCH_CURVES):
            chunk = members[start : start + BATCH_CURVES]
            boots = _bootstrap(x, [p for _, p in chunk], n_boot, np.random.default_rng(seed))
            for (i, p), boot in zip(chunk, boots, strict=True):
                pairs = p.d0.shape[0]
                ci_ = bootstrap_interval(
                    p.alpha, boot, n=pairs, level=ci, method=bootstrap_method(pairs),
                    min_finite=max(10, len(boot) // 2),
                )  # fmt: skip
                results[i] = FitResult(
                    alpha=p.alpha, ci_low=ci_.low, ci_high=ci_.high, r2=p.r2,
                    t_min=t_min, t_max=p.t_max, n_points=p.n_points, n=pairs, method=ci_.method,
                )  # fmt: skip
    return results  # type: ignore[return-value]


@dataclass
class _Prepared:
    """One curve's point fit and what its bootstrap needs."""

    d0: np.ndarray  # (n_pairs, n), NaN -> 0
    ok: np.ndarray  # (n_pairs, n) finite mask as float
    y: np.ndarray  # (n,) log of the mean D
    usable: np.ndarray  # (n,) finite y
    alpha: float
    r2: float
    t_max: int
    n_points: int


def _prepare(
    t: np.ndarray, d: np.ndarray, t_min: int, t_max: int, idx: np.ndarray, x: np.ndarray
) -> _Prepared | FitResult:
    """The point fit of one curve at the fit positions `idx` of t (x = log t there), or its NaN
    result when it is degenerate."""
    t, d = _as_pairs(t, d)
    finite = np.isfinite(d)
    if finite.any() and np.all(d[finite] == 0.0):
        # e.g. hidden-state index 0: embeddings of a shared continuation are identical.
        return _nan_result(REASON_IDENTICAL, t_min, t_max)
    if t_max < t_min:
        return _nan_result(REASON_SHORT, t_min, t_max)

    dsel = d[:, idx]  # (n_pairs, n)
    ok = np.isfinite(dsel)
    d0 = np.where(ok, dsel, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_d = d0.sum(axis=0) / ok.sum(axis=0)  # (n,)
        y = np.log(mean_d)
    usable = np.isfinite(y)
    n_points = int(usable.sum())
    if n_points < 3:
        return _nan_result(REASON_FEW_POINTS, t_min, t_max, n_points)

    w = usable.astype(np.float64)
    alpha = -float(_weighted_slope(x, y, w))
    fitted = -alpha * x + (y[usable].mean() + alpha * x[usable].mean())
    ss_res = float(((y - fitted)[usable] ** 2).sum())
    ss_tot = float(((y - y[usable].mean())[usable] ** 2).sum())
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else math.nan
    return _Prepared(d0, ok.astype(np.float64), y, usable, alpha, r2, t_max, n_points)


def _bootstrap(
    x: np.ndarray, curves: list[_Prepared], n_boot: int, rng: np.random.Generator
) -> np.ndarray:
    """(curves, n_boot) bootstrap alphas of curves that share their draws (`fit_alpha_batch`)."""
    first = curves[0]
    if first.d0.shape[0] >= 2:
        d0 = np.stack([c.d0 for c in curves])  # (C, pairs, n)
        ok = np.stack([c.ok for c in curves])
        return _boot_pairs(x, d0, ok, n_boot, rng)
    y = np.stack([c.y for c in curves])[:, None, :]  # (C, 1, n)
    return _boot_bins(x, y, first.usable, n_boot, rng, len(curves))


def _boot_pairs(
    x: np.ndarray, d0: np.ndarray, ok: np.ndarray, n_boot: int, rng: np.random.Generator
) -> np.ndarray:
    """alpha of n_boot resamples of the pairs (rows), per curve. d0: (C, n_pairs, n) with
    NaN -> 0, ok: its finite mask -> (C, n_boot)."""
    n_pairs = d0.shape[1]
    # A resample is a count per pair; the resampled mean is then two matrix products.
    counts = rng.multinomial(n_pairs, np.full(n_pairs, 1.0 / n_pairs), size=n_boot)  # (B, pairs)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_d = (counts @ d0) / (counts @ ok)  # (C, B, n)
        y = np.log(mean_d)
    w = np.isfinite(y).astype(np.float64)
    return -_weighted_slope(x, y, w)


def _boot_bins(
    x: np.ndarray,
    y: np.ndarray,
    usable: np.ndarray,
    n_boot: int,
    rng: np.random.Generator,
    n_curves: int,
) -> np.ndarray:
    """alpha of n_boot block resamples of single curves y (C, 1, n) with the same usable points:
    bins of log t drawn with replacement -> (C, n_boot)."""
    xs = x[usable]
    edges = np.linspace(xs.min(), xs.max(), N_LOG_BINS + 1)
    bins = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, N_LOG_BINS - 1)  # (n,)
    occupied = np.unique(bins[usable])
    if len(occupied) < 2:
        return np.full((n_curves, n_boot), np.nan)
    draws = rng.multinomial(
        len(occupied), np.full(len(occupied), 1.0 / len(occupied)), size=n_boot
    )  # (B, n_bins occupied)
    per_bin = np.zeros((n_boot, N_LOG_BINS))
    per_bin[:, occupied] = draws
    w = per_bin[:, bins] * usable  # (B, n): each point weighs as often as its bin was drawn
    return -_weighted_slope(x, y, np.broadcast_to(w, (n_curves, *w.shape)))


def local_exponent(t: np.ndarray, d: np.ndarray, half_width_decades: float = 0.25) -> np.ndarray:
    """alpha(t): the OLS slope of -log D on log t over the given points within +-half_width
    decades of each t (one-sided near the ends of t). Returns (T,), NaN where fewer than 3
    usable points fall in the window.

    Every given point weighs the same, so pass log-spaced positions (e.g. `fit_positions`)
    for a window weighted evenly in log t; with dense 1..T the window's upper end dominates.
    """
    t, d = _as_pairs(t, d)
    order = np.argsort(t, kind="stable")
    ts = t[order].astype(np.float64)
    ok = np.isfinite(d[:, order])
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_d = np.where(ok, d[:, order], 0.0).sum(axis=0) / ok.sum(axis=0)  # (T,)
        y = np.log(mean_d)
        x = np.log10(ts)
    use = np.isfinite(y) & np.isfinite(x)
    lo = np.searchsorted(x, x - half_width_decades - 1e-12, side="left")  # (T,)
    hi = np.searchsorted(x, x + half_width_decades + 1e-12, side="right")  # (T,)
    # Window sums from prefix sums, O(T) for any T. Each window's sums are taken about its own
    # centre x_i (moments expanded), and prefix sums of x, y ~ log t stay small enough in float64
    # (relative error ~1e-12 at T = 1e7).
    xl = np.where(use, x * math.log(10.0), 0.0)
    yl = np.where(use, y, 0.0)
    u = use.astype(np.float64)

    def window_sum(v: np.ndarray) -> np.ndarray:
        c = np.concatenate([[0.0], np.cumsum(v)])
        return c[hi] - c[lo]

    n = window_sum(u)
    sx, sy = window_sum(xl), window_sum(yl)
    sxx, sxy = window_sum(xl * xl), window_sum(xl * yl)
    with np.errstate(invalid="ignore", divide="ignore"):
        vxx = sxx - sx * sx / n
        vxy = sxy - sx * sy / n
        out = -vxy / vxx
    out = np.where((n >= 3) & (vxx > 1e-12 * np.maximum(n, 1.0)), out, np.nan)
    result = np.empty_like(out)
    result[order] = out
    return result


def reference_curves(
    t: np.ndarray, d: np.ndarray, prompt_len: int, n_layers: int, t_min: int = 16
) -> dict[str, np.ndarray]:
    """The reference curves 1/t ("inv_t") and P (log t)^(L-1) / t ("bound"), each times the
    constant that fits them to D by least squares in log space over the fit range. Values are
    aligned with t; all NaN when the data give no usable point."""
    t, d = _as_pairs(t, d)
    tf = t.astype(np.float64)
    shapes = {
        "inv_t": 1.0 / tf,
        "bound": prompt_len * np.log(tf) ** (n_layers - 1) / tf,
    }
    t_top = int(t.max()) if t.size else 0
    idx = _select(t, t_min, t_top) if t_top >= t_min else np.zeros(0, dtype=np.int64)
    ok = np.isfinite(d[:, idx])
    with np.errstate(invalid="ignore", divide="ignore"):
        log_d = np.log(np.where(ok, d[:, idx], 0.0).sum(axis=0) / ok.sum(axis=0))  # (n,)
    out: dict[str, np.ndarray] = {}
    for name, shape in shapes.items():
        with np.errstate(invalid="ignore", divide="ignore"):
            gap = log_d - np.log(shape[idx])
        gap = gap[np.isfinite(gap)]
        # Least squares of log D - log(c g) over c is the mean log gap.
        scale = math.exp(float(gap.mean())) if gap.size else math.nan
        out[name] = scale * shape
    return out
