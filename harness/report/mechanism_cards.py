"""The report's cards on the mechanism and what links it to behaviour: the mean alpha per model
and the trained vs untrained speed (only on intervals that do not overlap), alpha vs behaviour
across conditions (correlation.csv, "correlates" only on Holm-adjusted permutation p-values),
and the window-level predictor."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from harness.models import is_untrained
from harness.report.verdicts import Card, ci_text


def mechanism_card(summary: pd.DataFrame | None, fits: pd.DataFrame | None) -> Card | None:
    """Mean alpha per model: summary.csv alpha_mean averaged over conditions, else the mean
    of the rel_l2 layer fits (layers >= 1) in fits.csv."""
    per_model: dict[str, tuple[float, str]] = {}
    if summary is not None and "alpha_mean" in summary.columns:
        for model, a in summary.groupby("model")["alpha_mean"].mean().dropna().items():
            per_model[model] = (a, "summary.csv")
    if fits is not None:
        rel = fits[(fits["metric"] == "rel_l2") & (fits["layer"] >= 1)]
        if "pair" in rel.columns and (rel["pair"] == "all").any():
            rel = rel[rel["pair"] == "all"]  # pooled per condition, not every single pair
        for model, a in rel.groupby("model")["alpha"].mean().dropna().items():
            per_model.setdefault(model, (a, "fits.csv"))
    if not per_model:
        return None
    parts = [f"α = {a:.2f} for {model} ({src})" for model, (a, src) in sorted(per_model.items())]
    card = Card(title="Mechanism: how fast the prompt's trace fades", kind="mechanism")
    card.sentences.append(
        "Hidden-state divergence between the two prompts decays like t^-α: "
        + "; ".join(parts)
        + " (mean over layers 1..L and conditions)."
    )
    trained = [a for m, (a, _) in per_model.items() if not is_untrained(m)]
    untrained = [a for m, (a, _) in per_model.items() if is_untrained(m)]
    if trained and untrained:
        speed = twin_speed(_alpha_bounds(summary, fits))
        card.sentences.append(
            f"The trained model forgets the prompt {speed} its untrained twin "
            f"(α {np.mean(trained):.2f} vs {np.mean(untrained):.2f})."
        )
    return card


def _alpha_bounds(summary: pd.DataFrame | None, fits: pd.DataFrame | None) -> pd.DataFrame:
    """(model, low, high) of every α interval the card's means rest on: summary.csv's
    alpha_mean per condition, and fits.csv's rel_l2 layer fits (layers >= 1, pooled pairs) of
    the models summary.csv lacks (the card's own fallback)."""
    cols = ["model", "low", "high"]
    parts = []
    if summary is not None and {"alpha_mean_low", "alpha_mean_high"} <= set(summary.columns):
        parts.append(summary[["model", "alpha_mean_low", "alpha_mean_high"]].set_axis(cols, axis=1))
    if fits is not None and {"alpha_low", "alpha_high"} <= set(fits.columns):
        rel = fits[(fits["metric"] == "rel_l2") & (fits["layer"] >= 1)]
        if "pair" in rel.columns and (rel["pair"] == "all").any():
            rel = rel[rel["pair"] == "all"]
        have = set(parts[0]["model"]) if parts else set()
        rel = rel[~rel["model"].isin(have)]
        parts.append(rel[["model", "alpha_low", "alpha_high"]].set_axis(cols, axis=1))
    return pd.concat(parts) if parts else pd.DataFrame(columns=cols)


def twin_speed(bounds: pd.DataFrame) -> str:
    """ "faster than" / "slower than" only when every trained α interval (`_alpha_bounds`)
    lies above / below every untrained one; else "cannot tell whether faster or slower than"
    (a 0.02 gap of point estimates was read as faster)."""
    twin = bounds["model"].map(is_untrained).astype(bool)
    low, high = bounds["low"].astype(float), bounds["high"].astype(float)
    lt, ht, lu, hu = (
        low[~twin].dropna(),
        high[~twin].dropna(),
        low[twin].dropna(),
        high[twin].dropna(),
    )
    if min(len(lt), len(ht), len(lu), len(hu)) == 0:
        return "(cannot tell whether faster or slower: no α interval) than"
    if lt.min() > hu.max():
        return "faster than"
    if ht.max() < lu.min():
        return "slower than"
    return "(cannot tell whether faster or slower: the α intervals overlap) than"


def correlation_card(
    correlation: pd.DataFrame | None, within: list[str] | None = None
) -> Card | None:
    """The cross-condition coefficient, never alone: `within` (the within-item sentences of
    linkage.csv) follow it, or a sentence saying none could be estimated."""
    if correlation is None or not {"x", "y", "spearman"} <= set(correlation.columns):
        return None
    rows = correlation.to_dict("records")
    preferred = [r for r in rows if r["x"] == "alpha_mean" and r["y"] == "auc"]
    row = (preferred or rows)[0]
    n = row.get("n")
    n_text = f"across {int(n)} conditions, " if n is not None and not math.isnan(n) else ""
    p_text = _permutation_text(row, len(rows))
    lead = f"{n_text[:1].upper()}{n_text[1:]}Spearman ρ({row['x']}, {row['y']})"
    if math.isnan(row["spearman"]):
        sentence = f"{lead} could not be estimated (too few conditions or no variation)."
    else:
        band = ci_text(row, "spearman", with_n=False)  # n is in the lead already
        sentence = f"{lead} = {row['spearman']:.2f}{band}{p_text}."
    within = within or [
        "No within-item coefficient was estimated (linkage.csv missing or empty): this "
        "cross-condition value may only reflect how the items differ."
    ]
    title = "Does α predict behaviour?"
    return Card(title=title, sentences=[sentence, *within], kind="correlation")


def _permutation_text(row: dict, pairs: int, alpha: float = 0.05) -> str:
    """The permutation p-value and what it decides: Holm-adjusted over the `pairs` rows of
    correlation.csv, "correlates" only below alpha (1 - the default level), else cannot tell."""
    p, adjusted = row.get("perm_p"), row.get("perm_p_holm")
    if p is None or math.isnan(p):
        return ""
    if adjusted is None or math.isnan(adjusted):
        return f", permutation p = {p:.2g}"
    word = "they correlate" if adjusted < alpha else "cannot tell whether they correlate"
    return (f", permutation p = {p:.2g} ({adjusted:.2g} after Holm over the {pairs} pairs "
            f"tested: {word} at {alpha:g})")  # fmt: skip


def predictor_card(predictor: pd.DataFrame | None) -> Card | None:
    if predictor is None or not {"model", "features", "auroc"} <= set(predictor.columns):
        return None
    card = Card(title="Early warning from divergence", kind="predictor")
    for model, rows in predictor.groupby("model", sort=True):
        by = {r["features"]: r for r in rows.to_dict("records")}
        signal, base = by.get("divergence+log_t"), by.get("log_t")
        if signal is None or base is None:
            continue
        if math.isnan(signal["auroc"]) or math.isnan(base["auroc"]):
            why = signal.get("reason") or base.get("reason") or "too few windows"
            card.sentences.append(f"{model}: AUROC not estimable ({why}).")
            continue
        gain = signal["auroc"] - base["auroc"]
        card.sentences.append(
            f"{model}: violations predicted with AUROC {signal['auroc']:.2f}"
            f"{ci_text(signal, 'auroc')} from divergence and position vs {base['auroc']:.2f}"
            f"{ci_text(base, 'auroc')} from position alone ({gain:+.2f})."
        )
    return card if card.sentences else None
