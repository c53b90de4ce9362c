"""The "Where the prompt's attention goes" section: the prompt's attention share against t per
layer group (trained, untrained twin, the uniform-attention reference), its decay exponent
beside alpha per layer, and a sentence computed from them on whether this model's forgetting
follows dilution (docs/architecture.md, "Estimators: attention share").

Exponents come from fits.csv's per-model pooled rows (metrics `share_prompt_mean` and
`rel_l2`; nothing re-fit); the uniform reference's exponent is fitted here
over attention.csv's `uniform` column at the same positions, as the share's was.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from harness.analysis.powerlaw import fit_alpha
from harness.models import is_untrained
from harness.report.html import esc, figure, fold, note, table
from harness.report.load import RunData
from harness.report.plots import _layout, color, layer_groups

# share exponent and alpha "near each other": within this many exponent units (or a quarter
# of alpha, when that is larger); the two are the same estimator on the same positions
NEAR = 0.15
SINK_HOLDS = 0.5  # mean sink share at the last position above which the sink is named
METRICS = ("rel_l2", "share_prompt_mean")


def _model_order(models) -> list[str]:
    return sorted(set(models), key=lambda m: (is_untrained(m), m))


def exponents(fits: pd.DataFrame | None) -> pd.DataFrame:
    """Per-model pooled exponents: model, layer, metric, alpha, low, high (layers >= 1)."""
    cols = ["model", "layer", "metric", "alpha", "low", "high"]
    if fits is None:
        return pd.DataFrame(columns=cols)
    pooled = fits[
        fits["metric"].isin(METRICS) & (fits["layer"] >= 1) & (fits["pair"] == "all")
        & (fits["item"] == "all") & (fits["policy"] == "all")
    ]  # fmt: skip
    return pooled.rename(columns={"alpha_low": "low", "alpha_high": "high"})[cols]


def share_matrix(att: pd.DataFrame, layers: list[int], column: str):
    """(t (T,), values (n_pairs, T)) of `column` averaged over `layers`, NaN where absent."""
    rows = att[att["layer"].isin(layers)]
    wide = rows.groupby(["pair", "t"])[column].mean().unstack("t").sort_index(axis=1)
    return wide.columns.to_numpy(dtype=np.int64), wide.to_numpy(dtype=float)


def uniform_exponent(att: pd.DataFrame, model: str, t_min: int) -> float:
    """Exponent of (P - 1)/(P + t) over the model's positions, fitted as the share was."""
    sub = att[att["model"] == model]
    t, d = share_matrix(sub, [int(sub["layer"].min())], "uniform")
    return fit_alpha(t, d, t_min=t_min, n_boot=1).alpha


def group_table(att: pd.DataFrame, exps: pd.DataFrame, t_min: int) -> pd.DataFrame:
    """Per model and layer group: mean share exponent, mean alpha, the uniform exponent and
    the sink's mean share at each pair's last position."""
    out = []
    for model in _model_order(att["model"]):
        sub = att[att["model"] == model]
        u = uniform_exponent(att, model, t_min)
        last = sub[sub["t"] == sub.groupby("pair")["t"].transform("max")]
        for name, members in layer_groups([int(x) for x in sub["layer"].unique()]):
            mine = exps[(exps["model"] == model) & exps["layer"].isin(members)]
            mean = {m: mine[mine["metric"] == m]["alpha"].mean() for m in METRICS}
            sink = last[last["layer"].isin(members)]["share_sink_mean"].mean()
            out.append(
                {"model": model, "group": name, "share_exponent": mean["share_prompt_mean"],
                 "alpha": mean["rel_l2"], "uniform_exponent": u, "sink_share_end": sink}
            )  # fmt: skip
    return pd.DataFrame(out)


def dilution_sentence(model: str, rows: pd.DataFrame) -> str:
    """Does this model's forgetting follow dilution? Computed from its group rows."""
    beta, alpha = rows["share_exponent"].mean(), rows["alpha"].mean()
    u, sink = rows["uniform_exponent"].iloc[0], rows["sink_share_end"].mean()
    if math.isnan(beta) or math.isnan(alpha):
        return f"{model}: no exponent to compare (fits.csv lacks the share or alpha rows)."
    head = (
        f"{model}: the prompt's attention share falls with exponent {beta:.2f} over the layer "
        f"groups (uniform attention: {u:.2f}), its hidden-state trace with α = {alpha:.2f}"
    )
    sink_part = f"; the first token holds {100 * sink:.0f} % of the attention at the end"
    sink_part = sink_part if sink >= SINK_HOLDS else ""
    if _near(beta, alpha):
        verdict = "the exponents are near each other: the forgetting follows dilution"
    elif beta < alpha:
        verdict = (
            "the share falls slower than the trace: the layers still attend to the prompt while "
            "the hidden states forget it, so the forgetting is not dilution alone"
        )
    else:
        verdict = (
            "the share falls faster than the trace: the prompt outlives its attention, carried by "
            "what the continuation relays"
        )
    return f"{head}: {verdict}{sink_part}.{_group_clause(rows)}"


def _near(beta: float, alpha: float) -> bool:
    return abs(beta - alpha) <= max(NEAR, 0.25 * abs(alpha))


def _group_clause(rows: pd.DataFrame) -> str:
    """Which layer groups follow dilution when the groups disagree (with their numbers)."""
    if "group" not in rows.columns or len(rows) < 2:
        return ""
    near = [_near(b, a) for b, a in zip(rows["share_exponent"], rows["alpha"], strict=True)]
    if all(near) or not any(near):
        return ""
    parts = [
        f"{g.split(' (')[0]} {b:.2f} vs {a:.2f}" + (" (near)" if n else "")
        for g, b, a, n in zip(rows["group"], rows["share_exponent"], rows["alpha"], near,
                              strict=True)
    ]  # fmt: skip
    return " By layer group (share exponent vs α): " + ", ".join(parts) + "."


def share_figure(att: pd.DataFrame):
    """Log-log share_prompt_mean per layer group, one panel per model, with the uniform
    reference (grey dashed) and the sink's share of the deepest group (dotted)."""
    from plotly.subplots import make_subplots

    models = _model_order(att["model"])
    fig = make_subplots(
        rows=1, cols=len(models), subplot_titles=[esc(m) for m in models], shared_yaxes=True
    )
    for col, model in enumerate(models, start=1):
        sub = att[att["model"] == model]
        groups = layer_groups([int(x) for x in sub["layer"].unique()])
        for g, (name, members) in enumerate(groups):
            t, d = share_matrix(sub, members, "share_prompt_mean")
            with np.errstate(invalid="ignore"):
                mean = np.nanmean(d, axis=0)
            fig.add_scatter(
                x=t, y=mean, mode="lines+markers", marker=dict(size=4), row=1, col=col,
                line=dict(color=color(g)), name=esc(name), legendgroup=name,
                showlegend=col == 1, hovertemplate="t=%{x}<br>share=%{y:.3g}<extra></extra>",
            )  # fmt: skip
        t, d = share_matrix(sub, [groups[-1][1][0]], "uniform")
        fig.add_scatter(
            x=t, y=np.nanmean(d, axis=0), mode="lines", row=1, col=col, hoverinfo="skip",
            line=dict(color="#555", dash="dash", width=1), name="(P-1)/(P+t) uniform",
            showlegend=col == 1, legendgroup="uniform",
        )  # fmt: skip
        t, d = share_matrix(sub, groups[-1][1], "share_sink_mean")
        fig.add_scatter(
            x=t, y=np.nanmean(d, axis=0), mode="lines", row=1, col=col, hoverinfo="skip",
            line=dict(color="#888", dash="dot", width=1.5), name="first token (late group)",
            showlegend=col == 1, legendgroup="sink",
        )  # fmt: skip
    fig.update_xaxes(type="log", title_text="t (continuation position)")
    fig.update_yaxes(type="log")
    fig.update_yaxes(title_text="attention share", row=1, col=1)
    return _layout(fig, 440)


def exponent_figure(exps: pd.DataFrame, uniform: dict[str, float]):
    """Per layer: the share's exponent beside alpha, trained solid, twin dashed."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for i, model in enumerate(_model_order(exps["model"])):
        dash = "dash" if is_untrained(model) else "solid"
        for k, (metric, text) in enumerate((("rel_l2", "α"), ("share_prompt_mean", "share"))):
            rows = exps[(exps["model"] == model) & (exps["metric"] == metric)].sort_values("layer")
            fig.add_scatter(
                x=rows["layer"], y=rows["alpha"], mode="lines+markers",
                name=f"{esc(model)} · {text}", line=dict(color=color(2 * i + k), dash=dash),
                error_y=dict(
                    type="data", symmetric=False, array=rows["high"] - rows["alpha"],
                    arrayminus=rows["alpha"] - rows["low"], thickness=1,
                ),
                hovertemplate="layer %{x}<br>exponent=%{y:.3f}<extra></extra>",
            )  # fmt: skip
    for model, u in uniform.items():
        if not math.isnan(u) and not is_untrained(model):
            fig.add_hline(y=u, line=dict(color="#999", dash="dot"),
                          annotation_text=f"uniform attention: {u:.2f}")  # fmt: skip
    fig.update_xaxes(title_text="hidden-state index l (the output of decoder layer l - 1)")
    fig.update_yaxes(title_text="decay exponent")
    return _layout(fig, 420)


def absent_reason(data: RunData) -> str:
    """Why attention.csv has nothing to show: the probe off, a backend that measures no
    attention, or the file missing."""
    manifest = data.manifest or {}
    probe = (manifest.get("config") or {}).get("probe") or {}
    if probe.get("enabled") is False:
        return "The probe was off in this run, so no attention share was measured."
    backends = manifest.get("probe_backends") or {}
    others = sorted({b for b in backends.values() if b != "hf"})
    if others:
        return (
            f"The attention share is measured only by the hf probe (transformers, in the "
            f"divergence's forward); this run probed with {', '.join(others)}, which returns "
            "no attention weights."
        )
    return data.missing("attention.csv")


def attention_section(data: RunData) -> tuple[str, dict]:
    att = data.frame("attention.csv")
    if att is None or att.empty:
        return note(absent_reason(data)), {}
    t_min = int(((data.manifest or {}).get("config") or {}).get("probe", {}).get("t_min", 16))
    exps = exponents(data.frame("fits.csv"))
    groups = group_table(att, exps, t_min)
    body = [
        figure(
            "fig-attention-share",
            "Attention of the record's own continuation tokens on its prompt (the tokens after "
            "the first; mean over heads, layers of each group and pairs) against t, log-log. "
            "Grey dashed: (P - 1)/(P + t), the same share under uniform attention (dilution). "
            "Dotted: the first token's share (the attention sink) in the late group.",
            440,
        ),
        fold("Per layer: the share's exponent beside α", figure(
            "fig-attention-exponent",
            "Per layer, the decay exponent of the prompt's attention share beside α of rel_l2 "
            "(fits.csv, pooled over every pair, 95 % intervals); solid: trained, dashed: "
            "untrained twin; dotted: the uniform reference's exponent over the same positions. "
            "Dilution predicts the share follows the reference and α follows the share.",
            420,
        )),
    ]  # fmt: skip
    uniform = {m: uniform_exponent(att, m, t_min) for m in _model_order(att["model"])}
    figs = {
        "fig-attention-share": share_figure(att),
        "fig-attention-exponent": exponent_figure(exps, uniform),
    }
    sentences = [dilution_sentence(m, rows) for m, rows in groups.groupby("model", sort=False)]
    body.append("<ul>" + "".join(f"<li>{esc(s)}</li>" for s in sentences) + "</ul>")
    headers = ["model", "layer group", "share exponent", "α (rel_l2)", "uniform exponent",
               "first token's share at the end"]  # fmt: skip
    body.append(
        fold("Per layer group (attention.csv)", table(headers, groups.itertuples(index=False)))
    )
    body.append(turns_part(data.frame("attention_turns.csv")))
    return "".join(body), figs


def turns_part(turns: pd.DataFrame | None) -> str:
    """Conversations: the prompt's share per reply, mean over layers and pairs."""
    if turns is None or turns.empty:
        return ""
    mean = turns.groupby(["model", "item", "policy", "turn"], as_index=False)[
        ["share_prompt_mean", "share_sink_mean", "uniform"]
    ].mean()
    return fold("Per reply of a conversation: the prompt's share turn by turn", note(
        "The shares averaged over each reply's generated tokens, over layers and pairs "
        "(attention_turns.csv): how much of each reply's attention the system prompt still "
        "gets, turn by turn."
    ) + table(["model", "item", "policy", "turn", "share (prompt)", "share (first token)",
               "uniform"], mean.itertuples(index=False)))  # fmt: skip
