"""Tidy frames the sections plot, taken from the stored files in a fixed order of preference.

A stored result is always preferred to recomputing it (adherence.csv before windows.csv). When
only the raw windows are stored, the scoring stage's own functions (harness.scoring.adherence)
derive the curves, so the report and the scorer cannot disagree on a definition.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from harness import results
from harness.models import trained_name
from harness.report.load import RunData
from harness.results import as_bool
from harness.scoring.curves import adherence_curves
from harness.scoring.passes import window_passes
from harness.scoring.survival import survival_curves

CONDITION = list(results.CONDITION)
# The plotted curves: a(t) and its interval bounds (low, high), n samples at t.
CURVE_COLUMNS = [*CONDITION, "t", "a", "low", "high", "n"]


def _windows_for_scoring(windows: pd.DataFrame) -> pd.DataFrame:
    """windows.csv in the form harness.scoring.adherence expects (scope and task columns)."""
    w = windows.copy()
    if "scope" not in w.columns:
        w["scope"] = np.where(w["window"] >= 0, "window", "response")
    for col, default in (("task", ""), ("run_id", ""), ("seed", 0)):
        if col not in w.columns:
            w[col] = default
    w["passed"] = w["passed"].map(as_bool)
    return w


def adherence_curve(data: RunData) -> tuple[pd.DataFrame | None, str]:
    """a(t) with its interval per condition (CURVE_COLUMNS), and the file it came from."""
    stored = data.frame("adherence_curve.csv")
    if stored is not None:
        out = stored.rename(columns={"a_low": "low", "a_high": "high"})
        return _sorted(out.reindex(columns=CURVE_COLUMNS)), "adherence_curve.csv"
    windows = data.frame("windows.csv")
    if windows is not None:
        out = adherence_curves(_windows_for_scoring(windows))
        out = out.groupby([*CONDITION, "t"], as_index=False).agg(
            {"a": "mean", "a_low": "mean", "a_high": "mean", "n": "sum"}
        )  # tasks merged: an item id is unique across suites
        out = out.rename(columns={"a_low": "low", "a_high": "high"})
        return _sorted(out.reindex(columns=CURVE_COLUMNS)), "windows.csv"
    return None, ""


def survival_curve(data: RunData) -> tuple[pd.DataFrame | None, str]:
    """Kaplan-Meier S(t) per condition: model, item, policy, t, survival, low, high."""
    stored = data.frame("survival.csv")
    source = "survival.csv"
    if stored is None and data.frame("windows.csv") is not None:
        stored, source = (
            survival_curves(window_passes(_windows_for_scoring(data.frame("windows.csv")))),
            "windows.csv",
        )
    if stored is None:
        return None, ""
    out = stored.rename(columns={"survival_low": "low", "survival_high": "high"})
    return _sorted(out.reindex(columns=[*CONDITION, "t", "survival", "low", "high"])), source


def _sorted(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.sort_values([*CONDITION, "t"], kind="stable").reset_index(drop=True)


def token_overhead(data: RunData) -> dict[tuple[str, str, str], float]:
    """(injected + restated) / generated per condition: summary.csv, else generations.jsonl."""
    summary = data.frame("summary.csv")
    if summary is not None and "token_overhead" in summary.columns:
        return {
            (r.model, r.item, r.policy): float(r.token_overhead)
            for r in summary.itertuples(index=False)
        }
    sums: dict[tuple[str, str, str], list[float]] = {}
    for record in data.generations or []:
        tokens = record.get("tokens") or {}
        key = (str(record.get("model", "")), str(record.get("item", "")), str(record.get("policy")))
        acc = sums.setdefault(key, [0.0, 0.0])
        acc[0] += float(tokens.get("injected", 0)) + float(tokens.get("restated", 0))
        acc[1] += float(tokens.get("generated", 0))
    return {key: (a / g if g else math.nan) for key, (a, g) in sums.items()}


def prompt_length(data: RunData, model: str) -> int:
    """Median prompt length in tokens of the model's generations (P of the bound curve)."""
    base = trained_name(model)
    lengths = [
        len(r.get("prompt_ids") or [])
        for r in data.generations or []
        if trained_name(str(r.get("model", ""))) == base
    ]
    lengths = [n for n in lengths if n]
    return int(np.median(lengths)) if lengths else 1


def alpha_by_layer(data: RunData) -> tuple[pd.DataFrame | None, str]:
    """alpha (rel_l2) per model and layer with its interval: model, layer, alpha, low, high.

    Read from fits.csv's per-model pooled rows (item = policy = pair = "all": every probed
    pair of the model, bootstrap over pairs), as the fits stage wrote them; nothing is re-fit.
    """
    fits = data.frame("fits.csv")
    if fits is None:
        return None, ""
    pooled = fits[(fits["metric"] == "rel_l2") & (fits["layer"] >= 1) & (fits["pair"] == "all")]
    pooled = pooled[(pooled["item"] == "all") & (pooled["policy"] == "all")]
    if pooled.empty:
        return None, ""
    out = pooled.rename(columns={"alpha_low": "low", "alpha_high": "high"})
    return out[["model", "layer", "alpha", "low", "high"]], "fits.csv, pooled over every pair"


ENDPOINT_ONLY = (
    "No hidden-state divergence here: the probe ran through a served model's endpoint "
    "(probe.backend openai), which hands out next-token log-probs but no hidden states, so "
    "divergence.csv and the attention files are written only by the local backends (hf, "
    "vllm); the prompt's next-token influence (delta log p, KL with its bracket) is in "
    "nexttoken.csv and its fits in fits.csv (layer -1)."
)


def endpoint_only(data: RunData) -> bool:
    """Whether every probe row came from the openai backend (no hidden states exist)."""
    nexttoken = data.frame("nexttoken.csv")
    return nexttoken is not None and len(nexttoken) > 0 and set(nexttoken["backend"]) == {"openai"}
