"""laws.csv: every mechanism and behaviour curve of a run against the three laws of
`harness.analysis.laws` (docs/architecture.md, "Estimators: laws").

A curve set is one curve kind of one group of units: the units are probe pairs (mechanism) or
samples (behaviour), the group a condition, or pooled over a model's single-reply items per
policy (item = `all`) and over all of them (item = policy = `all`); per-turn curves pool a
model's conversations the same way. Curves:
- `rel_l2` per layer group (the report's early / middle / late thirds; a pair's curve is the
  mean over the group's layers), `kl` (next-token KL per position), `share_prompt_mean` per
  layer group (hf probe): token positions t at the fit grid of [t_min, T], T the group's
  shortest curve; a conversation's positions are its replies' tokens only;
- `kl_turn`: the KL at each reply's first token (turn_influence.csv), x = turn;
- `a_t`: per sample, 1/0 per scoring window (x = the window's middle in generated tokens,
  (index + 1/2) x window: aligned across samples), single replies;
- `a_k`: per sample, 1/0 per reply of a generated conversation (x = turn).
Per set, each law's out-of-sample error, the chosen law, every parameter with a percentile
bootstrap interval over the units (>= 3 units; fewer: no interval, "cannot tell"), `law_p`: the
chooser's comparison as a test (a paired t-test over the units left out that a floored law
predicts better than decay to zero, Bonferroni over the two floored laws) Holm-adjusted over
every set of the run that has one, before any choice (the run's one false-`settles` budget,
1 - level: bench/laws.py --runs), the floor's one-sided bootstrap p-value (floor <= 0, no finer
than 1 / (draws + 1)), and the floor's difference from policy `none` in the same group.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass

import numpy as np

from harness.analysis import laws as L
from harness.analysis.law_sets import BEHAVIOUR as BEHAVIOUR
from harness.analysis.law_sets import MIN_POINTS, POOLED, CurveSet
from harness.analysis.law_sets import NEXT_TOKEN as NEXT_TOKEN
from harness.analysis.law_sets import Unit as Unit
from harness.analysis.law_sets import frame_units as frame_units
from harness.analysis.law_sets import group_sets as group_sets
from harness.analysis.law_sets import pair_units as pair_units
from harness.analysis.law_verdicts import FLAT_BAND as FLAT_BAND
from harness.analysis.law_verdicts import FLOOR_RULED_OUT as FLOOR_RULED_OUT
from harness.analysis.law_verdicts import VANISH_MIN_UNITS as VANISH_MIN_UNITS
from harness.analysis.law_verdicts import close_floored, floor_p, verdict
from harness.analysis.law_verdicts import fitted_initial as fitted_initial
from harness.stats import DEFAULT_LEVEL
from harness.stats.bootstrap import bootstrap_interval

BASELINE_POLICY = "none"
MIN_UNITS = 3  # fewer units give no interval: the verdict is "cannot tell"


def _seed(s: CurveSet) -> int:
    key = "|".join([*s.ident.values(), s.curve, s.layer_group])
    return zlib.crc32(key.encode())


def _interval(point: float, draws: np.ndarray, n: int, level: float, unit: str) -> dict:
    ci = bootstrap_interval(
        point, draws, n=n, level=level, method=f"percentile-bootstrap over {unit}s",
        min_finite=max(10, len(draws) // 2),
    )  # fmt: skip
    return {"low": ci.low, "high": ci.high}


@dataclass
class Choice:
    """A curve set's law choice: usable points, fits of the mean curve, each law's
    out-of-sample error, the chosen law, and `law_p`: the one-sided p-value that a floored law
    predicts the held-out units better than the power law to zero (`laws.paired_p`: the
    chooser's comparison as a test; NaN with fewer than 3 units)."""

    base: dict
    x: np.ndarray | None = None
    units: np.ndarray | None = None
    fits: dict | None = None
    errors: dict | None = None
    how: str = ""
    chosen: str | None = None
    law_p: float = math.nan
    n_units: int = 0
    reason: str = ""
    per_unit: dict | None = None  # each law's per-unit held-out errors (>= 3 units)


def set_choice(s: CurveSet) -> Choice:
    """The law choice of one curve set (no bootstrap: cheap)."""
    nan = math.nan
    mean = L.mean_curve(s.units)
    usable = np.isfinite(mean) & ((mean > 0) if s.space == "relative" else True)
    n_units = int(np.isfinite(s.units).any(axis=1).sum())
    base = {**s.ident, "curve": s.curve, "layer_group": s.layer_group, "x": s.x_name,
            "n": n_units, "x_min": float(s.x[usable].min()) if usable.any() else nan,
            "x_max": float(s.x[usable].max()) if usable.any() else nan,
            "initial": float(mean[usable][0]) if usable.any() else nan}  # fmt: skip
    if usable.sum() < MIN_POINTS:
        return Choice(base, n_units=n_units, reason=f"fewer than {MIN_POINTS} usable points")
    x, units = s.x[usable], s.units[:, usable]
    fits = {law: L.fit_law(law, x, mean[usable], s.space) for law in L.LAWS}
    errors, how, chosen, law_p, per_unit = choose_law(s, x, units, mean[usable], fits, n_units)
    return Choice(base, x, units, fits, errors, how, chosen, law_p, n_units, per_unit=per_unit)


def set_rows(s: CurveSet, choice: Choice, draws: int, level: float) -> tuple[list[dict], dict]:
    """One row per law of one curve set, and each floored law's bootstrap floors (for the
    policy deltas)."""
    nan = math.nan
    base, n_units = choice.base, choice.n_units
    if choice.fits is None:
        return [_empty(base, law, choice.reason) for law in L.LAWS], {}
    enough = n_units >= MIN_UNITS
    boot = L.boot_params(choice.x, choice.units, s.space, draws, _seed(s)) if enough else {}
    rows, floors = [], {}
    for law in L.LAWS:
        fit = choice.fits[law]
        row = {**base, "law": law, "error": choice.errors[law], "error_method": choice.how,
               "chosen": law == choice.chosen, "rate": float(fit.rate[0]),
               "floor": float(fit.floor[0]), "scale": float(fit.scale[0]),
               "law_p": choice.law_p}  # fmt: skip
        row["floor_share"] = row["floor"] / base["initial"] if base["initial"] else nan
        if law in boot:
            b = boot[law]
            for name in ("rate", "floor"):
                bounds = _interval(row[name], getattr(b, name), n_units, level, s.unit)
                row |= {f"{name}_low": bounds["low"], f"{name}_high": bounds["high"]}
            row["method"] = f"percentile-bootstrap over {n_units} {s.unit}s"
            if law in L.FLOORED:
                row["floor_p"] = floor_p(row["floor"], b.floor)
                floors[law] = (row["floor"], b.floor)
        else:
            row |= {"rate_low": nan, "rate_high": nan, "floor_low": nan, "floor_high": nan,
                    "method": f"none ({n_units} {s.unit}s < {MIN_UNITS})"}  # fmt: skip
        if law == L.LAW_ZERO:
            row |= {"floor_low": nan, "floor_high": nan}
        row.setdefault("floor_p", nan)
        row["reason"] = ""
        rows.append(row)
    return rows, floors


def choose_law(s: CurveSet, x, units, mean, fits: dict, n_units: int):
    """(each law's error, error_method, the chosen law, law_p, per-unit errors or None) of a
    set's usable points:
    behaviour leaving one sample out (>= MIN_UNITS samples), mechanism curves leaving one pair
    out (>= PAIRED_MIN_UNITS pairs, a paired test; docs/performance.md, "Which law?"), else the
    rolling-origin tail. Positive curves take a floored law only with a positive floor. law_p
    is the chooser's comparison as a test over the units left out (>= MIN_UNITS units)."""
    floors = {law: float(fits[law].floor[0]) for law in L.FLOORED}
    if s.behaviour and n_units >= MIN_UNITS:
        errors = L.held_out_errors(x, units, s.space)
        per_unit = L.held_out_unit_errors(x, units, s.space)
        law_p = L.paired_p(per_unit, None)
        return errors, "leave-one-sample-out", L.choose(errors), law_p, per_unit
    per_unit = L.held_out_log_errors(x, units) if not s.behaviour and n_units >= 3 else None
    law_p = L.paired_p(per_unit, floors) if per_unit is not None else math.nan
    if per_unit is not None and n_units >= L.PAIRED_MIN_UNITS:
        with np.errstate(invalid="ignore"):
            errors = {law: float(np.sqrt(np.nanmean(e))) if np.isfinite(e).any() else math.nan
                      for law, e in per_unit.items()}  # fmt: skip
        return errors, "leave-one-pair-out", L.choose_paired(per_unit, floors), law_p, per_unit
    errors = L.tail_errors(x, mean, s.space)
    chosen = L.choose(errors, None if s.behaviour else floors)
    return errors, "tail (second half of x)", chosen, law_p, per_unit


def _empty(base: dict, law: str, reason: str) -> dict:
    nan = math.nan
    fields = ("error", "rate", "rate_low", "rate_high", "floor", "floor_low", "floor_high",
              "floor_share", "scale", "floor_p", "law_p")  # fmt: skip
    return {**base, "law": law, "error_method": "", "chosen": False, **dict.fromkeys(fields, nan),
            "method": f"none ({reason})", "reason": reason}  # fmt: skip


def law_rows(sets: list[CurveSet], draws: int = 500, level: float = DEFAULT_LEVEL) -> list[dict]:
    """laws.csv rows of every curve set: fits, the chooser's test Holm-adjusted over every set
    of the run that has one (before any choice: the run's one false-`settles` budget, 1 -
    level), verdicts and the floors' differences from policy `none` of the same (model, item,
    curve, layer group)."""
    choices = [set_choice(s) for s in sets]
    adjusted = run_holm(choices)
    rows: list[dict] = []
    floors: dict[tuple, dict] = {}
    for s, c, p in zip(sets, choices, adjusted, strict=True):
        these, boot = set_rows(s, c, draws, level)
        for r in these:
            r["law_p_holm"] = p
            r["floor_excludes_zero"] = (bool(r["floor_p"] < 1 - level)
                                        if math.isfinite(r["floor_p"]) else None)  # fmt: skip
        close = close_floored(these, c.per_unit)
        for r in these:
            r["verdict"], why = verdict(r, close, 1 - level) if r["chosen"] else ("", "")
            r["reason"] = r["reason"] or why
        rows += these
        floors[_key(s.ident, s.curve, s.layer_group)] = boot
    for r in rows:
        _delta(r, floors, level)
    return rows


def run_holm(choices: list[Choice]) -> list[float]:
    """Each set's law_p Holm-adjusted over every set of the run with a finite one."""
    return [float(p) for p in L.holm(np.array([c.law_p for c in choices], dtype=np.float64))]


def _key(ident: dict, curve: str, group: str) -> tuple:
    return (ident["model"], ident["item"], ident["policy"], curve, group)


def _delta(row: dict, floors: dict, level: float) -> None:
    """floor_delta: this policy's floor minus policy none's, same law and group, with the
    percentile interval of the difference of independent bootstrap draws (the two policies'
    units are different samples) and its two-sided bootstrap p-value of no difference."""
    nan = math.nan
    row |= {"floor_delta": nan, "floor_delta_low": nan, "floor_delta_high": nan,
            "floor_delta_p": nan}  # fmt: skip
    if row["law"] not in L.FLOORED or row["policy"] in (BASELINE_POLICY, POOLED):
        return
    ident = (row["model"], row["item"])
    mine = floors.get((*ident, row["policy"], row["curve"], row["layer_group"]), {})
    ref = floors.get((*ident, BASELINE_POLICY, row["curve"], row["layer_group"]), {})
    if row["law"] not in mine or row["law"] not in ref:
        return
    (point, draws), (ref_point, ref_draws) = mine[row["law"]], ref[row["law"]]
    row["floor_delta"] = point - ref_point
    ci = _interval(row["floor_delta"], draws - ref_draws, row["n"], level, "unit")
    row |= {"floor_delta_low": ci["low"], "floor_delta_high": ci["high"]}
    diff = (draws - ref_draws)[np.isfinite(draws - ref_draws)]
    if len(diff) >= 10:  # two-sided, no finer than the draws: the report adjusts it (Holm)
        tail = min(np.sum(diff <= 0), np.sum(diff >= 0))
        row["floor_delta_p"] = float(min(1.0, 2 * (1 + tail) / (len(diff) + 1)))
