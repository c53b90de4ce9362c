"""laws.csv: every mechanism and behaviour curve of a run against the three laws of
`harness.analysis.laws` (docs/architecture.md, "Estimators: laws").

The curve sets (units, groups, the curves): `harness.analysis.law_sets`.
Per set, each law's out-of-sample error, the chosen law, every parameter with a percentile
bootstrap interval over the units (>= 3 units; fewer: no interval, "cannot tell"), `law_p`: the
chooser's comparison as a test (mechanism: a sign-flip test over the pairs left out that a
floored law with a floor of at least FLOOR_RULED_OUT of its initial value predicts better than
both decays to zero, power and exponential, Bonferroni over the two floored laws; behaviour:
the binomial floor test, `law_binomial`) Holm-adjusted over every set of the run that has one,
before any choice (the run's one false-`settles` budget,
1 - level: bench/laws.py --runs), the floor's one-sided bootstrap p-value (floor <= 0, no finer
than 1 / (draws + 1)), and the floor's difference from policy `none` in the same group.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass

import numpy as np

from harness.analysis import law_binomial as LB
from harness.analysis import laws as L
from harness.analysis.law_sets import MIN_POINTS, POOLED, CurveSet
from harness.analysis.law_verdict import close_floored, run_share, run_widening, verdict
from harness.stats import DEFAULT_LEVEL
from harness.stats.adjust import holm
from harness.stats.bootstrap import bootstrap_interval

BASELINE_POLICY = "none"
MIN_UNITS = 3  # fewer units give no interval: the verdict is "cannot tell"


def _seed(s: CurveSet) -> int:
    # one rule's set also keys its rule; an all-rules set keeps the seed it always had
    ident = [s.ident["model"], s.ident["item"], s.ident["policy"]]
    rule = s.ident.get("rule", "")
    key = "|".join([*ident, *([rule] if rule else []), s.curve, s.layer_group])
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


def set_choice(s: CurveSet, test_draws: int = LB.MIN_TEST_DRAWS) -> Choice:
    """The law choice of one curve set (no bootstrap over units; a behaviour set's floor test
    makes up to `test_draws` parametric draws: `law_binomial.floor_test`)."""
    nan = math.nan
    mean = L.mean_curve(s.units)
    usable = np.isfinite(mean) & ((mean > 0) if s.space == "relative" else True)
    n_units = int(np.isfinite(s.units).any(axis=1).sum())
    base = {"rule": "", **s.ident, "curve": s.curve, "layer_group": s.layer_group, "x": s.x_name,
            "n": n_units, "x_min": float(s.x[usable].min()) if usable.any() else nan,
            "x_max": float(s.x[usable].max()) if usable.any() else nan,
            "initial": float(mean[usable][0]) if usable.any() else nan}  # fmt: skip
    if usable.sum() < MIN_POINTS:
        return Choice(base, n_units=n_units, reason=f"fewer than {MIN_POINTS} usable points")
    x, units = s.x[usable], s.units[:, usable]
    if s.behaviour and n_units >= MIN_UNITS:
        return _behaviour_choice(s, base, x, units, n_units, test_draws)
    fits = {law: L.fit_law(law, x, mean[usable], s.space) for law in L.LAWS}
    errors, how, chosen, law_p, per_unit = choose_law(s, x, units, mean[usable], fits, n_units)
    return Choice(base, x, units, fits, errors, how, chosen, law_p, n_units, per_unit=per_unit)


def _behaviour_choice(s: CurveSet, base, x, units, n_units: int, test_draws: int) -> Choice:
    """A behaviour set's choice (>= MIN_UNITS samples): the laws fitted by binomial
    likelihood, the floored law of the floor test (`law_binomial.floor_test`) chosen when its
    p-value is below PAIRED_LEVEL, and that p-value as law_p; each law's error the held-out
    samples' mean deviance (the column's out-of-sample error, and the rivals' screen of
    `vanishes`)."""
    test = LB.floor_test(x, units, test_draws, _seed(s))
    fits = {law: test.fits[law] for law in L.LAWS}
    per_unit = L.held_out_unit_deviance(x, units)
    with np.errstate(invalid="ignore"):
        errors = {law: float(np.nanmean(per_unit[law])) for law in L.LAWS}
    chosen = test.law if test.law is not None and test.p < L.PAIRED_LEVEL else L.LAW_ZERO
    how = "leave-one-sample-out"
    return Choice(base, x, units, fits, errors, how, chosen, test.p, n_units, per_unit=per_unit)


def set_rows(s: CurveSet, choice: Choice, draws: int, level: float) -> tuple[list[dict], dict]:
    """One row per law of one curve set, and each floored law's bootstrap floors (for the
    policy deltas)."""
    nan = math.nan
    base, n_units = choice.base, choice.n_units
    if choice.fits is None:
        return [_empty(base, law, choice.reason) for law in L.LAWS], {}
    enough = n_units >= MIN_UNITS
    boot = {}
    if enough:
        boot = (LB.boot_binomial(choice.x, choice.units, draws, _seed(s)) if s.behaviour
                else L.boot_params(choice.x, choice.units, s.space, draws, _seed(s)))  # fmt: skip
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
    set's usable points (a behaviour set of >= MIN_UNITS samples: `_behaviour_choice`):
    mechanism curves leaving one pair out (>= PAIRED_MIN_UNITS pairs, a paired test;
    docs/performance.md, "Which law?"), else the rolling-origin tail. Positive curves take a
    floored law only with a positive floor. law_p is the chooser's comparison as a test over
    the units left out (>= MIN_UNITS units)."""
    floors = {law: float(fits[law].floor[0]) for law in L.FLOORED}
    # a floored law that rises to its "floor" is a rise: it is no candidate (a 2x linear rise
    # of a(t) was fitted as an equilibrium above it, then could read nothing but `cannot tell`)
    falling = {law: f if fits[law].scale[0] > 0 and fits[law].rate[0] > 0 else math.nan
               for law, f in floors.items()}  # fmt: skip
    # law_p weighs only floors that matter, as `settles` does: with floors of ~1 % candidates, a
    # 100x exponential drop (correlated noise, 16 pairs) read P(law_p < 0.05) = 0.10
    matters = {law: f if f >= L.FLOOR_RULED_OUT * L.initial_value(law, fits[law], x.min())[0]
               else math.nan for law, f in falling.items()}  # fmt: skip
    per_unit = L.held_out_log_errors(x, units) if not s.behaviour and n_units >= 3 else None
    law_p = L.paired_p(per_unit, matters) if per_unit is not None else math.nan
    if per_unit is not None and n_units >= L.PAIRED_MIN_UNITS:
        with np.errstate(invalid="ignore"):
            errors = {law: float(np.sqrt(np.nanmean(e))) if np.isfinite(e).any() else math.nan
                      for law, e in per_unit.items() if law in L.LAWS}  # fmt: skip
        return errors, "leave-one-pair-out", L.choose_paired(per_unit, falling), law_p, per_unit
    errors = L.tail_errors(x, mean, s.space)
    chosen = L.choose(errors, None if s.behaviour else floors)
    return errors, "tail (second half of x)", chosen, law_p, per_unit


def floor_p(floor: float, draws: np.ndarray) -> float:
    """One-sided p-value of floor <= 0 from the bootstrap draws: (1 + the draws at or below 0)
    / (draws + 1), no finer than the draws can support (a normal tail extrapolated from 200
    draws gave 1e-63, and 0 when the draws did not vary)."""
    good = draws[np.isfinite(draws)]
    if len(good) < 10 or not math.isfinite(floor):
        return math.nan
    return float((1 + np.sum(good <= 0)) / (len(good) + 1))


def _empty(base: dict, law: str, reason: str) -> dict:
    nan = math.nan
    fields = ("error", "rate", "rate_low", "rate_high", "floor", "floor_low", "floor_high",
              "floor_share", "scale", "floor_p", "law_p")  # fmt: skip
    return {**base, "law": law, "error_method": "", "chosen": False, **dict.fromkeys(fields, nan),
            "method": f"none ({reason})", "reason": reason}  # fmt: skip


def law_rows(sets: list[CurveSet], draws: int = 500, level: float = DEFAULT_LEVEL) -> list[dict]:
    """laws.csv rows of every curve set: fits, the chooser's test Holm-adjusted over every set
    of the run that has one (before any choice: the run's one false-`settles` budget, 1 -
    level; the sets of one rule alone are a second family, adjusted among themselves, so the
    all-rules rows read as they would without them), verdicts and the floors' differences from
    policy `none` of the same (model, item, rule, curve, layer group)."""
    alpha = 1 - level
    test_draws = LB.max_draws(len(sets), alpha)
    choices = [set_choice(s, test_draws) for s in sets]
    adjusted = [math.nan] * len(sets)
    family_sets = [1] * len(sets)  # sets with an interval in each set's family
    for per_rule in (False, True):
        family = [i for i, s in enumerate(sets) if bool(s.ident.get("rule")) == per_rule]
        for i, p in zip(family, run_holm([choices[i] for i in family]), strict=True):
            adjusted[i] = p
        with_interval = [i for i in family if choices[i].n_units >= MIN_UNITS]
        for i in family:
            family_sets[i] = len(with_interval)
    rows: list[dict] = []
    floors: dict[tuple, dict] = {}
    for s, c, p, m in zip(sets, choices, adjusted, family_sets, strict=True):
        these, boot = set_rows(s, c, draws, level)
        for r in these:
            r["law_p_holm"] = p
            r["floor_excludes_zero"] = (bool(r["floor_p"] < 1 - level)
                                        if math.isfinite(r["floor_p"]) else None)  # fmt: skip
        close = close_floored(these, c.per_unit, run_share(alpha, m))
        widen = run_widening(alpha, m)
        for r in these:
            r["verdict"], why = verdict(r, close, alpha, widen) if r["chosen"] else ("", "")
            r["reason"] = r["reason"] or why
        rows += these
        floors[_key(s.ident, s.curve, s.layer_group)] = boot
    for r in rows:
        _delta(r, floors, level)
    return rows


def run_holm(choices: list[Choice]) -> list[float]:
    """Each set's law_p Holm-adjusted over every set of the run with a finite one."""
    return [float(p) for p in holm(np.array([c.law_p for c in choices], dtype=np.float64))]


def _key(ident: dict, curve: str, group: str) -> tuple:
    return (ident["model"], ident["item"], ident["policy"], ident.get("rule", ""), curve, group)


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
    kind = (row.get("rule", ""), row["curve"], row["layer_group"])
    mine = floors.get((*ident, row["policy"], *kind), {})
    ref = floors.get((*ident, BASELINE_POLICY, *kind), {})
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
