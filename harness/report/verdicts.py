"""Verdict cards: plain sentences computed from the stored curves and tables.

Adherence verdicts read a(t) per (model, item, policy). "Holds 90 % to t = X" means a(t) >= 0.9
at every point of the curve up to and including t = X, X being the last point before a(t)
first falls below 0.9 ("to the end" when it never does). A policy whose first window is already
below 0.9 is described by where it starts and its half-life (summary.csv when stored, else the
scorer's `curve_metrics` on the curve).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from pydantic import BaseModel

from harness.config.policy_specs import BASELINE
from harness.report.html import fmt_pct, fmt_t
from harness.scoring.adherence import curve_metrics
from harness.stats.text import bracket

HOLD = 0.9  # adherence level a verdict calls "holds"
MIN_OVERHEAD = 0.005  # below this a policy is said to cost nothing extra


class PolicyVerdict(BaseModel):
    policy: str
    a_first: float
    a_max: float
    hold_t: float | None  # last t with a >= HOLD at every point so far; None if a_first < HOLD
    holds_to_end: bool
    t_last: float
    half_life: float  # NaN when censored
    half_life_censored: bool
    auc: float
    overhead: float  # (injected + restated) / generated; NaN when unknown
    auc_ci: str = ""  # summary.csv's AUC interval with its n (`ci_text`), "" when not stored
    auc_low: float = math.nan  # summary.csv's AUC interval: "highest" needs it clear of others'
    auc_high: float = math.nan
    # a(t)'s interval straddles HOLD from the first window: neither "holds" nor "below"
    hold_undecided: bool = False

    def cost(self) -> str:
        if math.isnan(self.overhead) or self.overhead < MIN_OVERHEAD:
            return ""
        return f" at {fmt_pct(self.overhead, signed=True)} tokens"

    def hold_phrase(self) -> str:
        if self.holds_to_end:
            where = f"to the end (t = {fmt_t(self.t_last)})"
        else:
            where = f"to t = {fmt_t(self.hold_t)}"
        return f"{where} with {self.policy}{self.cost()}"

    def start_phrase(self) -> str:
        if self.a_max == 0:  # half of nothing is nothing: a half-life would say nothing
            return f"with {self.policy}{self.cost()} no window passes (to t = {fmt_t(self.t_last)})"
        if self.half_life_censored:
            decay = f"never halves (to t = {fmt_t(self.t_last)})"
        else:
            decay = f"halves by t = {fmt_t(self.half_life)}"
        return f"with {self.policy}{self.cost()} it starts at {fmt_pct(self.a_first)} and {decay}"


@dataclass
class Card:
    title: str
    sentences: list[str] = field(default_factory=list)
    kind: str = "adherence"  # adherence | mechanism | correlation | predictor


def policy_order(policies) -> list[str]:
    """`none` first, then the others by name: the baseline reads first in every list."""
    rest = sorted(p for p in set(policies) if p != BASELINE)
    return ([BASELINE] if BASELINE in set(policies) else []) + rest


def policy_verdict(
    policy: str,
    t: np.ndarray,
    a: np.ndarray,
    overhead: float = math.nan,
    stored_half_life: tuple[float, bool] | None = None,
    bounds: tuple[np.ndarray, np.ndarray] | None = None,
) -> PolicyVerdict:
    """The verdict numbers of one a(t) curve (points in order of t). With `bounds` (a(t)'s
    interval per point, adherence_curve.csv's a_low / a_high) "holds HOLD to t" rests on the
    interval: a point holds when its low end is >= HOLD, the curve is below HOLD from the
    start only when the first high end is < HOLD, and otherwise cannot tell (a flat true 0.93
    over 16 samples stopped "holding" by noise in 95 % of runs on the point estimates)."""

    keep = ~np.isnan(a)
    t, a = np.asarray(t, dtype=float)[keep], np.asarray(a, dtype=float)[keep]
    metrics = curve_metrics(t, a)
    held, below_first = a >= HOLD, len(a) > 0 and a[0] < HOLD
    if bounds is not None:
        low, high = (np.asarray(b, dtype=float)[keep] for b in bounds)
        held = np.where(np.isnan(low), False, low >= HOLD)
        below_first = len(a) > 0 and bool(high[0] < HOLD)
    undecided = len(a) > 0 and not held[0] and not below_first
    failing = np.flatnonzero(~held)
    if len(a) == 0 or not held[0]:
        hold_t, to_end = None, False
    elif len(failing) == 0:
        hold_t, to_end = float(t[-1]), True
    else:
        hold_t, to_end = float(t[failing[0] - 1]), False
    half_life, censored = metrics["half_life"], metrics["half_life_censored"]
    if stored_half_life is not None:
        half_life, censored = stored_half_life
    return PolicyVerdict(
        policy=policy,
        a_first=metrics["a_first"],
        a_max=float(a.max()) if len(a) else math.nan,
        hold_t=hold_t,
        holds_to_end=to_end,
        t_last=float(t[-1]) if len(t) else math.nan,
        half_life=half_life,
        half_life_censored=bool(censored),
        auc=metrics["auc"],
        overhead=overhead,
        hold_undecided=undecided,
    )


def _stored_auc_intervals(summary: pd.DataFrame | None) -> dict[tuple[str, str, str], str]:
    if summary is None or "auc" not in summary.columns:
        return {}
    return {
        (r["model"], r["item"], r["policy"]): ci_text(r, "auc") for r in summary.to_dict("records")
    }


def _stored_auc_bounds(summary: pd.DataFrame | None) -> dict[tuple[str, str, str], dict]:
    if summary is None or not {"auc_low", "auc_high"} <= set(summary.columns):
        return {}
    return {(r["model"], r["item"], r["policy"]): {"auc_low": _number(r["auc_low"]),
                                                   "auc_high": _number(r["auc_high"])}
            for r in summary.to_dict("records")}  # fmt: skip


def _curve_bounds(cond: pd.DataFrame) -> tuple[np.ndarray, np.ndarray] | None:
    """a(t)'s interval per point (derive.adherence_curve names it low / high)."""
    for low, high in (("low", "high"), ("a_low", "a_high")):
        if {low, high} <= set(cond.columns) and cond[low].notna().any():
            return cond[low].to_numpy(dtype=float), cond[high].to_numpy(dtype=float)
    return None


def _stored_half_lives(summary: pd.DataFrame | None) -> dict[tuple[str, str, str], tuple]:
    if summary is None or "half_life" not in summary.columns:
        return {}
    out = {}
    for row in summary.to_dict("records"):
        value = float(row["half_life"])
        censored = row.get("half_life_censored")
        censored = math.isnan(value) if censored is None else str(censored).lower() == "true"
        out[(row["model"], row["item"], row["policy"])] = (value, censored)
    return out


def adherence_cards(
    curve: pd.DataFrame, overhead: dict, summary: pd.DataFrame | None = None
) -> list[Card]:
    """One card per (model, item): how long each policy holds HOLD, and at what token cost."""
    half_lives, auc_intervals = _stored_half_lives(summary), _stored_auc_intervals(summary)
    auc_bounds = _stored_auc_bounds(summary)
    cards = []
    for (model, item), rows in curve.groupby(["model", "item"], sort=True):
        verdicts = []
        for policy in policy_order(rows["policy"]):
            cond = rows[rows["policy"] == policy].sort_values("t")
            key = (model, item, policy)
            verdicts.append(
                policy_verdict(
                    policy,
                    cond["t"].to_numpy(),
                    cond["a"].to_numpy(dtype=float),
                    overhead.get(key, math.nan),
                    half_lives.get(key),
                    _curve_bounds(cond),
                ).model_copy(
                    update={"auc_ci": auc_intervals.get(key, ""), **auc_bounds.get(key, {})}
                )  # fmt: skip
            )
        cards.append(Card(title=f"{item} · {model}", sentences=item_sentences(item, verdicts)))
    return cards


def item_sentences(item: str, verdicts: list[PolicyVerdict]) -> list[str]:
    holds = [v for v in verdicts if v.hold_t is not None]
    starts = [v for v in verdicts if v.hold_t is None and not math.isnan(v.a_first)
              and not v.hold_undecided]  # fmt: skip
    unsure = [v for v in verdicts if v.hold_undecided]
    sentences = []
    if holds:
        sentences.append(
            f"{item} holds {fmt_pct(HOLD)} " + ", ".join(v.hold_phrase() for v in holds) + "."
        )
    if starts:
        lead = "Below" if holds else f"{item} is below"
        sentences.append(
            f"{lead} {fmt_pct(HOLD)} from the first window: "
            + "; ".join(v.start_phrase() for v in starts)
            + "."
        )
    if unsure:
        sentences.append(
            f"Cannot tell whether {item} holds {fmt_pct(HOLD)} with "
            + ", ".join(v.policy for v in unsure)
            + f": a(t)'s interval straddles {fmt_pct(HOLD)} from the first window."
        )
    sentences += highest_sentence(verdicts)
    return sentences


def highest_sentence(verdicts: list[PolicyVerdict]) -> list[str]:
    """The policy with the highest adherence AUC, named only when its AUC interval lies above
    every other policy's (three identical policies named a winner in 48-95 % of runs on the
    point estimates); else "cannot tell" with the reason."""
    scored = [v for v in verdicts if not math.isnan(v.auc)]
    if len(scored) < 2:
        return []
    best = max(scored, key=lambda v: v.auc)
    others = [v for v in scored if v is not best]
    if math.isnan(best.auc_low) or any(math.isnan(v.auc_high) for v in others):
        return ["Highest adherence AUC: cannot tell (no AUC interval to compare)."]
    if all(best.auc_low > v.auc_high for v in others):
        return [f"Highest adherence AUC: {best.policy} ({best.auc:.2f}{best.auc_ci}){best.cost()}, "
                "its interval above every other policy's."]  # fmt: skip
    return [f"Highest adherence AUC: cannot tell ({best.policy}'s {best.auc:.2f}{best.auc_ci} "
            "overlaps another policy's interval)."]  # fmt: skip


def _number(value) -> float:
    try:
        return math.nan if value is None else float(value)
    except (TypeError, ValueError):
        return math.nan


def interval_n(row: dict, base: str) -> float:
    """The units an interval rests on: `<base>_n` where a row holds intervals over different
    units, else the row's `n` (NaN when the file predates it)."""
    for column in (f"{base}_n", "n", "n_samples"):
        if not math.isnan(_number(row.get(column))):
            return _number(row.get(column))
    return math.nan


def interval_bounds(row: dict, base: str) -> tuple[float, float]:
    return _number(row.get(f"{base}_low")), _number(row.get(f"{base}_high"))


def ci_text(row: dict, base: str, spec: str = ".2f", with_n: bool = True) -> str:
    """The interval as stored, with its n: ` [0.41, 1.00], n = 4`. An interval that could not
    be formed reads ` (n = 1: too small for an interval)`; a zero-width one (every resampled
    value equal) is not passed off as certainty: ` [1.00, 1.00] (degenerate: percentile
    bootstrap over n = 4)`, naming the method where the row stores one."""
    low, high = interval_bounds(row, base)
    n = interval_n(row, base)
    n_text = "" if math.isnan(n) else f"n = {int(n)}"
    if math.isnan(low) or math.isnan(high):
        return f" ({n_text}: too small for an interval)" if n_text and n < 2 else ""
    bounds = " " + bracket(low, high, spec)
    if low == high:
        method = row.get(f"{base}_method") or row.get("method")
        over = " over ".join(str(x) for x in (method, n_text) if isinstance(x, str) and x)
        return f"{bounds} (degenerate{': ' + over if over else ''}; n too small to show spread)"
    return bounds + (f", {n_text}" if n_text and with_n else "")


def ci_cell(row: dict, base: str, spec: str = ".3g") -> str:
    """A table cell of the interval: `[0.41, 1]`, `n too small` where none could be formed, and
    a zero-width interval flagged `degenerate` with its method (`ci_text` for sentences)."""
    low, high = interval_bounds(row, base)
    n = interval_n(row, base)
    if math.isnan(low) or math.isnan(high):
        return "n too small" if not math.isnan(n) and n < 2 else "–"
    bounds = bracket(low, high, spec)
    if low == high:
        method = row.get(f"{base}_method") or row.get("method")
        return f"{bounds} degenerate" + (f" ({method})" if isinstance(method, str) else "")
    return bounds


def n_cell(row: dict, base: str) -> str:
    n = interval_n(row, base)
    return "" if math.isnan(n) else str(int(n))
