"""Plotly figures of the report. Every label that comes from the run passes `label` (plotly
renders a subset of HTML in names and hover texts, so run strings are escaped there too)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from harness.analysis.fits import layer_groups
from harness.analysis.powerlaw import fit_alpha, reference_curves
from harness.models import is_untrained
from harness.report.html import esc as label
from harness.report.verdicts import policy_order

PALETTE = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
    "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f",
]  # fmt: skip
REF_T_MIN = 4  # reference curves are drawn from this t on
N_BOOT = 200  # bootstrap draws of the display fits (the stored fits carry the full CIs)


def color(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def rgba(hex_color: str, alpha: float) -> str:
    r, g, b = (int(hex_color[k : k + 2], 16) for k in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


def first_entry(shown: set, name: str) -> bool:
    """True the first time `name` is drawn in a figure: it gets the legend entry then, so a
    line that only appears in a later panel (a policy of the conversation items only) is
    named too, and no name is listed twice."""
    first = name not in shown
    shown.add(name)
    return first


def _layout(fig, height: int, **kw):
    fig.update_layout(
        template="plotly_white",
        height=height,
        margin=dict(l=60, r=20, t=50, b=50),
        legend=dict(orientation="h", y=-0.18),
        font=dict(family="system-ui, -apple-system, Segoe UI, Roboto, sans-serif", size=12),
        **kw,
    )
    return fig


def _grid(n: int, max_cols: int = 3) -> tuple[int, int]:
    cols = min(n, max_cols)
    return math.ceil(n / cols), cols


def pair_matrix(div: pd.DataFrame, layers: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """(t (T,), rel_l2 (n_pairs, T)) averaged over `layers`, NaN where a pair lacks t."""
    rows = div[div["layer"].isin(layers)]
    table = rows.groupby(["pair", "t"])["rel_l2"].mean().unstack("t").sort_index(axis=1)
    return table.columns.to_numpy(dtype=np.int64), table.to_numpy(dtype=float)


def fit_line(t: np.ndarray, d: np.ndarray, alpha: float, t_min: int = 16):
    """The fitted power law through the mean curve over [t_min, max t]: (t, C t^-alpha)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.nanmean(d, axis=0)
        sel = (t >= t_min) & np.isfinite(np.log(mean))
        if not sel.any() or math.isnan(alpha):
            return None
        c = np.mean(np.log(mean[sel]) + alpha * np.log(t[sel]))
    ts = t[sel].astype(float)
    return ts, np.exp(c) * ts**-alpha


def divergence_figure(div: pd.DataFrame, prompt_len: dict[str, int]):
    """Log-log rel_l2 per layer group and model, with display fits and reference curves."""
    from plotly.subplots import make_subplots

    models = sorted(div["model"].unique(), key=lambda m: (is_untrained(m), m))
    fig = make_subplots(
        rows=1, cols=len(models), subplot_titles=[label(m) for m in models], shared_yaxes=True
    )
    for col, model in enumerate(models, start=1):
        sub = div[div["model"] == model]
        tag_model = "untrained" if is_untrained(model) else "trained"
        layers = [int(x) for x in sub["layer"].unique()]
        groups = layer_groups(layers)
        for g, (name, members) in enumerate(groups):
            t, d = pair_matrix(sub, members)
            with np.errstate(invalid="ignore"):
                mean = np.nanmean(d, axis=0)
            fit = fit_alpha(t, d, n_boot=N_BOOT)
            tag = f"α = {fit.alpha:.2f}" if not math.isnan(fit.alpha) else fit.reason
            fig.add_scatter(
                x=t, y=mean, mode="lines+markers", marker=dict(size=4), row=1, col=col,
                line=dict(color=color(g)), name=f"{tag_model} · {name}: {tag}",
                legendgroup=f"{model}{g}",
                hovertemplate="t=%{x}<br>rel_l2=%{y:.3g}<extra></extra>",
            )  # fmt: skip
            line = fit_line(t, d, fit.alpha)
            if line is not None:
                fig.add_scatter(
                    x=line[0], y=line[1], mode="lines", row=1, col=col, showlegend=False,
                    line=dict(color=color(g), dash="dot", width=1.5), name=f"fit {name}",
                    legendgroup=f"{model}{g}", hoverinfo="skip",
                )  # fmt: skip
            if g == len(groups) - 1:
                refs = reference_curves(t, d, prompt_len.get(model, 1), max(members))
                far = t >= REF_T_MIN  # (log t)^(L-1) vanishes at t = 1: the bound is asymptotic
                # with L ~ 30, (log t)^(L-1) spans tens of decades: draw a reference only where
                # it stays within two decades of the data, so it cannot squash the data's axis
                finite = d[np.isfinite(d) & (d > 0)]
                low, high = (finite.min() / 100, finite.max() * 100) if finite.size else (0, 0)
                for ref, dash, text in (("inv_t", "dash", "1/t"), ("bound", "longdash", "bound")):
                    curve = np.where((refs[ref] >= low) & (refs[ref] <= high), refs[ref], np.nan)
                    fig.add_scatter(
                        x=t[far], y=curve[far], mode="lines", row=1, col=col, hoverinfo="skip",
                        line=dict(color="#555", dash=dash, width=1),
                        name=f"{text} (scaled)", showlegend=col == 1, legendgroup=ref,
                    )  # fmt: skip
    fig.update_xaxes(type="log", title_text="t (continuation position)")
    fig.update_yaxes(type="log")
    fig.update_yaxes(title_text="rel_l2", row=1, col=1)
    return _layout(fig, 460)


def alpha_by_layer_figure(alpha: pd.DataFrame):
    """alpha(layer) per model with CI error bars; `alpha` has model, layer, alpha, low, high."""
    import plotly.graph_objects as go

    fig = go.Figure()
    models = sorted(alpha["model"].unique(), key=lambda m: (is_untrained(m), m))
    for i, model in enumerate(models):
        rows = alpha[alpha["model"] == model].sort_values("layer")
        fig.add_scatter(
            x=rows["layer"], y=rows["alpha"], mode="lines+markers", name=label(model),
            line=dict(color=color(i), dash="dash" if is_untrained(model) else "solid"),
            error_y=dict(
                type="data", symmetric=False, array=rows["high"] - rows["alpha"],
                arrayminus=rows["alpha"] - rows["low"], thickness=1,
            ),
            hovertemplate="layer %{x}<br>α=%{y:.3f}<extra></extra>",
        )  # fmt: skip
    fig.add_hline(y=1.0, line=dict(color="#999", dash="dot"), annotation_text="α = 1 (1/t)")
    fig.update_xaxes(title_text="hidden-state index l (0 = embeddings)")
    fig.update_yaxes(title_text="α (rel_l2)")
    return _layout(fig, 400)


def _panel_titles(frame: pd.DataFrame) -> list[tuple[str, str]]:
    return list(frame.groupby(["model", "item"], sort=True).groups)


def curve_figure(frame: pd.DataFrame, y: str, y_title: str, step: bool = False, x_title: str = "t"):
    """One panel per (model, item), one line per policy with its CI band (low, high)."""
    import plotly.graph_objects as go  # noqa: F401
    from plotly.subplots import make_subplots

    panels = _panel_titles(frame)
    rows, cols = _grid(len(panels))
    multi_model = frame["model"].nunique() > 1
    titles = [label(f"{i} · {m}" if multi_model else i) for m, i in panels]
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=titles, shared_yaxes=True)
    colors = {p: color(k) for k, p in enumerate(policy_order(frame["policy"]))}
    shape = "hv" if step else "linear"
    shown: set[str] = set()
    for k, (model, item) in enumerate(panels):
        r, c = divmod(k, cols)
        panel = frame[(frame["model"] == model) & (frame["item"] == item)]
        for policy in policy_order(panel["policy"]):
            cond = panel[panel["policy"] == policy].sort_values("t")
            col = colors[policy]
            band = cond[cond["low"].notna() & cond["high"].notna()]
            if len(band):
                fig.add_scatter(
                    x=np.concatenate([band["t"], band["t"][::-1]]),
                    y=np.concatenate([band["high"], band["low"][::-1]]),
                    mode="lines", fill="toself", fillcolor=rgba(col, 0.12),
                    line=dict(width=0, shape=shape),
                    hoverinfo="skip", showlegend=False, legendgroup=policy,
                    row=r + 1, col=c + 1,
                )  # fmt: skip
            fig.add_scatter(
                x=cond["t"], y=cond[y], mode="lines+markers", marker=dict(size=5),
                line=dict(color=col, shape=shape), name=label(policy), legendgroup=policy,
                showlegend=first_entry(shown, policy), row=r + 1, col=c + 1,
                hovertemplate=label(policy) + "<br>t=%{x}<br>%{y:.2f}<extra></extra>",
            )  # fmt: skip
    fig.update_yaxes(range=[-0.03, 1.03], title_text=y_title, col=1)
    fig.update_xaxes(title_text=x_title, row=rows)
    return _layout(fig, 300 * rows + 80)


def turn_divergence_figure(mean: pd.DataFrame, starts: pd.DataFrame):
    """One panel per (model, item): rel_l2 over t per pair (colour = policy), diamonds at each
    reply's first token. `mean`: model, item, policy, pair, t, rel_l2; `starts`: pair, t."""
    from plotly.subplots import make_subplots

    panels = _panel_titles(mean)
    rows, cols = _grid(len(panels))
    multi_model = mean["model"].nunique() > 1
    titles = [label(f"{i} · {m}" if multi_model else i) for m, i in panels]
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=titles, shared_yaxes=True)
    colors = {p: color(k) for k, p in enumerate(policy_order(mean["policy"]))}
    shown: set[str] = set()
    for k, (model, item) in enumerate(panels):
        r, c = divmod(k, cols)
        panel = mean[(mean["model"] == model) & (mean["item"] == item)]
        for pair, rows_ in panel.groupby("pair", sort=True):
            policy = str(rows_["policy"].iloc[0])
            col = colors[policy]
            fig.add_scatter(
                x=rows_["t"], y=rows_["rel_l2"], mode="lines", line=dict(color=col, width=1.2),
                name=label(policy), legendgroup=policy, showlegend=policy not in shown,
                row=r + 1, col=c + 1,
                hovertemplate=label(pair) + "<br>t=%{x}<br>rel_l2=%{y:.3g}<extra></extra>",
            )  # fmt: skip
            shown.add(policy)
            marks = rows_.merge(starts, on=["pair", "t"])
            fig.add_scatter(
                x=marks["t"], y=marks["rel_l2"], mode="markers", showlegend=False,
                marker=dict(symbol="diamond", size=8, color=col), legendgroup=policy,
                row=r + 1, col=c + 1, hovertemplate="reply starts · t=%{x}<extra></extra>",
            )  # fmt: skip
    fig.update_xaxes(type="log", title_text="t (every token after the prompt)", row=rows)
    fig.update_yaxes(type="log")
    fig.update_yaxes(title_text="rel_l2", col=1)
    return _layout(fig, 300 * rows + 80)


def turn_influence_figure(mean: pd.DataFrame):
    """KL at each reply's first token by turn, one line per (model, policy); `mean`: model,
    policy, turn, kl, kl_low, kl_high (means over pairs; the band is the bracket's)."""
    import plotly.graph_objects as go

    fig = go.Figure()
    multi_model = mean["model"].nunique() > 1
    for k, ((model, policy), rows_) in enumerate(mean.groupby(["model", "policy"], sort=True)):
        name = label(f"{policy} · {model}" if multi_model else policy)
        err = dict(type="data", symmetric=False, array=rows_["kl_high"] - rows_["kl"],
                   arrayminus=rows_["kl"] - rows_["kl_low"], visible=True)  # fmt: skip
        fig.add_scatter(
            x=rows_["turn"], y=rows_["kl"], mode="lines+markers", name=name, error_y=err,
            line=dict(color=color(k)),
            hovertemplate=name + "<br>turn %{x}<br>KL=%{y:.3g}<extra></extra>",
        )  # fmt: skip
    fig.update_xaxes(title_text="turn", dtick=1)
    fig.update_yaxes(type="log", title_text="KL at the reply's first token")
    return _layout(fig, 380)


def pareto_figure(policies: pd.DataFrame):
    """Each policy's paired AUC gain over the baseline (delta, with its paired interval: the
    same samples of the same items under both) vs its token overhead; the Pareto frontier
    joined by a line. Never one policy's own AUC against another's: those may pool different
    items (a policy run on one item beside a baseline run on four)."""
    import plotly.graph_objects as go

    auc = policies[policies["metric"] == "auc"]
    if (auc["item"] == "all").any():
        auc = auc[auc["item"] == "all"]
    fig = go.Figure()
    for i, ((model, item), rows) in enumerate(auc.groupby(["model", "item"], sort=True)):
        rows = rows.sort_values("token_overhead")
        hover = [
            label(f"{p} · {item} · {model} · n = {n} pairs")
            for p, n in zip(rows["policy"], rows["n"], strict=True)
        ]
        pareto = rows["pareto"].astype(str).str.lower() == "true"
        fig.add_scatter(
            x=100 * rows["token_overhead"], y=rows["delta"], mode="markers+text",
            text=[label(p) for p in rows["policy"]], textposition="top center",
            error_y=dict(type="data", symmetric=False, thickness=1,
                         array=(rows["delta_high"] - rows["delta"]).fillna(0),
                         arrayminus=(rows["delta"] - rows["delta_low"]).fillna(0)),
            marker=dict(size=np.where(pareto, 13, 8), color=color(i),
                        symbol=np.where(pareto, "star", "circle")),
            name=label(f"{item} · {model}"), hovertext=hover,
            hovertemplate="%{hovertext}<br>overhead %{x:.1f} %<br>AUC gain %{y:+.2f}"
                          "<extra></extra>",
        )  # fmt: skip
        front = rows[pareto]
        if len(front) > 1:
            fig.add_scatter(
                x=100 * front["token_overhead"], y=front["delta"], mode="lines",
                line=dict(color=color(i), dash="dot"), showlegend=False, hoverinfo="skip",
            )  # fmt: skip
    fig.add_hline(y=0, line=dict(color="#999", width=1, dash="dash"))
    fig.update_xaxes(title_text="token overhead (% of generated tokens)")
    fig.update_yaxes(title_text="AUC gain over none, same samples", range=[-1.05, 1.05])
    return _layout(fig, 420)


def correlation_figure(summary: pd.DataFrame, x: str = "alpha_mean", y: str = "auc"):
    """One point per condition: alpha vs adherence AUC, coloured by policy, with CI bars."""
    import plotly.graph_objects as go

    fig = go.Figure()
    xci, yci = (
        (f"{c}_low", f"{c}_high") if f"{c}_low" in summary.columns else None for c in (x, y)
    )
    for k, policy in enumerate(policy_order(summary["policy"])):
        rows = summary[summary["policy"] == policy]
        hover = [
            label(f"{i} · {policy} · {m}")
            for i, m in zip(rows["item"], rows["model"], strict=False)
        ]
        kw = {}
        if xci:
            kw["error_x"] = dict(
                type="data", symmetric=False, array=rows[xci[1]] - rows[x],
                arrayminus=rows[x] - rows[xci[0]], thickness=1,
            )  # fmt: skip
        if yci:
            kw["error_y"] = dict(
                type="data", symmetric=False, array=rows[yci[1]] - rows[y],
                arrayminus=rows[y] - rows[yci[0]], thickness=1,
            )  # fmt: skip
        fig.add_scatter(
            x=rows[x], y=rows[y], mode="markers", marker=dict(size=10, color=color(k)),
            name=label(policy), hovertext=hover,
            hovertemplate="%{hovertext}<br>α=%{x:.3f}<br>AUC=%{y:.2f}<extra></extra>", **kw,
        )  # fmt: skip
    fig.update_xaxes(title_text=f"{x} (divergence decay exponent)")
    fig.update_yaxes(title_text=f"{y} (adherence)")
    return _layout(fig, 420)
