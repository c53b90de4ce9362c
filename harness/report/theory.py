"""The "theory" section: the linear relay model (relay.csv) and attention-bias dilution
compensation (bias.csv), each shown next to what the paper claims."""

from __future__ import annotations

import pandas as pd

from harness.models import is_untrained
from harness.report.html import esc, figure, fold, note
from harness.report.plots import _layout, color, first_entry

RELAY_CLAIM = (
    "Paper: in the relay model layer 1 decays exactly as P/(P+t); deeper layers carry "
    "(log t)^(l-1) factors, so their local exponent is below 1 at finite t and rises toward 1 "
    "as t grows, and delta / (P (log t)^(L-1) / t) settles to a constant (the bound is tight)."
)
BIAS_CLAIM = (
    "Paper: adding lam * log((P + t)/P) to the prompt keys' attention logits compensates the "
    "dilution of the prompt's attention share; at lam = 1 it stops the decay (alpha near 0) and "
    "can reverse it (alpha < 0) in trained nets, while an untrained net need not follow. "
    "Under uniform attention lam = 1 holds the prompt's share near constant ((P + t)/(P + 2t))."
)


def relay_figure(relay: pd.DataFrame):
    from plotly.subplots import make_subplots

    fig = make_subplots(
        rows=1, cols=3,
        subplot_titles=["delta_l(t)", "local exponent α_l(t)", "bound ratio"],
    )  # fmt: skip
    has_ratio = "bound_ratio" in relay.columns
    for k, (layer, rows) in enumerate(relay.groupby("layer", sort=True)):
        rows = rows.sort_values("t")
        common = dict(mode="lines", line=dict(color=color(k)), legendgroup=str(layer))
        fig.add_scatter(x=rows["t"], y=rows["delta"], name=f"layer {layer}", row=1, col=1, **common)
        fig.add_scatter(
            x=rows["t"], y=rows["local_alpha"], showlegend=False, row=1, col=2, **common
        )
        if has_ratio:
            fig.add_scatter(
                x=rows["t"], y=rows["bound_ratio"], showlegend=False, row=1, col=3, **common
            )
    fig.add_hline(y=1.0, line=dict(color="#999", dash="dot"), row=1, col=2)
    fig.update_xaxes(type="log", title_text="t")
    # decade ticks only: plotly's automatic minor labels (2..9) overlap on short log ranges
    fig.update_yaxes(type="log", dtick=1, exponentformat="power", row=1, col=1)
    fig.update_yaxes(type="log", dtick=1, exponentformat="power", row=1, col=3)
    return _layout(fig, 400)


def relay_sentences(relay: pd.DataFrame) -> list[str]:
    """Measured counterparts of the claim: local exponent at the largest t per layer."""
    out = []
    for layer, rows in relay.groupby("layer", sort=True):
        rows = rows.sort_values("t")
        last = rows.iloc[-1]
        text = f"Layer {layer}: local exponent {last['local_alpha']:.3f} at t = {int(last['t']):,}"
        if "bound_ratio" in rows.columns and len(rows) > 1:
            tenth = rows.iloc[(rows["t"] - last["t"] / 10).abs().argmin()]
            text += (
                f", bound ratio {tenth['bound_ratio']:.3g} at t = {int(tenth['t']):,} and "
                f"{last['bound_ratio']:.3g} at t = {int(last['t']):,}"
            )
        out.append(text + ".")
    return out


def bias_figure(bias: pd.DataFrame):
    from plotly.subplots import make_subplots

    models = sorted(bias["model"].unique(), key=lambda m: (is_untrained(m), m))
    fig = make_subplots(
        rows=1, cols=len(models), subplot_titles=[esc(m) for m in models], shared_yaxes=True
    )
    lams = sorted(bias["lam"].unique())
    shown: set[str] = set()
    for col, model in enumerate(models, start=1):
        for k, lam in enumerate(lams):
            rows = bias[(bias["model"] == model) & (bias["lam"] == lam)].sort_values("layer")
            err = {
                "error_y": dict(
                    type="data", symmetric=False, array=rows["alpha_high"] - rows["alpha"],
                    arrayminus=rows["alpha"] - rows["alpha_low"], thickness=1,
                )
            }  # fmt: skip
            fig.add_scatter(
                x=rows["layer"], y=rows["alpha"], mode="lines+markers", name=f"lam = {lam:g}",
                line=dict(color=color(k)), legendgroup=str(lam),
                showlegend=first_entry(shown, str(lam)),
                row=1, col=col, **err,
            )  # fmt: skip
    fig.add_hline(y=0.0, line=dict(color="#999", dash="dot"))
    fig.update_xaxes(title_text="hidden-state index l")
    fig.update_yaxes(title_text="α (rel_l2)", col=1)
    return _layout(fig, 420)


def bias_sentences(bias: pd.DataFrame) -> list[str]:
    """Mean alpha over layers >= 1 at the smallest and largest lam, per model."""
    out = []
    for model, rows in bias[bias["layer"] >= 1].groupby("model", sort=True):
        means = rows.groupby("lam")["alpha"].mean().dropna()
        if len(means) < 2:
            continue
        lo_lam, hi_lam = means.index.min(), means.index.max()
        a0, a1 = means[lo_lam], means[hi_lam]
        verdict = (
            "reversed (alpha < 0)"
            if a1 < 0
            else "stopped (|alpha| < 0.05)"
            if abs(a1) < 0.05
            else "slowed"
            if a1 < a0
            else "not slowed"
        )
        out.append(
            f"{model}: mean α over layers {a0:.3f} at lam = {lo_lam:g} → {a1:.3f} at "
            f"lam = {hi_lam:g}: decay {verdict}." + share_clause(rows)
        )
    return out


def share_clause(rows: pd.DataFrame) -> str:
    """The prompt's attention share each lam leaves (bias.csv's share columns, mean over
    layers): its exponent and its values at t_min and at the end."""
    if "share_alpha" not in rows.columns or rows["share_alpha"].isna().all():
        return ""
    parts = []
    for lam, sub in rows.groupby("lam", sort=True):
        parts.append(
            f"lam = {lam:g}: exponent {sub['share_alpha'].mean():.2f}, "
            f"{sub['share_start'].mean():.3f} → {sub['share_end'].mean():.3f}"
        )
    return " Prompt's attention share (mean over layers) " + "; ".join(parts) + "."


def theory_section(relay: pd.DataFrame | None, bias: pd.DataFrame | None, missing) -> tuple:
    """(body html, {figure id: figure}). `missing(name)` gives the sentence for an absent file."""
    body, figs = [], {}
    body.append("<h3>Relay model</h3>")
    if relay is not None:
        figs["fig-relay"] = relay_figure(relay)
        body.append(note(RELAY_CLAIM, "claim"))
        body.append(
            "<ul>" + "".join(f"<li>{esc(s)}</li>" for s in relay_sentences(relay)) + "</ul>"
        )
        # the theory backs the run's findings; its curves are there when asked for
        body.append(fold("The relay model's curves", figure(
            "fig-relay",
            "Left: delta per layer on log-log axes (straight = power law). Middle: local "
            "exponent; a curve rising toward the dotted 1 is a 1/t decay slowed by log "
            "factors. Right: delta over the bound P (log t)^(L-1)/t; flat = the bound is "
            "tight.",
        )))  # fmt: skip
    else:
        body.append(note(missing("relay.csv") + " Write it with `harness relay --out DIR`."))
    body.append("<h3>Attention-bias compensation</h3>")
    if bias is not None:
        figs["fig-bias"] = bias_figure(bias)
        body.append(note(BIAS_CLAIM, "claim"))
        body.append("<ul>" + "".join(f"<li>{esc(s)}</li>" for s in bias_sentences(bias)) + "</ul>")
        body.append(fold("α by layer under each bias strength", figure(
            "fig-bias",
            "α by layer for each bias strength lam, trained model left, untrained twin right. "
            "Lines falling to the dotted 0 mean compensation stops the decay; below 0 it "
            "reverses it.",
        )))  # fmt: skip
    else:
        body.append(note(missing("bias.csv")))
    return "".join(body), figs
