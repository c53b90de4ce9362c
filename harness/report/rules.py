"""The report's "Which rule breaks first": one small multiple per rule of each item (its a(k)
over turns in a conversation, else its a(t)), the sentence of the prompt it enforces beside
it, the rules ordered by when they first fall below rules.csv's level (harness.analysis.rules).
Every string from the run (rule names, sentences, items) is escaped."""

from __future__ import annotations

import math

import pandas as pd

from harness.report import plots
from harness.report.html import esc, figure, fold, note
from harness.report.load import RunData
from harness.report.truncation import truncation_line


def _fall(row) -> float:
    """When the rule first falls below the level: the turn in a conversation, else t (inf:
    never; NaN: nothing decided)."""
    turn = row["first_below_turn"]
    return float(turn) if not pd.isna(turn) else float(row["first_below_t"])


def rule_order(rules: pd.DataFrame) -> list[str]:
    """The rules of one item, earliest fall first (over its policies: the earliest), rules
    that never fall next, rules nothing decided last; ties by name."""
    falls = rules.assign(fall=[_fall(r) for _, r in rules.iterrows()])
    first = falls.groupby("rule")["fall"].min()
    undecided = falls.groupby("rule")["fall"].apply(lambda f: f.isna().all())

    def key(rule: str) -> tuple:
        value = first[rule]
        return (bool(undecided[rule]), math.inf if pd.isna(value) else value, rule)

    return sorted(first.index, key=key)


def _when(row, unit: str) -> str:
    fall, level = _fall(row), row["below"]
    if pd.isna(fall):
        return "no verdict yet"
    if math.isinf(fall):
        return f"never below {level:g}"
    return f"below {level:g} from {unit} {int(fall)}"


def _facts(rows: pd.DataFrame, unit: str) -> str:
    """One line per policy: when it falls, AUC with its interval, the units' counts."""
    lines = []
    for _, r in rows.sort_values("policy").iterrows():
        auc = (
            "AUC –"
            if pd.isna(r["auc"])
            else f"AUC {r['auc']:.2f} [{r['auc_low']:.2f}, {r['auc_high']:.2f}]"
        )
        counts = f"judged {int(r['judged'])}, broken {int(r['failed'])}"
        counts += f", no verdict (cut off) {int(r['cut_off'])}" if r["cut_off"] else ""
        lines.append(
            f"<li>{esc(r['policy'])}: {esc(_when(r, unit))}; {esc(auc)}; {esc(counts)}</li>"
        )
    return "<ul>" + "".join(lines) + "</ul>"


def _curve(curves: pd.DataFrame, model: str, item: str, rule: str, axis: str) -> pd.DataFrame:
    c = curves[
        (curves["model"] == model) & (curves["item"] == item) & (curves["rule"] == rule)
        & (curves["axis"] == axis)
    ]  # fmt: skip
    return c.rename(columns={"x": "t", "a_low": "low", "a_high": "high"})


def rules_section(data: RunData) -> tuple[str, dict]:
    rules, curves = data.frame("rules.csv"), data.frame("rule_curves.csv")
    if rules is None or not len(rules):
        return note(data.missing("rules.csv")), {}
    curves = (
        curves if curves is not None else pd.DataFrame(columns=["model", "item", "rule", "axis"])
    )
    level = float(rules["below"].iloc[0])
    html = [
        note(
            "Each rule alone, in the order it breaks: the first to fall below "
            f"a = {level:g} comes first (a rule that never falls next, one with no verdict "
            "last). A whole-reply rule (sign-off, word limit) is judged on each reply; a reply "
            "cut at the token limit gives it no verdict (counted apart). The headline figures "
            "above cover all rules at once."
        )
    ]
    if cut := truncation_line(data.frame("windows.csv"), rules):
        html.append(f'<p class="truncation">{esc(cut)}.</p>')
    figs: dict = {}
    multi_model = rules["model"].nunique() > 1
    for (model, item), group in rules.groupby(["model", "item"], sort=True):
        title = f"{item} · {model}" if multi_model else item
        turns = group["first_below_turn"].notna().any() or group["turns"].notna().any()
        axis, unit = ("turn", "turn") if turns else ("t", "t")
        order = rule_order(group)
        falls = "; ".join(
            f"{rule} ({_when(group[group['rule'] == rule].sort_values('policy').iloc[0], unit)})"
            for rule in order
        )
        parts = []
        for rank, rule in enumerate(order, start=1):
            rows = group[group["rule"] == rule]
            sentence = next((s for s in rows["sentence"] if isinstance(s, str) and s), "")
            fig_id = f"fig-rule-{len(figs)}"
            curve = _curve(curves, model, item, rule, axis)
            side = (
                f"<p><b>{rank}. {esc(rule)}</b> <small>({esc(rows['scope'].iloc[0])}; "
                f"{esc(rows['checks'].iloc[0])})</small></p>"
                + (f"<blockquote>{esc(sentence)}</blockquote>" if sentence else
                   "<p><i>no sentence given (the check's <code>sentence:</code>)</i></p>")
                + _facts(rows, unit)
            )  # fmt: skip
            if len(curve):
                y = "a(k)" if axis == "turn" else "a(t)"
                fig = plots.curve_figure(curve, "a", y, x_title=axis)
                fig.update_layout(height=260, showlegend=rank == 1)
                figs[fig_id] = fig
                plot = figure(fig_id, f"{rule}: {y} per policy with its 95 % band", 260)
            else:
                plot = note("no unit of this rule was decided")
            parts.append(
                '<div class="rule" style="display:flex;gap:1.5em;align-items:flex-start">'
                f'<div style="flex:1 1 55%">{plot}</div>'
                f'<div style="flex:1 1 45%">{side}</div></div>'
            )
        # the order is the finding; each rule's curve and counts are its evidence, folded
        html.append(f"<h3>{esc(title)}</h3>" + fold(f"{len(order)} rules: {falls}", "".join(parts)))
    return "".join(html), figs
