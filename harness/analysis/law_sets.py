"""The curve sets laws.csv fits (`harness.analysis.law_table`): units and their groups.

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
A behaviour curve of one rule alone (`rule`, for an item with several rules) is fitted per
condition only: rule names are an item's own.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.analysis.fits import layer_groups
from harness.analysis.powerlaw import fit_positions
from harness.probes.precision import resolved

POOLED = "all"
MIN_POINTS = 5
NEXT_TOKEN = "next-token"
BEHAVIOUR = "behaviour"


@dataclass
class CurveSet:
    """One curve kind of one group: units (U, n) at x (n,), NaN where a unit has no value."""

    ident: dict  # model, item, policy, rule ("": all rules)
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
    rule: str = ""  # a behaviour curve of one rule alone; "": all rules


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


def frame_units(
    frame, curve: str, x_col: str, y_col: str, group: str, conversation: bool, rule: str = ""
):
    """Units of a per-sample long frame (model, item, policy, sample, x, y); `rule`: the one
    rule they judge ("": all rules)."""
    if frame is None or frame.empty:
        return []
    out = []
    for (model, item, policy, _), rows in frame.groupby(
        ["model", "item", "policy", "sample"], sort=True
    ):
        rows = rows.sort_values(x_col)
        out.append(
            Unit(model, item, policy, conversation, curve, group,
                 rows[x_col].to_numpy(np.float64), rows[y_col].to_numpy(np.float64), rule)
        )  # fmt: skip
    return out


def group_sets(units: list[Unit], t_min: int) -> list[CurveSet]:
    """Curve sets per condition, then pooled per (model, policy) and per model: positional
    curves pool single replies only, per-turn curves pool conversations; one rule's curves
    stay per condition (rule names are an item's own)."""
    groups: dict[tuple, list[Unit]] = {}
    for u in units:
        kind = (u.curve, u.layer_group, u.rule)
        groups.setdefault((u.model, u.item, u.policy, *kind), []).append(u)
        dense = u.curve not in ("kl_turn", "a_k", "a_t")
        if (dense and u.conversation) or u.rule:
            continue
        groups.setdefault((u.model, POOLED, u.policy, *kind), []).append(u)
        groups.setdefault((u.model, POOLED, POOLED, *kind), []).append(u)
    sets = []
    seen = {key[3:]: i for i, key in reversed(list(enumerate(groups)))}  # curves as found
    order = sorted(groups, key=lambda k: (k[0], k[1] == POOLED, k[1], k[2], seen[k[3:]]))
    for model, item, policy, curve, group, rule in order:
        members = groups[(model, item, policy, curve, group, rule)]
        if item == POOLED and len({(m.item, m.policy) for m in members}) < 2:
            continue  # the pool is one condition: its row already exists
        built = _stack(members, t_min)
        if built is None:
            continue
        x, ys = built
        sets.append(
            CurveSet(
                {"model": model, "item": item, "policy": policy, "rule": rule}, curve, group,
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
