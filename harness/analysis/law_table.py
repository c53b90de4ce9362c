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
from harness.analysis.fits import layer_groups
from harness.analysis.powerlaw import fit_positions
from harness.probes.precision import resolved
from harness.stats import DEFAULT_LEVEL
from harness.stats.bootstrap import bootstrap_interval

POOLED = "all"
BASELINE_POLICY = "none"
MIN_UNITS = 3  # fewer units give no interval: the verdict is "cannot tell"
MIN_POINTS = 5
# `vanishes` needs the data to rule out a floor this share of the initial value
FLOOR_RULED_OUT = 0.1
# `flat` needs the exponent's interval inside +-FLAT_BAND: over t in [16, 320] an exponent of
# 0.1 moves a curve by 26 %, so a flat reading promises less than that (an interval holding 0
# but wider, e.g. [-0.60, 3.00], is "cannot tell")
FLAT_BAND = 0.1
# `vanishes` rules a floor out with a percentile bootstrap over the units, too narrow over 4
# (256 resamples): 4-pair floors of 10-25 % read `vanishes` in 1-2 % of runs under correlated
# noise (bench/laws.py --noise-models), none from 8
VANISH_MIN_UNITS = 6
NEXT_TOKEN = "next-token"
BEHAVIOUR = "behaviour"


@dataclass
class CurveSet:
    """One curve kind of one group: units (U, n) at x (n,), NaN where a unit has no value."""

    ident: dict  # model, item, policy
    curve: str
    layer_group: str
    x_name: str  # "t" or "turn"
    space: str  # "relative" (mechanism) or "absolute" (behaviour)
    x: np.ndarray
    units: np.ndarray
    unit: str  # "pair" or "sample"

    @property
    def behaviour(self) -> bool:
        return self.space == "absolute"


@dataclass
class Unit:
    """One pair's or sample's curve before grouping: dense over x, or at its own x."""

    model: str
    item: str
    policy: str
    conversation: bool
    curve: str
    layer_group: str
    x: np.ndarray
    y: np.ndarray


def pair_units(model: str, record, arrays: dict, t_min: int | None = None) -> list[Unit]:
    """A probed pair's positional mechanism curves (dense t = 1..T); none when its two prompts
    are identical. A conversation's curves keep only its replies' positions."""
    if bool(arrays.get("identical", False)):
        return []
    # below float32: positions under the rounding floor are NaN; with t_min, a curve the cut
    # leaves under half a decade of t is NaN throughout (`precision.resolved`)
    arrays = resolved(arrays, t_min)
    kl = np.asarray(arrays["kl"], dtype=np.float64)
    t = np.arange(1, kl.shape[0] + 1)
    mask = np.ones(kl.shape[0], dtype=bool)
    if record.is_conversation:
        mask[:] = False
        mask[[p for p in record.generated_positions() if p < mask.shape[0]]] = True
    out = []
    base = dict(model=model, item=record.item, policy=record.policy,
                conversation=record.is_conversation)  # fmt: skip

    def add(curve: str, group: str, y: np.ndarray) -> None:
        out.append(Unit(**base, curve=curve, layer_group=group, x=t, y=np.where(mask, y, np.nan)))

    layers = np.asarray(arrays["layers"]).tolist()
    rel = np.asarray(arrays["rel_l2"], dtype=np.float64)
    for name, members in layer_groups(layers):
        add("rel_l2", name, rel[[layers.index(m) for m in members]].mean(axis=0))
    add("kl", NEXT_TOKEN, kl)
    if "attn_layers" in arrays and len(np.asarray(arrays["attn_layers"])):
        attn = np.asarray(arrays["attn_layers"]).tolist()
        share = np.asarray(arrays["share_prompt_mean"], dtype=np.float64)
        for name, members in layer_groups(attn):
            add("share_prompt_mean", name, share[[attn.index(m) for m in members]].mean(axis=0))
    return out


def frame_units(frame, curve: str, x_col: str, y_col: str, group: str, conversation: bool):
    """Units of a per-sample long frame (model, item, policy, sample, x, y)."""
    if frame is None or frame.empty:
        return []
    out = []
    for (model, item, policy, _), rows in frame.groupby(
        ["model", "item", "policy", "sample"], sort=True
    ):
        rows = rows.sort_values(x_col)
        out.append(
            Unit(model, item, policy, conversation, curve, group,
                 rows[x_col].to_numpy(np.float64), rows[y_col].to_numpy(np.float64))
        )  # fmt: skip
    return out


def group_sets(units: list[Unit], t_min: int) -> list[CurveSet]:
    """Curve sets per condition, then pooled per (model, policy) and per model: positional
    curves pool single replies only, per-turn curves pool conversations."""
    groups: dict[tuple, list[Unit]] = {}
    for u in units:
        kind = (u.curve, u.layer_group)
        groups.setdefault((u.model, u.item, u.policy, *kind), []).append(u)
        dense = u.curve not in ("kl_turn", "a_k", "a_t")
        if dense and u.conversation:
            continue
        groups.setdefault((u.model, POOLED, u.policy, *kind), []).append(u)
        groups.setdefault((u.model, POOLED, POOLED, *kind), []).append(u)
    sets = []
    seen = {key[3:]: i for i, key in reversed(list(enumerate(groups)))}  # curves as found
    order = sorted(groups, key=lambda k: (k[0], k[1] == POOLED, k[1], k[2], seen[k[3:]]))
    for model, item, policy, curve, group in order:
        members = groups[(model, item, policy, curve, group)]
        if item == POOLED and len({(m.item, m.policy) for m in members}) < 2:
            continue  # the pool is one condition: its row already exists
        built = _stack(members, t_min)
        if built is None:
            continue
        x, ys = built
        sets.append(
            CurveSet(
                {"model": model, "item": item, "policy": policy}, curve, group,
                "turn" if curve in ("kl_turn", "a_k") else "t",
                "absolute" if curve.startswith("a_") else "relative", x, ys,
                "sample" if curve.startswith("a_") else "pair",
            )
        )  # fmt: skip
    return sets


def _stack(members: list[Unit], t_min: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(x, units) of a group: dense curves (t = 1..T) cut to the shortest and taken at the fit
    grid; turns and windows on the union of their x."""
    if members[0].curve in ("kl_turn", "a_k", "a_t"):
        x = np.unique(np.concatenate([m.x for m in members]))
        ys = np.full((len(members), len(x)), np.nan)
        for i, m in enumerate(members):
            ys[i, np.searchsorted(x, m.x)] = m.y
        return x, ys
    if not all(np.array_equal(m.x, np.arange(1, len(m.y) + 1)) for m in members):
        # rows read back from a CSV (a few positions each): the positions >= t_min all share
        shared = set.intersection(*(set(m.x.tolist()) for m in members))
        x = np.array(sorted(v for v in shared if v >= t_min), dtype=np.float64)
        if len(x) < MIN_POINTS:
            return None
        return x, np.stack([m.y[np.searchsorted(m.x, x)] for m in members])
    common = min(len(m.y) for m in members)
    grid = fit_positions(t_min, common)
    if len(grid) < MIN_POINTS:
        return None
    return grid.astype(np.float64), np.stack([m.y[grid - 1] for m in members])


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


def close_floored(rows: list[dict], per_unit: dict | None = None) -> list[dict]:
    """The floored laws of one set within the chooser's tolerance of the best law: those the
    units left out cannot tell from it (`laws.paired_rivals`, >= 3 units), else those whose
    error is <= best / (1 - MARGIN). `vanishes` must rule out every one of their floors."""
    if per_unit is not None:
        rivals = L.paired_rivals(per_unit)
        return [r for r in rows if r["law"] in rivals]
    finite = [r["error"] for r in rows if math.isfinite(r["error"])]
    if not finite:
        return []
    bar = min(finite) / (1.0 - L.MARGIN)
    return [r for r in rows if r["law"] in L.FLOORED and math.isfinite(r["error"])
            and r["error"] <= bar]  # fmt: skip


def verdict(row: dict, close: list[dict], alpha: float) -> tuple[str, str]:
    """(verdict, reason) of a chosen row: `vanishes` (power law to zero, exponent interval
    above 0, >= VANISH_MIN_UNITS units, and every floored law in `close` rules out a floor of
    FLOOR_RULED_OUT of its fitted initial value), `settles` (a floored law falling to its
    floor: rate and scale above 0, the chooser's test Holm-adjusted over the run below
    `alpha`, and the floor's interval above zero), `flat` (the exponent's interval inside
    +-FLAT_BAND), `grows` (interval below 0), else `cannot tell` with the reason."""
    if not math.isfinite(row["rate_low"]):
        return "cannot tell", f"no interval ({row['method']})"
    lo, hi = row["rate_low"], row["rate_high"]
    if row["law"] == L.LAW_ZERO:
        if hi < 0:
            return "grows", ""
        if lo <= 0:
            if lo >= -FLAT_BAND and hi <= FLAT_BAND:
                return "flat", ""
            return "cannot tell", (f"the exponent's interval [{lo:.2f}, {hi:.2f}] holds 0 but "
                                   f"is not inside the flat band +-{FLAT_BAND}")  # fmt: skip
        if row["n"] < VANISH_MIN_UNITS:
            return "cannot tell", (f"a decay, but {row['n']} units are too few to rule a floor "
                                   f"out (>= {VANISH_MIN_UNITS})")  # fmt: skip
        for f in close:
            bar = FLOOR_RULED_OUT * fitted_initial(f)
            if not (math.isfinite(f["floor_high"]) and f["floor_high"] < bar):
                return "cannot tell", (
                    f"{f['law']} predicts as well as the data can tell from the best law and "
                    f"its floor interval reaches {_sig(f['floor_high'])}, not below "
                    f"{FLOOR_RULED_OUT:.0%} of the initial value ({_sig(bar)})")  # fmt: skip
        if not close:
            return "cannot tell", "no floored law could be fitted to rule a floor out"
        return "vanishes", ""
    if not (row["rate"] > 0 and row["scale"] > 0):
        return "cannot tell", "the floored law does not fall to its floor (rate or scale <= 0)"
    p = row["law_p_holm"]
    if not (math.isfinite(p) and p < alpha):
        return "cannot tell", (f"the floored law's gain over decay to zero has Holm-adjusted "
                               f"p = {_sig(p)}, not below {alpha:g}")  # fmt: skip
    if not (row["floor_p"] < alpha):
        return "cannot tell", f"the floor's interval reaches 0 (floor_p = {_sig(row['floor_p'])})"
    return "settles", ""


def fitted_initial(row: dict) -> float:
    """A fitted law's value at x_min: the scale the floor is measured against (the mean curve's
    first point carries that point's noise; a heavy-tailed draw there made a 10 % floor look
    like 8 %)."""
    shape = 1.0 if row["law"] == L.LAW_EQUILIBRIUM else row["x_min"] ** -row["rate"]
    return row["floor"] + row["scale"] * shape


def _sig(v: float) -> str:
    return f"{v:.2g}" if math.isfinite(v) else "n/a"


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
