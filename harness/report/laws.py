"""The report part "Does the prompt's grip vanish or settle?": laws.csv per model and
condition, the mechanism's verdict (the theorem predicts decay to zero) beside behaviour's (it
may settle, carried by the text), the curves with their chosen law, and the floors' policy
deltas. Every sentence is computed from laws.csv."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from harness.analysis.fits import layer_groups
from harness.analysis.law_verdict import FLAT_BAND, FLOOR_RULED_OUT, VANISH_MIN_UNITS
from harness.analysis.laws import LAW_EQUILIBRIUM, LAW_ZERO
from harness.analysis.laws import MARGIN as L_MARGIN
from harness.analysis.single_turn import comparison
from harness.report.html import esc, figure, fmt_num, fold, note, table
from harness.report.load import RunData
from harness.report.plots import _layout, color
from harness.stats import DEFAULT_LEVEL
from harness.stats.adjust import holm
from harness.stats.text import interval_text

POOLED = "all"
BASELINE = "none"
MECHANISM = ("rel_l2", "kl", "share_prompt_mean", "kl_turn")
BEHAVIOUR = ("a_t", "a_k")
CURVE_NAMES = {
    "rel_l2": "hidden-state divergence",
    "kl": "next-token KL",
    "share_prompt_mean": "attention share",
    "kl_turn": "KL per turn",
    "a_t": "a(t)",
    "a_k": "a(k)",
}
LAW_NAMES = {"power-zero": "power law to zero", "power-floor": "power law to a floor",
             "exp-equilibrium": "exponential to an equilibrium"}  # fmt: skip


def _label(row) -> str:
    name = CURVE_NAMES.get(row["curve"], row["curve"])
    group = str(row["layer_group"])
    return f"{name}, {group}" if row["curve"] in ("rel_l2", "share_prompt_mean") else name


def _pct(v: float) -> str:
    """A share in percent to two significant digits: a 1 % floor is not "[0 %, 2 %]"."""
    text = np.format_float_positional(100 * v, precision=2, unique=True, fractional=False, trim="-")
    return f"{text} %"


def _ci(value: float, low: float, high: float, pct: bool = False) -> str:
    f = _pct if pct else (lambda v: fmt_num(v, 2))
    if not math.isfinite(value):
        return "–"
    if not (math.isfinite(low) and math.isfinite(high)):
        return f(value)
    return interval_text(value, low, high, f)


KL_CURVES = ("kl", "kl_turn")
UNVALIDATED = "unvalidated: no recovery figure backs KL readings"


def key_number(row) -> str:
    """The chosen law's key number with its interval: the exponent of a power law to zero, the
    floor's share of the initial value (and an exponential's rate) of a floored law."""
    rate = _ci(row["rate"], row["rate_low"], row["rate_high"])
    if row["law"] == LAW_ZERO:
        return f"α = {rate}"
    lo, hi, init = row["floor_low"], row["floor_high"], row["initial"]
    floor = _ci(row["floor_share"], lo / init if init else math.nan,
                hi / init if init else math.nan, True)  # fmt: skip
    text = f"floor {floor} of the initial value"
    if row["law"] == LAW_EQUILIBRIUM:
        text += f", rate {rate} per {row['x']}"
    return text


def reading(row) -> str:
    """One curve's chosen law in words, with its numbers (KL readings marked unvalidated)."""
    law = LAW_NAMES.get(row["law"], row["law"])
    caveat = f"; {UNVALIDATED}" if row["curve"] in KL_CURVES else ""
    return f"{row['verdict']} ({law}, {key_number(row)}{caveat})"


def model_sentence(model: str, rows: pd.DataFrame) -> str:
    """What the model's curves under policy none say: mechanism per layer group, then
    behaviour (`rows`: baseline_rows of the model)."""
    mech = [f"{_label(r)}: {reading(r)}" for _, r in rows.iterrows() if r["curve"] in MECHANISM]
    beh = [f"{_label(r)}: {reading(r)}" for _, r in rows.iterrows() if r["curve"] in BEHAVIOUR]
    pool = _pool(rows)
    text = f"On {model}, policy none ({pool}), the mechanism: " + ("; ".join(mech) or "not probed")
    if beh:
        text += ". Behaviour: " + "; ".join(beh)
    return text + "."


def _pool(rows: pd.DataFrame) -> str:
    items = sorted(set(rows["item"]))
    return "pooled over its items" if items == [POOLED] else "items " + ", ".join(items)


def baseline_rows(laws: pd.DataFrame) -> pd.DataFrame:
    """The chosen rows of policy none per model and curve: pooled over the items (item `all`)
    where that pool exists, else each item's own row. Reminder policies are kept apart."""
    chosen = laws[laws["chosen"].astype(bool) & (laws["policy"] == BASELINE)]
    out = []
    for _, rows in chosen.groupby(["model", "curve", "layer_group"], sort=False):
        wide = rows[rows["item"] == POOLED]
        out.append(wide if len(wide) else rows)
    return pd.concat(out) if out else chosen


def policy_rows(laws: pd.DataFrame) -> pd.DataFrame:
    """The chosen rows of each reminder policy, pooled over the items where that pool exists."""
    chosen = laws[laws["chosen"].astype(bool) & ~laws["policy"].isin((BASELINE, POOLED))]
    out = []
    for _, rows in chosen.groupby(["model", "policy", "curve", "layer_group"], sort=False):
        wide = rows[rows["item"] == POOLED]
        out.append(wide if len(wide) else rows)
    return pd.concat(out) if out else chosen


def answer_table(rows: pd.DataFrame, by_policy: bool = False) -> str:
    """Per curve: verdict, law, the key number with its interval, units, and why a verdict
    is `cannot tell`."""
    headers = [*(["policy"] if by_policy else []), "curve", "item", "units", "verdict", "law",
               "key number [interval]", "why"]  # fmt: skip
    body = []
    for _, r in rows.iterrows():
        why = str(r.get("reason", "") or "")
        if r["curve"] in KL_CURVES:
            why = f"{why}; {UNVALIDATED}" if why else UNVALIDATED
        law = LAW_NAMES.get(r["law"], r["law"])
        cells = [_label(r), r["item"], int(r["n"]), r["verdict"], law, key_number(r), why]
        body.append([r["policy"], *cells] if by_policy else cells)
    return table(headers, body)


def delta_sentence(laws: pd.DataFrame, alpha: float) -> tuple[str, list[list]]:
    """Do reminder policies lower a floor or an equilibrium? The chosen floored law's
    floor_delta against policy none, per curve, with its interval; "lowers" / "raises" only
    where its p-value, Holm-adjusted over every delta of the run, is below alpha."""
    rows = laws[laws["chosen"].astype(bool) & np.isfinite(laws["floor_delta"].astype(float))]
    p = rows["floor_delta_p"].astype(float).to_numpy() if len(rows) else np.zeros(0)
    adjusted = holm(p)
    table_rows, lower, higher, told = [], 0, 0, 0
    for (_, r), q in zip(rows.iterrows(), adjusted, strict=True):
        lo, hi = float(r["floor_delta_low"]), float(r["floor_delta_high"])
        word = "cannot tell (too few units)"
        if math.isfinite(q):
            told += 1
            decided = q < alpha
            word = (("lowers" if r["floor_delta"] < 0 else "raises") if decided
                    else f"cannot tell (Holm-adjusted p = {q:.2g})")  # fmt: skip
            lower += decided and r["floor_delta"] < 0
            higher += decided and r["floor_delta"] > 0
        table_rows.append([r["model"], r["item"], r["policy"], _label(r),
                           LAW_NAMES.get(r["law"], r["law"]),
                           _ci(float(r["floor_delta"]), lo, hi), word])  # fmt: skip
    if not table_rows:
        return ("No policy's chosen law has a floor to compare with policy none's, so whether a "
                "reminder moves the equilibrium cannot be told from this run."), []  # fmt: skip
    return (
        f"Against policy none, a reminder lowers the fitted floor in {int(lower)} and raises it "
        f"in {int(higher)} of the {told} curves whose difference has a test (bootstrap p-values "
        f"Holm-adjusted over these {told}, family level {alpha:g}; "
        f"{len(table_rows) - told} more have too few units)."
    ), table_rows


def _mean_curves(data: RunData, model: str, laws: pd.DataFrame) -> dict[str, tuple]:
    """Pooled data curves (x, mean) of one probe model from divergence.csv and nexttoken.csv,
    single replies only, as laws.csv pools them (a pair's mean over the group's layers)."""
    out: dict[str, tuple] = {}
    conv = set(laws.loc[laws["x"] == "turn", "item"]) - {POOLED}
    div = data.frame("divergence.csv")
    if div is not None and len(div):
        sub = div[(div["model"] == model) & ~div["item"].isin(conv)]
        for name, members in layer_groups(sorted(int(v) for v in sub["layer"].unique())):
            per_pair = sub[sub["layer"].isin(members)].groupby(["pair", "t"])["rel_l2"].mean()
            mean = per_pair.groupby("t").mean()
            out[f"rel_l2|{name}"] = (mean.index.to_numpy(float), mean.to_numpy(float))
    nxt = data.frame("nexttoken.csv")
    if nxt is not None and len(nxt):
        sub = nxt[(nxt["model"] == model) & ~nxt["item"].isin(conv)]
        mean = sub.groupby("t")["kl"].mean()
        out["kl|next-token"] = (mean.index.to_numpy(float), mean.to_numpy(float))
    return out


def _law_curve(row, x: np.ndarray) -> np.ndarray:
    if row["law"] == LAW_EQUILIBRIUM:
        shape = np.exp(-row["rate"] * (x - row["x_min"]))
    else:
        shape = x ** (-row["rate"])
    return row["floor"] + row["scale"] * shape


def laws_figure(data: RunData, chosen: pd.DataFrame):
    """Per probe model: each pooled mechanism curve over its initial value (log-log), the
    chosen law dotted."""
    from plotly.subplots import make_subplots

    mech = chosen[chosen["curve"].isin(("rel_l2", "kl"))]
    models = list(dict.fromkeys(mech["model"]))
    if not models:
        return None
    fig = make_subplots(rows=1, cols=len(models), subplot_titles=[esc(m) for m in models])
    for col, model in enumerate(models, start=1):
        curves = _mean_curves(data, model, mech)
        for i, (_, r) in enumerate(mech[mech["model"] == model].iterrows()):
            key = f"{r['curve']}|{r['layer_group']}"
            init = float(r["initial"]) or 1.0
            lo, hi = float(r["x_min"]), float(r["x_max"])
            if key in curves:
                x, y = curves[key]
                keep = (x >= lo) & (x <= hi)
                fig.add_scatter(
                    x=x[keep], y=y[keep] / init, mode="markers", marker=dict(size=4),
                    row=1, col=col, line=dict(color=color(i)), legendgroup=key,
                    name=esc(f"{_label(r)}: {r['verdict']}"), showlegend=col == 1,
                )  # fmt: skip
            grid = np.geomspace(lo, hi, 60)
            fig.add_scatter(
                x=grid, y=_law_curve(r, grid) / init, mode="lines", row=1, col=col,
                line=dict(color=color(i), dash="dot"), legendgroup=key, showlegend=False,
                name=esc(LAW_NAMES.get(r["law"], r["law"])), hoverinfo="name",
            )  # fmt: skip
    fig.update_xaxes(type="log", title_text="t (continuation position)")
    fig.update_yaxes(type="log", title_text="over its initial value", row=1, col=1)
    return _layout(fig, 440)


def _alpha(data: RunData) -> float:
    """The run's family level 1 - stats.level (manifest.json's config; the default without)."""
    level = ((data.manifest or {}).get("config") or {}).get("stats", {}).get("level")
    return 1 - float(level) if level is not None else 1 - DEFAULT_LEVEL


def scope_note(laws: pd.DataFrame, alpha: float) -> str:
    """How the laws are chosen and what a decided verdict rests on, with this run's numbers."""
    chosen = laws[laws["chosen"].astype(bool)]
    tested = int(np.isfinite(chosen["law_p"].astype(float)).sum()) if "law_p" in chosen else 0
    return (
        "Three laws per curve (laws.csv): a power law to zero (the theorem's prediction for the "
        "prompt's direct influence), a power law to a floor (positive exponent), and an "
        "exponential approach to an equilibrium. The law shown is the one that predicts best out "
        "of sample (leave one pair or sample out; fewer than 4 pairs: fit the first part of the "
        "curve, predict its tail). A verdict is decided only as follows. `settles`: the floored "
        "law falls to its floor, beats decay to zero in a test (probe pairs: predicting the "
        "pairs left out, a sign-flip test; behaviour: the binomial likelihood ratio of the "
        "windows' counts, a parametric bootstrap) whose p-value is Holm-adjusted over the "
        f"{tested} curve sets of this run "
        "that have one (all of them, before any choice), and the floor's bootstrap interval "
        f"reaches no lower than {FLOOR_RULED_OUT:.0%} of the initial value. `vanishes`: a power "
        f"law to zero whose exponent interval is above 0, from {VANISH_MIN_UNITS} units, and "
        "every floored law the units left out cannot tell from the best law (a sign-flip test; "
        f"the tail: within {L_MARGIN:.0%}) rules out a floor of {FLOOR_RULED_OUT:.0%} of its "
        f"initial value. `flat`: the exponent's interval inside ±{FLAT_BAND}; `grows`: below "
        f"-{FLAT_BAND}. `vanishes`, `flat` and `grows` read their intervals at the run's level "
        f"(Bonferroni over its sets): the chance that any verdict of this run is wrong is "
        f"<= {alpha:g}. "
        "Everything else: cannot tell, with the reason. Fewer than 3 units: cannot tell."
    )


def laws_section(data: RunData) -> tuple[str, dict] | None:
    laws = data.frame("laws.csv")
    if laws is None:
        return note(data.missing("laws.csv")), {}
    if "rule" in laws.columns:  # the all-rules curves; each rule alone: laws.csv's `rule`
        laws = laws[laws["rule"].fillna("").astype(str) == ""]
    if laws.empty:
        return note("No curve of this run had enough points or units to fit a law."), {}
    alpha = _alpha(data)
    body = [note(scope_note(laws, alpha))]
    base = baseline_rows(laws)
    policies = policy_rows(laws)
    for model in dict.fromkeys([*base["model"], *policies["model"]]):
        mine = base[base["model"] == model]
        body.append(f"<h3>{esc(model)}</h3>")
        if len(mine):
            body.append(note(model_sentence(model, mine), "claim"))
            body.append(fold(f"Each curve's answer under none ({len(mine)})", answer_table(mine)))
        else:
            body.append(note(f"{model} has no curve under policy none."))
        theirs = policies[policies["model"] == model]
        if len(theirs):
            body.append(fold(f"Reminder policies (apart from none, {len(theirs)})",
                             answer_table(theirs, True)))  # fmt: skip
    figs = {}
    fig = laws_figure(data, laws[laws["chosen"].astype(bool) & (laws["item"] == POOLED)
                                 & (laws["policy"] == POOLED)])  # fmt: skip
    if fig is not None:
        figs["fig-laws"] = fig
        # the verdict sentences above carry the answer; the curves behind them fold
        body.append(fold("The pooled mechanism curves and their chosen laws", figure(
            "fig-laws",
            "Pooled mechanism curves of each probe model over all its policies (dots: the mean "
            "over pairs, over the curve's value at its first fitted position) and the chosen "
            "law (dotted).", 440,
        )))  # fmt: skip
    body.append(every_curve(laws))
    sentence, deltas = delta_sentence(laws, alpha)
    body.append("<h3>Do reminders lower the floor?</h3>" + note(sentence, "claim"))
    if deltas:
        body.append(
            fold(
                f"Each policy's floor against none's ({len(deltas)})",
                table(
                    ["model", "item", "policy", "curve", "law", "floor − none's", "reading"], deltas
                ),
            )
        )
    body.append(twin_part(data))
    return "".join(body), figs


def every_curve(laws: pd.DataFrame) -> str:
    """Every curve set's chosen law, folded away (laws.csv holds all three laws of each)."""
    headers = ["model", "item", "policy", "curve", "n", "chosen law", "verdict",
               "key number [interval]", "error: zero", "floor", "equilibrium"]  # fmt: skip
    errors = laws.pivot_table(
        index=["model", "item", "policy", "curve", "layer_group"], columns="law",
        values="error", aggfunc="first",
    )  # fmt: skip
    rows = []
    chosen = laws[laws["chosen"].astype(bool)]
    for _, r in chosen.iterrows():
        e = errors.loc[(r["model"], r["item"], r["policy"], r["curve"], r["layer_group"])]
        rows.append([r["model"], r["item"], r["policy"], _label(r), int(r["n"]),
                     LAW_NAMES.get(r["law"], r["law"]), r["verdict"], key_number(r),
                     *(fmt_num(e.get(k, math.nan), 3) for k in LAW_NAMES)])  # fmt: skip
    return (
        f"<details><summary>Every curve ({len(chosen)} curve sets; laws.csv has all three laws "
        "of each, with every interval and p-value)</summary>" + table(headers, rows) + "</details>"
    )


def twin_part(data: RunData) -> str:
    """Tokens or turns? The single-turn twins beside the conversation at equal token distance."""
    single = data.frame("single_turn.csv")
    if single is None:
        return ""
    per_turn, summary = comparison(single, data.frame("turns.csv"))
    if summary.empty:
        return "<h3>Tokens or turns?</h3>" + note("No twin reply could be paired with its turn.")
    sentences = []
    for _, r in summary.iterrows():
        conv = _ci(-r["drop"], -r["drop_high"], -r["drop_low"], True)
        twin = _ci(-r["twin_drop"], -r["twin_drop_high"], -r["twin_drop_low"], True)
        sentences.append(
            f"{r['model']} on {r['item']} ({int(r['n'])} samples), the pass rate's change from "
            f"the first reply over turns k >= 2: the conversation {conv}, its single-turn twin "
            f"at the same token distance {twin}: {r['reading']}."
        )
    rows = [[r["model"], r["item"], int(r["turn"]), int(r["n"]), f"{r['conversation_t']:.0f}",
             f"{r['twin_t']:.0f}", fmt_num(r["first"], 2), fmt_num(r["conversation"], 2),
             fmt_num(r["twin"], 2)] for _, r in per_turn.iterrows()]  # fmt: skip
    headers = ["model", "item", "turn k", "samples", "token position: turn k",
               "token position: twin", "a(1)", "a(k)", "twin a(k)"]  # fmt: skip
    return (
        "<h3>Tokens or turns?</h3>"
        + note(
            "For each turn k >= 2 of a conversation without reminders, its single-turn twin sends "
            "the first k user turns and the sample's own first k - 1 replies as one message and "
            "is answered once (single_turn.csv), at about the token distance where the "
            "conversation's turn k reply starts. If the drop follows the tokens (the theorem's "
            "t), the twin drops as turn k does; if it follows the turns, the twin holds like "
            "turn 1. Differences are paired by sample, 95 % intervals over samples."
        )
        + "<ul>"
        + "".join(f"<li>{esc(s)}</li>" for s in sentences)
        + "</ul>"
        + table(headers, rows)
    )
