"""The exactly solvable linear relay model (docs/architecture.md, "Estimators: relay model").

A scalar linear transformer: uniform causal attention over every visible position, a residual
stream, no norm and no MLP. Sequence positions i = 1..P+T; the P prompt positions carry 1 under
prompt A and 0 under prompt B, continuation embeddings are equal, so the A-B difference obeys

    delta_l(i) = (1 + W) delta_{l-1}(i) + (1 - W) (1/n_i) sum_{j<=i} delta_{l-1}(j),   n_i = i,

with W = 0 the plain model (attention = W * self + (1 - W) * uniform). Continuation position t
is i = P + t; layer 1 gives (1 - W) P / (P + t) there, the prompt positions carry 2^l.

For t >> P, f_l = t delta_l / P as a function of u = log t obeys
f_l = (1 + W) f_{l-1} + (1 - W) int f_{l-1} du, so f_l is a polynomial of degree l - 1 in u with
leading term (1 - W)^l u^(l-1) / (l-1)!: the bound P (log t)^(l-1) / t is tight, with ratio
-> (1 - W)^l / (l-1)!, approached only like 1/log t (the lower powers of u).

Solved in float64 by cumulative sums, streamed in chunks of positions carrying one running sum
per layer, so memory stays O(chunk * layers) and T = 1e7 takes seconds; only the values at the
requested positions are kept.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from pydantic import BaseModel

from harness.analysis.powerlaw import fit_alpha, fit_positions, local_exponent
from harness.atomic import atomic_write_text
from harness.errors import UserError
from harness.results import RelayRow
from harness.results.base import MODEL_TOKENS

CHUNK = 1 << 20  # positions per streamed chunk: 8 MiB per float64 array
CSV_POINTS = 200  # geometric positions per layer written to relay.csv
MAX_LAYERS = 128  # prompt positions carry 2^l: float64 overflows near l = 1024
CSV_COLUMNS = tuple(RelayRow.columns())  # written as text: floats in full precision


def validate_relay(prompt_len: int, layers: int, tokens: int, self_weight: float) -> None:
    """Raise UserError (one line) for parameters the model cannot take."""
    if prompt_len <= 0:
        raise UserError(f"--prompt-len must be a positive integer, got {prompt_len}")
    if layers <= 0 or layers > MAX_LAYERS:
        raise UserError(f"--layers must be between 1 and {MAX_LAYERS}, got {layers}")
    if tokens < 16:
        raise UserError(f"--tokens must be at least 16 (alpha is fit from t = 16), got {tokens}")
    if not (0.0 <= self_weight < 1.0):  # also rejects NaN
        raise UserError(f"--self-weight must be in [0, 1), got {self_weight}")


@dataclass(frozen=True)
class RelayCurves:
    """delta at the requested continuation positions, and at every prompt position."""

    t: np.ndarray  # (n,) continuation positions, sorted, 1..T
    delta: np.ndarray  # (L, n) layer l = 1..L in row l - 1
    prompt: np.ndarray  # (L + 1, P) layer 0..L at prompt positions 1..P


def relay_deltas(
    prompt_len: int,
    layers: int,
    tokens: int,
    self_weight: float = 0.0,
    positions: np.ndarray | None = None,
    chunk: int = CHUNK,
) -> RelayCurves:
    """Solve the relay model exactly; keep delta at `positions` (default: every t = 1..T)."""
    validate_relay(prompt_len, layers, tokens, self_weight)
    P, L, T, W = prompt_len, layers, tokens, float(self_weight)
    t_keep = np.arange(1, T + 1) if positions is None else np.unique(np.asarray(positions))
    if t_keep.size and (t_keep[0] < 1 or t_keep[-1] > T):
        raise ValueError("positions must lie in 1..T")
    keep_i = t_keep + P - 1  # (n,) 0-based sequence index of each kept continuation position
    delta = np.empty((L, len(t_keep)))
    prompt = np.empty((L + 1, P))
    carry = np.zeros(L)  # running sum of layer l - 1 over the positions before the chunk
    n_total = P + T
    for start in range(0, n_total, chunk):
        stop = min(start + chunk, n_total)
        idx = np.arange(start, stop)  # (c,) 0-based sequence index
        n_vis = (idx + 1).astype(np.float64)  # (c,) visible positions, the query included
        prev = (idx < P).astype(np.float64)  # (c,) layer 0: 1 on the prompt, 0 after
        lo, hi = np.searchsorted(keep_i, [start, stop])
        sel = keep_i[lo:hi] - start
        p_stop = min(stop, P)
        if start < P:
            prompt[0, start:p_stop] = prev[: p_stop - start]
        for layer in range(L):
            csum = np.cumsum(prev)  # (c,)
            csum += carry[layer]
            carry[layer] = csum[-1]
            cur = (1.0 + W) * prev + (1.0 - W) * (csum / n_vis)  # (c,)
            delta[layer, lo:hi] = cur[sel]
            if start < P:
                prompt[layer + 1, start:p_stop] = cur[: p_stop - start]
            prev = cur
    return RelayCurves(t=t_keep, delta=delta, prompt=prompt)


def bound(prompt_len: int, layer: int, t: np.ndarray) -> np.ndarray:
    """P (log t)^(l-1) / t, the bound on layer l (0 at t = 1 when l > 1)."""
    tf = np.asarray(t, dtype=np.float64)
    return prompt_len * np.log(tf) ** (layer - 1) / tf


def bound_limit(layer: int, self_weight: float = 0.0) -> float:
    """The large-t limit of delta_l / bound: (1 - W)^l / (l - 1)!."""
    return (1.0 - self_weight) ** layer / math.factorial(layer - 1)


def csv_positions(tokens: int) -> np.ndarray:
    """The rows of relay.csv: unique(round(geomspace(1, T, 200))) plus T // 10."""
    return np.union1d(fit_positions(1, tokens, CSV_POINTS), [max(tokens // 10, 1)])


class RelayLayerSummary(BaseModel):
    """One row of the relay table."""

    layer: int
    alpha: float  # over [16, T] at the 64 fit positions
    ci_low: float
    ci_high: float
    local_alpha_T: float  # local exponent at t = T (window one-sided there)
    bound_ratio_T10: float
    bound_ratio_T: float
    bound_limit: float  # (1 - W)^l / (l - 1)!


@dataclass(frozen=True)
class RelayResult:
    prompt_len: int
    layers: int
    tokens: int
    self_weight: float
    t: np.ndarray  # (n,) relay.csv positions
    delta: np.ndarray  # (L, n)
    local_alpha: np.ndarray  # (L, n)
    bound_ratio: np.ndarray  # (L, n)
    summary: list[RelayLayerSummary]
    prompt: np.ndarray  # (L + 1, P)


def solve_relay(prompt_len: int, layers: int, tokens: int, self_weight: float = 0.0) -> RelayResult:
    """Solve the model and derive, per layer: alpha over [16, T], local exponents, bound ratios."""
    validate_relay(prompt_len, layers, tokens, self_weight)
    t_csv = csv_positions(tokens)
    t_fit = fit_positions(16, tokens)
    curves = relay_deltas(
        prompt_len, layers, tokens, self_weight, positions=np.union1d(t_csv, t_fit)
    )
    at_csv = np.isin(curves.t, t_csv)
    at_fit = np.isin(curves.t, t_fit)
    delta = curves.delta[:, at_csv]  # (L, n)
    local = np.stack([local_exponent(t_csv, row) for row in delta])  # (L, n)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.stack(
            [delta[k] / bound(prompt_len, k + 1, t_csv) for k in range(layers)]
        )  # (L, n)
    ratio[~np.isfinite(ratio)] = np.nan  # t = 1: the bound is 0 for l > 1
    i_t10 = int(np.searchsorted(t_csv, max(tokens // 10, 1)))
    summary = []
    for k in range(layers):  # row k is layer k + 1
        fit = fit_alpha(t_fit, curves.delta[k, at_fit], t_min=16, t_max=tokens)
        summary.append(
            RelayLayerSummary(
                layer=k + 1,
                alpha=fit.alpha,
                ci_low=fit.ci_low,
                ci_high=fit.ci_high,
                local_alpha_T=float(local[k, -1]),
                bound_ratio_T10=float(ratio[k, i_t10]),
                bound_ratio_T=float(ratio[k, -1]),
                bound_limit=bound_limit(k + 1, self_weight),
            )
        )
    return RelayResult(
        prompt_len=prompt_len,
        layers=layers,
        tokens=tokens,
        self_weight=self_weight,
        t=t_csv,
        delta=delta,
        local_alpha=local,
        bound_ratio=ratio,
        summary=summary,
        prompt=curves.prompt,
    )


def sweep_alpha(
    prompt_len: int,
    tokens: int,
    layers: tuple[int, ...] = (1, 2, 4, 8),
    weights: tuple[float, ...] = (0.0, 0.25, 0.5, 0.75),
) -> dict[tuple[int, float], float]:
    """alpha over [16, T] for each (L, W). Layer l of a deeper model equals layer l of an
    l-layer model (layers only read the ones below), so one solve per W serves every L."""
    for w in weights:
        validate_relay(prompt_len, max(layers), tokens, w)
    t_fit = fit_positions(16, tokens)
    out: dict[tuple[int, float], float] = {}
    for w in weights:
        curves = relay_deltas(prompt_len, max(layers), tokens, w, positions=t_fit)
        for n_layers in layers:
            fit = fit_alpha(curves.t, curves.delta[n_layers - 1], t_max=tokens)
            out[(n_layers, w)] = fit.alpha
    return out


def relay_csv_text(result: RelayResult) -> str:
    """relay.csv: one row per (layer, t) at `csv_positions(T)`, floats in full precision."""
    lines = [",".join(CSV_COLUMNS)]
    values = (result.delta, result.local_alpha, result.bound_ratio)  # each (L, n)
    for k in range(result.layers):
        for j, t in enumerate(result.t):
            cells = ",".join(repr(float(v[k, j])) for v in values)
            lines.append(f"{k + 1},{int(t)},{cells},{MODEL_TOKENS}")
    return "\n".join(lines) + "\n"


def write_relay_csv(result: RelayResult, path: Path) -> None:
    atomic_write_text(path, relay_csv_text(result))


def write_sweep_csv(sweep: dict[tuple[int, float], float], path: Path) -> None:
    lines = ["layers,self_weight,alpha"]
    lines += [f"{n},{w!r},{a!r}" for (n, w), a in sorted(sweep.items())]
    atomic_write_text(path, "\n".join(lines) + "\n")
