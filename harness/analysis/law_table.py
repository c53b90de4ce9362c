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
bootstrap interval over the units (>= 3 units; fewer: no interval, "cannot tell"), the floor's
one-sided p-value (floor <= 0, the draws' normal approximation) Holm-adjusted over every tested
set of the run (the chosen law's floor), and the floor's difference from policy `none` in the
same group.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass

import numpy as np
from scipy import stats

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


def pair_units(model: str, record, arrays: dict) -> list[Unit]:
    """A probed pair's positional mechanism curves (dense t = 1..T); none when its two prompts
    are identical. A conversation's curves keep only its replies' positions."""
    if bool(arrays.get("identical", False)):
        return []
    arrays = resolved(arrays)  # below float32: positions under the rounding floor are NaN
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


def set_rows(s: CurveSet, draws: int, level: float) -> tuple[list[dict], dict]:
    """One row per law of one curve set, and each floored law's bootstrap floors (for the
    policy deltas)."""
    nan = math.nan
    mean = L.mean_curve(s.units)
    usable = np.isfinite(mean) & ((mean > 0) if s.space == "relative" else True)
    n_units = int(np.isfinite(s.units).any(axis=1).sum())
    base = {**s.ident, "curve": s.curve, "layer_group": s.layer_group, "x": s.x_name,
            "n": n_units, "x_min": float(s.x[usable].min()) if usable.any() else nan,
            "x_max": float(s.x[usable].max()) if usable.any() else nan,
            "initial": float(mean[usable][0]) if usable.any() else nan}  # fmt: skip
    if usable.sum() < MIN_POINTS:
        reason = f"fewer than {MIN_POINTS} usable points"
        return [_empty(base, law, reason) for law in L.LAWS], {}
    x, units = s.x[usable], s.units[:, usable]
    fits = {law: L.fit_law(law, x, mean[usable], s.space) for law in L.LAWS}
    errors, how, chosen = choose_law(s, x, units, mean[usable], fits, n_units)
    boot = L.boot_params(x, units, s.space, draws, _seed(s)) if n_units >= MIN_UNITS else {}
    rows, floors = [], {}
    for law in L.LAWS:
        fit = fits[law]
        row = {**base, "law": law, "error": errors[law], "error_method": how,
               "chosen": law == chosen, "rate": float(fit.rate[0]),
               "floor": float(fit.floor[0]), "scale": float(fit.scale[0])}  # fmt: skip
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
    """(each law's error, error_method, the chosen law) of a set's usable points: behaviour
    leaving one sample out (>= MIN_UNITS samples), mechanism curves leaving one pair out
    (>= PAIRED_MIN_UNITS pairs, a paired test; docs/performance.md, "Which law?"), else the
    rolling-origin tail. Positive curves take a floored law only with a positive floor."""
    if s.behaviour and n_units >= MIN_UNITS:
        errors = L.held_out_errors(x, units, s.space)
        return errors, "leave-one-sample-out", L.choose(errors)
    floors = {law: float(fits[law].floor[0]) for law in L.FLOORED}
    if not s.behaviour and n_units >= L.PAIRED_MIN_UNITS:
        per_unit = L.held_out_log_errors(x, units)
        with np.errstate(invalid="ignore"):
            errors = {law: float(np.sqrt(np.nanmean(e))) if np.isfinite(e).any() else math.nan
                      for law, e in per_unit.items()}  # fmt: skip
        return errors, "leave-one-pair-out", L.choose_paired(per_unit, floors)
    errors = L.tail_errors(x, mean, s.space)
    return errors, "tail (second half of x)", L.choose(errors, None if s.behaviour else floors)


def floor_p(floor: float, draws: np.ndarray) -> float:
    """One-sided p-value of floor <= 0 from the bootstrap's normal approximation (z = floor /
    the draws' sd): continuous, so Holm over many curves is not bounded by 1 / draws."""
    good = draws[np.isfinite(draws)]
    if len(good) < 10 or not math.isfinite(floor):
        return math.nan
    sd = float(good.std(ddof=1))
    if sd == 0:
        return 0.0 if floor > 0 else 1.0
    return float(stats.norm.sf(floor / sd))


def _empty(base: dict, law: str, reason: str) -> dict:
    nan = math.nan
    fields = ("error", "rate", "rate_low", "rate_high", "floor", "floor_low", "floor_high",
              "floor_share", "scale", "floor_p")  # fmt: skip
    return {**base, "law": law, "error_method": "", "chosen": False, **dict.fromkeys(fields, nan),
            "method": f"none ({reason})", "reason": reason}  # fmt: skip


def verdict(row: dict, floored: list[dict] | None = None) -> str:
    """What the chosen law says of the curve: `vanishes` (power law to zero, exponent above 0,
    and the better-predicting floored law of the same curve, `floored`, rules out a floor of
    FLOOR_RULED_OUT of the initial value: its floor interval ends below it), `settles` (a
    floored law whose floor excludes zero after Holm), `flat` (the power law's exponent
    interval holds 0), `grows`, or `cannot tell` (no interval, a floor that does not exclude
    zero, or a decay whose floor the data cannot rule out: bench/laws.py shows floors chosen as
    decays at these noise levels)."""
    if not row["chosen"] or not math.isfinite(row["rate_low"]):
        return "cannot tell"
    if row["law"] == L.LAW_ZERO:
        if row["rate_high"] < 0:
            return "grows"
        if row["rate_low"] <= 0:
            return "flat"
        highs = [r.get("floor_high", math.nan) for r in floored or []]
        ruled_out = bool(highs) and all(
            math.isfinite(h) and h < FLOOR_RULED_OUT * row["initial"] for h in highs
        )
        return "vanishes" if ruled_out else "cannot tell"
    return "settles" if row["floor_excludes_zero"] is True else "cannot tell"


def law_rows(sets: list[CurveSet], draws: int = 500, level: float = DEFAULT_LEVEL) -> list[dict]:
    """laws.csv rows of every curve set: fits, Holm over the chosen floors, verdicts and the
    floors' differences from policy `none` of the same (model, item, curve, layer group)."""
    rows: list[dict] = []
    floors: dict[tuple, dict] = {}
    for s in sets:
        these, boot = set_rows(s, draws, level)
        rows += these
        floors[_key(s.ident, s.curve, s.layer_group)] = boot
    tested = [i for i, r in enumerate(rows) if r["chosen"] and r["law"] in L.FLOORED]
    adjusted = L.holm(np.array([rows[i]["floor_p"] for i in tested], dtype=np.float64))
    for r in rows:
        r["floor_p_holm"], r["floor_excludes_zero"] = math.nan, None
    for i, p in zip(tested, adjusted, strict=True):
        if math.isfinite(p):
            rows[i]["floor_p_holm"] = float(p)
            rows[i]["floor_excludes_zero"] = bool(p < 1 - level)
    by_set = {(*_key(r, r["curve"], r["layer_group"]), r["law"]): r for r in rows}
    for r in rows:
        same = _key(r, r["curve"], r["layer_group"])
        floored = [by_set[(*same, law)] for law in L.FLOORED if (*same, law) in by_set]
        finite = [f for f in floored if math.isfinite(f["error"])]
        # the floored law that predicts the tail better is the one whose floor must be ruled out
        best = [min(finite, key=lambda f: f["error"])] if finite else []
        r["verdict"] = verdict(r, best) if r["chosen"] else ""
        _delta(r, floors, level)
    return rows


def _key(ident: dict, curve: str, group: str) -> tuple:
    return (ident["model"], ident["item"], ident["policy"], curve, group)


def _delta(row: dict, floors: dict, level: float) -> None:
    """floor_delta: this policy's floor minus policy none's, same law and group, with the
    percentile interval of the difference of independent bootstrap draws (the two policies'
    units are different samples)."""
    nan = math.nan
    row |= {"floor_delta": nan, "floor_delta_low": nan, "floor_delta_high": nan}
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
