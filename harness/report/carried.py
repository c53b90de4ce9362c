"""The report's "Prompt or text?" part: carried.csv as figures and verdict sentences, the
within-item reading of alpha vs behaviour (linkage.csv), and the forks' two arms side by side.
"""

from __future__ import annotations

import math

import pandas as pd

from harness.analysis.carried import BAND, fork_verdict, settled_from
from harness.report.folding import fold_cards
from harness.report.html import esc, figure, fmt_pct, fmt_t, fold, note, table
from harness.report.plots import _layout, color, first_entry
from harness.report.plots import label as lbl
from harness.report.verdicts import Card, ci_cell, ci_text, n_cell, policy_order
from harness.report.viewer import char_of

CARRIED = 0.5  # adherence at the settling point above which the text "carries" the behaviour
NONE_LEFT = 0.05  # adherence below this at every fork: the prompt is simply not followed
MAX_FORK_GROUPS = 40  # (record, position) groups shown in the arm viewer


def carried_sentence(policy: str, rows: pd.DataFrame) -> str:
    """One sentence per condition: from when on the prompt stops mattering, and what is left."""
    rows = rows.dropna(subset=["dependence"]).sort_values("fork_t")
    if rows.empty:
        return f"{policy}: no fork position inside the records (see carried.csv's reason)."
    settled = settled_from(rows)
    last = rows.iloc[-1].to_dict()
    if math.isnan(settled) and fork_verdict(last["dependence_low"], last["dependence_high"]) != (
        "depends"
    ):
        return cannot_tell_sentence(policy, rows)
    if math.isnan(settled):
        return (
            f"{policy}: the prompt still changes behaviour at the last fork (t = "
            f"{fmt_t(last['fork_t'])}): {fmt_pct(last['adherence_with'])} with it vs "
            f"{fmt_pct(last['adherence_without'])} without (dependence "
            f"{last['dependence']:+.2f}{ci_text(last, 'dependence', '+.2f')})."
        )
    # adherence with the prompt over the forks where it no longer matters: the part of the
    # behaviour that the text alone keeps up
    later = rows[rows["fork_t"] >= settled]["adherence_with"]
    kept = float(later.mean())
    from_start = settled == rows["fork_t"].min()
    start = "at every fork" if from_start else f"from t = {fmt_t(settled)} on"
    if kept >= CARRIED:
        reading = "what the model still does is carried by the text written so far"
    elif from_start and later.max() < NONE_LEFT:
        reading = "the model does not follow this prompt at any fork"
    elif from_start:
        reading = f"the compliance there is (up to {fmt_pct(later.max())}) comes from the text"
    else:
        reading = (
            f"the prompt has lost its grip: re-inject it (a reminder policy) before t = "
            f"{fmt_t(settled)}"
        )
    span = (
        f"{fmt_pct(later.iloc[0])} there"
        if len(later) == 1
        else f"{fmt_pct(later.iloc[0])} → {fmt_pct(later.iloc[-1])} over those forks"
    )
    return (
        f"{policy}: {start}, removing the system prompt changes adherence by less than "
        f"±{BAND:.2f} (dependence CI within the band); adherence with it is {span}: {reading}."
    )


def cannot_tell_sentence(policy: str, rows: pd.DataFrame) -> str:
    """The last fork neither depends on the prompt nor lies within the band: too few records."""
    last = rows.iloc[-1].to_dict()
    lows, highs = rows["dependence_low"], rows["dependence_high"]
    depends = [
        fmt_t(t)
        for t, lo, hi in zip(rows["fork_t"], lows, highs, strict=True)
        if fork_verdict(lo, hi) == "depends"
    ]
    also = f" At t = {', '.join(depends)} the prompt does change behaviour." if depends else ""
    n = int(last["n"])
    return (
        f"{policy}: cannot tell whether removing the system prompt still changes behaviour "
        f"from the last fork (t = {fmt_t(last['fork_t'])}) on: with n = {n} "
        f"record{'' if n == 1 else 's'} the dependence {last['dependence']:+.2f}"
        f"{ci_text(last, 'dependence', '+.2f', with_n=False)} contains 0 but reaches beyond "
        f"±{BAND:.2f}.{also}"
    )


def carried_cards(carried: pd.DataFrame | None) -> list[Card]:
    if carried is None or carried.empty:
        return []
    cards = []
    for (model, item), rows in carried.groupby(["model", "item"], sort=True):
        card = Card(title=f"Prompt or text? {item} ({model})", kind="carried")
        for policy in policy_order(rows["policy"]):
            card.sentences.append(carried_sentence(policy, rows[rows["policy"] == policy]))
        cards.append(card)
    return cards


def linkage_sentences(linkage: pd.DataFrame | None, with_across: bool = True) -> list[str]:
    """alpha vs adherence within items, the cross-condition coefficient beside it (unless the
    caller states it already), and what the sign means."""
    if linkage is None or linkage.empty:
        return []
    out = []
    across = linkage[linkage["kind"] == "alpha_auc_across"].to_dict("records")
    across_text = ""
    if with_across and across and not math.isnan(across[0]["spearman"]):
        a = across[0]
        band = ci_text(a, "spearman", "+.2f", with_n=False)
        across_text = (
            f" Across conditions (items mixed) it is {a['spearman']:+.2f}{band} "
            f"over {int(a['n'])} conditions."
        )
    for row in linkage[linkage["kind"] == "alpha_auc_within"].to_dict("records"):
        rho, band = row["spearman"], ci_text(row, "spearman", "+.2f", with_n=False)
        out.append(
            f"{row['model']}: within items, Spearman ρ(per-sample α, adherence AUC) = "
            f"{rho:+.2f}{band} over {int(row['n'])} samples of "
            f"{int(row['items'])} items.{across_text} {_sign_reading(row)}"
        )
    if not out and across_text:
        out.append(
            "No item had enough probed samples with varying α and adherence for a within-item "
            f"coefficient.{across_text} Read it as differences between items, not a mechanism."
        )
    return out


def _sign_reading(row: dict) -> str:
    low, high = row["spearman_low"], row["spearman_high"]
    if math.isnan(low) or low <= 0 <= high:
        return (
            "The within-item CI contains 0: once item differences are removed, no link is "
            "established; a cross-condition coefficient then reflects how the items differ."
        )
    if row["spearman"] > 0:
        return (
            "Positive: what the theory expects when compliant text carries the instruction and "
            "makes the prompt redundant, so its trace may fade faster."
        )
    return (
        "Negative: the prompt's lingering trace is what keeps the model on track; samples whose "
        "trace fades faster lose the behaviour sooner."
    )


def carried_figure(carried: pd.DataFrame):
    """Per (model, item): adherence with (solid) and without (dashed) the prompt vs the fork
    position, and the dependence with its CI, next-token KL at the fork on a second axis."""
    import plotly.graph_objects as go  # noqa: F401 (plotly's subplots need it loaded)
    from plotly.subplots import make_subplots

    panels = list(carried.groupby(["model", "item"], sort=True))
    titles = [t for (m, i), _ in panels for t in (f"{i} · adherence", f"{i} · dependence")]
    fig = make_subplots(
        rows=len(panels), cols=2, subplot_titles=[lbl(t) for t in titles],
        specs=[[{}, {"secondary_y": True}] for _ in panels], vertical_spacing=0.12,
    )  # fmt: skip
    shown: set[str] = set()
    for r, ((_model, _item), rows) in enumerate(panels, start=1):
        for k, policy in enumerate(policy_order(rows["policy"])):
            cond = rows[rows["policy"] == policy].sort_values("fork_t")
            c, name = color(k), lbl(policy)
            for arm, dash in (("with", "solid"), ("without", "dash")):
                fig.add_scatter(
                    x=cond["fork_t"], y=cond[f"adherence_{arm}"], mode="lines+markers",
                    line=dict(color=c, dash=dash), name=f"{name} · {arm}", legendgroup=name,
                    showlegend=first_entry(shown, f"{name} · {arm}"), row=r, col=1,
                )  # fmt: skip
            fig.add_scatter(
                x=cond["fork_t"], y=cond["dependence"], mode="lines+markers", line=dict(color=c),
                error_y=dict(type="data", symmetric=False,
                             array=cond["dependence_high"] - cond["dependence"],
                             arrayminus=cond["dependence"] - cond["dependence_low"]),
                name=f"{name} · dependence", legendgroup=name, row=r, col=2,
                showlegend=first_entry(shown, f"{name} · dependence"),
            )  # fmt: skip
            if cond["kl"].notna().any():
                fig.add_scatter(
                    x=cond["fork_t"], y=cond["kl"], mode="lines", line=dict(color=c, dash="dot"),
                    name=f"{name} · KL", legendgroup=name, row=r, col=2, secondary_y=True,
                    showlegend=first_entry(shown, f"{name} · KL"),
                )  # fmt: skip
        fig.update_yaxes(title_text="adherence", range=[-0.05, 1.05], row=r, col=1)
        fig.update_yaxes(title_text="with − without", row=r, col=2, secondary_y=False)
        fig.update_yaxes(title_text="KL at t (dotted)", row=r, col=2, secondary_y=True)
        fig.update_xaxes(title_text="fork position t (continuation tokens)", row=r)
    return _layout(fig, 320 * len(panels) + 80)


def forks_section(data) -> tuple[str, dict]:
    carried = data.frame("carried.csv")
    if carried is None:
        return note(data.missing("carried.csv") + " Add `forks:` to the config to fork."), {}
    cards = carried_cards(carried)
    caption = (
        "Each record is forked at continuation position t: the same first t token ids continue "
        "with the system prompt (solid) and without it (dashed), several seeded draws each. "
        "Right: dependence = adherence with − without, its CI over records and draws at the "
        "run's family level (every row of carried.csv at once, 95 %), and the "
        "next-token KL between the two prompts at t (dotted, second axis). Where the CI sits on "
        "0 and inside ±0.25 the prompt no longer changes behaviour: what persists is carried by "
        "the text; a CI on 0 but wider than that cannot tell."
    )
    cards, folded = fold_cards(cards)
    body = (
        "".join(
            f'<div class="card card-carried"><h3>{esc(c.title)}</h3>'
            + "".join(f"<p>{esc(s)}</p>" for s in c.sentences)
            + "</div>"
            for c in cards
        )
        + folded
    )
    figs = {"fig-carried": carried_figure(carried)}
    html = (
        f'<div class="cards">{body}</div>'
        + fold(
            f"With and without the prompt at each fork ({carried['item'].nunique()} items)",
            figure("fig-carried", caption, figs["fig-carried"].layout.height),
        )
        + fold(f"Every fork ({len(carried)} rows of carried.csv)", carried_table(carried))
    )
    arms = fork_viewer_html(data.forks or [], data.generations or [])
    return html + (fold("The fork arms' texts, side by side", arms) if arms else ""), figs


def carried_table(carried: pd.DataFrame) -> str:
    """carried.csv as a table, the dependence with its interval and n side by side."""
    cols = ["model", "item", "policy", "fork_t", "records", "draws", "adherence_with",
            "adherence_without", "dependence"]  # fmt: skip
    cols = [c for c in cols if c in carried.columns]
    tail = [c for c in ("verdict", "kl", "reason") if c in carried.columns]
    rows = [
        [*(r[c] for c in cols), ci_cell(r, "dependence"), n_cell(r, "dependence"),
         *(r[c] for c in tail)]
        for r in carried.to_dict("records")
    ]  # fmt: skip
    return table([*cols, "95 % CI", "n", *tail], rows)


def _prefix_tail(record: dict, t: int, chars: int = 240) -> str:
    """The end of the record's first t continuation tokens, as text (segment texts; inside a
    segment, placed in proportion to token offsets like the sample viewer)."""

    text = ""
    for seg in record.get("segments") or []:
        start, end, seg_text = int(seg["start"]), int(seg["end"]), str(seg.get("text", ""))
        if start >= t:
            break
        text += seg_text if end <= t else seg_text[: char_of(seg_text, start, end, t)]
    return ("…" if len(text) > chars else "") + text[-chars:]


def fork_viewer_html(arms: list[dict], records: list[dict]) -> str:
    """Per (record, fork position): the shared text's end, then each draw's two arms side by
    side, each arm's verdict from forks.csv's window checks."""
    if not arms:
        return ""
    by_record = {
        (r.get("model"), r.get("item"), r.get("policy"), r.get("sample")): r for r in records
    }
    groups: dict[tuple, list[dict]] = {}
    for arm in arms:
        key = (arm["model"], arm["item"], arm["policy"], arm["sample"], arm["fork_t"])
        groups.setdefault(key, []).append(arm)
    parts = []
    for key in sorted(groups)[:MAX_FORK_GROUPS]:
        model, item, policy, sample, t = key
        record = by_record.get((model, item, policy, sample), {})
        rows = []
        for draw in sorted({a["draw"] for a in groups[key]}):
            pair = {a["arm"]: a for a in groups[key] if a["draw"] == draw}
            cells = [f'<td class="arm">{esc(pair[a]["text"]) if a in pair else ""}</td>'
                     for a in ("with", "without")]  # fmt: skip
            rows.append(f"<tr><td>draw {draw}</td>{''.join(cells)}</tr>")
        head = f"{item} · {policy} · {model} · sample {sample} · fork at t = {t}"
        shared = esc(_prefix_tail(record, int(t))) if record else ""
        parts.append(
            f'<details class="fork" data-item="{esc(item)}" data-policy="{esc(policy)}">'
            f"<summary>{esc(head)}</summary>"
            f'<div class="prompt"><b>shared text (end)</b>: {shared or "(none: t = 0)"}</div>'
            '<table class="data arms"><tr><th></th><th>with the system prompt</th>'
            f"<th>without it</th></tr>{''.join(rows)}</table></details>"
        )
    left = len(groups) - min(len(groups), MAX_FORK_GROUPS)
    tail = f'<p class="note">{left} more forks are in forks.jsonl.</p>' if left else ""
    return "<h3>Forks, arm by arm</h3>" + "".join(parts) + tail
