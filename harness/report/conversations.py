"""The report's Conversations section: adherence by turn a(k) per policy with CIs, survival
over turns, the pressure-turn effect, the prompt's divergence with the turn boundaries
marked, and its next-token influence at each reply's first token (turn_influence.csv). Shown
only for runs with conversations (turns.csv or its derived files)."""

from __future__ import annotations

import math

import pandas as pd

from harness.models import is_untrained
from harness.report import derive, plots
from harness.report.html import esc, figure, fmt_num, fold, note, table
from harness.report.instrument import corrected_turns_part, undecided_turns_note
from harness.report.load import RunData
from harness.report.replay import replay_part
from harness.stats.text import bracket, has_interval, interval_text

FILES = ("turn_adherence.csv", "conversations.csv", "turns.csv")


def _interval(row: dict, base: str) -> str:
    """`value [low, high] (n = N)` as stored; the value alone where no interval was formed."""
    low, high = row.get(f"{base}_low"), row.get(f"{base}_high")
    if not has_interval(low, high):
        return fmt_num(row.get(base))
    n = row.get(f"{base}_n")
    size = "" if n is None or pd.isna(n) else f" (n = {int(n)})"
    return interval_text(row.get(base), low, high, fmt_num) + size


def _pct(value) -> str:
    return "–" if value is None or pd.isna(value) else f"{100 * float(value):.1f} %"


def _by_history(frame: pd.DataFrame) -> pd.DataFrame:
    """Lines and rows per (policy, history): a history other than a run's own (`generated`)
    is named after the policy, e.g. `none (reference)`, so logged and replayed turns never
    share a line (logged conversations' policy is `logged` already)."""
    if "history" not in frame.columns or (frame["history"] == "generated").all():
        return frame
    # a replay's record of the log itself has policy `logged` too: named once
    plain = (frame["history"] == "generated") | (frame["history"] == frame["policy"])
    named = frame["policy"].where(plain, frame["policy"] + " (" + frame["history"] + ")")
    return frame.assign(policy=named)


def turn_figures(curve: pd.DataFrame) -> tuple[str, dict]:
    by_turn = _by_history(curve).rename(columns={"turn": "t"})
    fig_a = plots.curve_figure(
        by_turn.rename(columns={"a_low": "low", "a_high": "high"}), "a", "a(k)", x_title="turn k"
    )
    surv = by_turn.rename(columns={"survival_low": "low", "survival_high": "high"})
    fig_s = plots.curve_figure(surv, "survival", "S(k)", step=True, x_title="turn k")
    html = figure(
        "fig-turn-adherence",
        "a(k): share of samples whose reply to user turn k passes every check that could "
        "decide (each reply scored whole), per policy, with its 95 % exact binomial band "
        "(pointwise) over samples. Turn 1 answers the prompt; later turns follow scripted "
        "or simulated users.",
        fig_a.layout.height,
    ) + figure(
        "fig-turn-survival",
        "Kaplan-Meier over turns: share of samples with no failing reply up to turn k "
        "(censored at the last scored reply), with a 95 % pointwise band (exact binomial bounds "
        "on the share failed by turn k).",
        fig_s.layout.height,
    )
    return html, {"fig-turn-adherence": fig_a, "fig-turn-survival": fig_s}


def _condition_table(summary: pd.DataFrame) -> str:
    summary = _by_history(summary)
    rows = [
        [r["model"], r["item"], r["policy"], _interval(r, "mean"), fmt_num(r["a_first"]),
         fmt_num(r["a_last"]), fmt_num(r["first_fail_median"]), _pct(r["token_overhead"])]
        for r in summary[summary["item"] != "all"].to_dict("records")
    ]  # fmt: skip
    headers = ["model", "item", "policy", "mean a(k) [95 % CI]", "a(1)", "a(last)",
               "median first failing turn", "reminder overhead"]  # fmt: skip
    return "<h3>Per condition</h3>" + table(headers, rows)


def _pressure_part(summary: pd.DataFrame) -> str:
    summary = _by_history(summary)
    pressed = summary[summary["pressure_turn"].notna() | (summary["item"] == "all")]
    if not len(pressed):
        return note("No item of this run has a pressure turn.")
    sentences = [
        f"{r['policy']} ({r['model']}): adherence {_pct(r['before'])} on the replies before the "
        f"pressure turn, {_pct(r['after'])} from it on; change "
        f"{_interval(r, 'pressure_delta')} (items with a pressure turn, averaged)."
        for r in pressed[pressed["item"] == "all"].to_dict("records")
    ]
    rows = [
        [r["model"], r["item"], r["policy"], fmt_num(r["pressure_turn"]), _pct(r["before"]),
         _pct(r["after"]), _interval(r, "pressure_delta")]
        for r in pressed.to_dict("records")
    ]  # fmt: skip
    headers = ["model", "item", "policy", "pressure turn", "before", "from it on",
               "change [95 % CI]"]  # fmt: skip
    body = "".join(f'<p class="claim">{esc(s)}</p>' for s in sentences)
    return "<h3>Pressure turns</h3>" + body + table(headers, rows)


def _reply_starts(div: pd.DataFrame) -> pd.DataFrame:
    """Rows at the first token of each assistant turn after the first, per pair and layer."""
    talk = div[div["turn"] > 1]
    reply = talk[talk["role"] == "assistant"]
    first = reply.groupby(["model", "pair", "turn"])["t"].transform("min")
    return reply[reply["t"] == first]


def _divergence_part(div: pd.DataFrame | None) -> tuple[str, dict]:
    if div is None or not {"turn", "role"} <= set(div.columns) or not (div["turn"] > 1).any():
        return note("No probed conversation in divergence.csv (probe off, or no turns)."), {}
    div = div[(div["layer"] >= 1) & ~div["model"].map(is_untrained)]
    talks = div[div["pair"].isin(div.loc[div["turn"] > 1, "pair"].unique())]
    mean = talks.groupby(["model", "item", "policy", "pair", "t"], sort=True).agg(
        rel_l2=("rel_l2", "mean"), turn=("turn", "first"), role=("role", "first")
    )
    mean = mean.reset_index()
    starts = _reply_starts(talks)[["pair", "t"]].drop_duplicates()
    fig = plots.turn_divergence_figure(mean, starts)
    at_start = mean.merge(starts, on=["pair", "t"])
    before = mean.assign(t=mean["t"] + 1).merge(starts, on=["pair", "t"])  # the token before
    rows = []
    for (model, turn), grp in at_start.groupby(["model", "turn"], sort=True):
        prev = before[(before["model"] == model) & (before["turn"] == turn)]
        rows.append([model, int(turn), len(grp), fmt_num(grp["rel_l2"].mean()),
                     fmt_num(prev["rel_l2"].mean() if len(prev) else math.nan)])  # fmt: skip
    headers = ["model", "turn", "pairs", "rel_l2 at the reply's first token",
               "at the token before it"]  # fmt: skip
    caption = (
        "rel_l2 between the system prompt's and the baseline's hidden states over the whole "
        "conversation (user turns, chat markup and reminders included in t), mean over layers "
        ">= 1, one line per probed pair; diamonds mark each reply's first token. A jump at a "
        "diamond means the new turn revived the prompt's trace."
    )
    html = figure("fig-turn-divergence", caption, fig.layout.height)
    html += fold("Distance where each reply starts, turn by turn", table(headers, rows))
    return html, {"fig-turn-divergence": fig}


def _influence_part(frame: pd.DataFrame | None) -> tuple[str, dict]:
    """The prompt's next-token influence where each reply starts (turn_influence.csv)."""
    if frame is None or not len(frame):
        return note("No probed conversation in turn_influence.csv (probe off, or no turns)."), {}
    frame = frame[~frame["model"].map(is_untrained)]
    mean = frame.groupby(["model", "policy", "turn"], sort=True).agg(
        kl=("kl", "mean"), kl_low=("kl_low", "mean"), kl_high=("kl_high", "mean"),
        pairs=("pair", "nunique"), backend=("backend", "first"),
    ).reset_index()  # fmt: skip
    rows = [
        [r["model"], r["policy"], int(r["turn"]), int(r["pairs"]), fmt_num(r["kl"]),
         fmt_num(r["kl_low"]) if r["kl_low"] == r["kl_high"] else
         bracket(r["kl_low"], r["kl_high"], fmt_num), r["backend"]]
        for r in mean.to_dict("records")
    ]  # fmt: skip
    headers = ["model", "policy", "turn", "pairs", "KL at the reply's first token",
               "bracket", "backend"]  # fmt: skip
    caption = (
        "KL(p_A || p_B) between the system prompt's and the baseline's next-token "
        "distributions at the first token of each reply (\u201cDrift No More\u201d's per-turn "
        "measure), mean over probed conversations; bars: the KL's bracket where the probe "
        "saw only top-k log-probs (backend openai). Falling with the turn: each new user "
        "turn leaves the prompt less say over how the reply starts."
    )
    fig = plots.turn_influence_figure(mean)
    html = figure("fig-turn-influence", caption, fig.layout.height)
    html += fold("Influence where each reply starts, turn by turn", table(headers, rows))
    return html, {"fig-turn-influence": fig}


def conversations_section(data: RunData) -> tuple[str, dict] | None:
    """None when the run has no conversations (the section is then left out)."""
    if all(data.frame(name) is None and name not in data.problems for name in FILES):
        return None
    html, figs = [], {}
    curve, summary = data.frame("turn_adherence.csv"), data.frame("conversations.csv")
    if curve is not None:
        part, part_figs = turn_figures(curve)
        html += [part, undecided_turns_note(curve), corrected_turns_part(curve)]
        figs |= part_figs
    else:
        html.append(note(data.missing("turn_adherence.csv")))
    if summary is not None:
        html += [fold("Each condition's first failure, AUC and turns (conversations.csv)",
                      _condition_table(summary)), _pressure_part(summary)]  # fmt: skip
    else:
        html.append(note(data.missing("conversations.csv")))
    html.append(replay_part(curve, summary, data.generations))
    if derive.endpoint_only(data):  # an endpoint hands out no hidden states
        part, part_figs = note(derive.ENDPOINT_ONLY), {}
    else:
        part, part_figs = _divergence_part(data.frame("divergence.csv"))
    influence, influence_figs = _influence_part(data.frame("turn_influence.csv"))
    return "".join(html) + part + influence, figs | part_figs | influence_figs
