"""The report section "How far to trust the judge": calibration.csv as a table and in words."""

from __future__ import annotations

import math

import pandas as pd

from harness.report.html import esc, fmt_num, fmt_pct, note, table
from harness.report.load import RunData
from harness.stats.text import bracket, has_interval

# Landis & Koch's (1977) bands, the usual words for Cohen's kappa.
KAPPA_BANDS = [
    (0.0, "no agreement beyond chance"),
    (0.2, "slight agreement"),
    (0.4, "fair agreement"),
    (0.6, "moderate agreement"),
    (0.8, "substantial agreement"),
    (math.inf, "almost perfect agreement"),
]
HOW_TO_READ = (
    "Where an item has a judge check and a code check on the same windows, the judge's "
    "verdict is compared with the code's, window by window (windows where either is "
    "undetermined are left out). Accuracy is the share of windows where they agree; it flatters "
    "a judge when nearly every window passes, since a judge that always says “pass” then "
    "scores the pass rate. Cohen's κ corrects for that: the agreement beyond what two raters "
    "with the same pass rates would reach by chance, 1 = always agree, 0 = chance, below 0 = "
    "worse than chance; roughly, under 0.2 slight, 0.2–0.4 fair, 0.4–0.6 moderate, 0.6–0.8 "
    "substantial, above 0.8 almost perfect. The pooled row (“all”) takes chance within each "
    "rule, so a judge that only knows which rules usually fail gets no credit for it. 95 % CIs "
    "come from resampling samples. Trust the "
    "judge on rules code cannot check only as far as its κ on rules code can check, and go by "
    "the CI's lower end: a lower end near or below 0 means this run has not shown that the "
    "judge agrees with the code more than chance would."
)

SAME_SCALE = (
    "Sensitivity and specificity put the judge on the scale every check is measured on "
    "(docs/checks.md): with the code check's verdict as the truth, the share of its passing "
    "windows the judge passes and of its failing windows the judge fails, each with an exact "
    "(Clopper-Pearson) 95 % CI over windows. These are the rates that correct a judged "
    "adherence for the judge's errors (the adherence section's corrected AUC)."
)


def kappa_words(kappa: float) -> str:
    if math.isnan(kappa):
        return "κ undefined (both gave one and the same verdict everywhere)"
    for upper, words in KAPPA_BANDS:  # upper ends included: 0.4 is fair, as Landis & Koch
        if kappa <= upper + 1e-9:
            return words
    return KAPPA_BANDS[-1][1]


def _interval(row: dict, base: str, percent: bool = False) -> str:
    low, high = row.get(f"{base}_low"), row.get(f"{base}_high")
    if not has_interval(low, high):
        return "no CI"
    return bracket(low, high, fmt_pct if percent else ".2f", opening="95 % CI ", sep=" to ", end="")


def _sentence(row: dict) -> str:
    """One model's overall agreement in words, from its pooled (or only) row."""
    kappa = float(row["kappa"])
    where = "" if row["item"] == "all" else f" ({row['judge']} vs {row['code']})"
    text = (
        f"{row['model']}: the judge agrees with the code checks{where} on "
        f"{fmt_pct(float(row['accuracy']))} of {int(row['n'])} windows "
        f"({_interval(row, 'accuracy', percent=True)}), κ = {fmt_num(kappa, 2)} "
        f"({_interval(row, 'kappa')}): {kappa_words(kappa)}."
    )
    low = row.get("kappa_low")
    if low is not None and not math.isnan(low) and low <= 0.0:
        text += " The CI reaches 0: no evidence here that it beats chance."
    return text


def _undetermined(windows: pd.DataFrame | None) -> str:
    if windows is None or "check" not in windows.columns:
        return ""
    judged = windows[windows["check"].astype(str).str.startswith("judge:")]
    if judged.empty:
        return ""
    missing = int(judged["passed"].isna().sum())
    return (
        f"The judge gave no usable verdict on {missing} of {len(judged)} judged windows "
        "(a malformed answer twice, an empty text or a text too long for its context); those "
        "count as undetermined, never as passes."
    )


def calibration_section(data: RunData) -> str:
    frame = data.frame("calibration.csv")
    undetermined = _undetermined(data.frame("windows.csv"))
    if frame is None:
        if undetermined:  # judge checks, but no code check on the same windows
            return note(data.missing("calibration.csv")) + note(undetermined)
        return note(
            "This run has no judge checks with a code check on the same windows "
            "(type: judge in a task suite), so there is no judge to calibrate."
        )
    rows = frame.to_dict("records")
    per_model = {}
    for row in rows:  # the pooled row wins over a model's only row
        if row["item"] == "all" or row["model"] not in per_model:
            per_model[row["model"]] = row
    sentences = "".join(f"<p>{esc(_sentence(r))}</p>" for r in per_model.values())
    headers = ["model", "item", "judge", "code", "n", "records", "accuracy", "95 % CI", "κ",
               "95 % CI", "both pass", "both fail", "judge only passes", "code only passes",
               "undetermined", "sensitivity", "95 % CI", "specificity", "95 % CI",
               "note"]  # fmt: skip
    cells = [
        [
            r["model"], r["item"], r["judge"], r["code"], r["n"], r["n_records"],
            r["accuracy"], _bracket(r, "accuracy"), r["kappa"], _bracket(r, "kappa"),
            r["agree_pass"], r["agree_fail"], r["judge_only_pass"], r["code_only_pass"],
            r["undetermined"], r.get("sensitivity"), _bracket(r, "sensitivity"),
            r.get("specificity"), _bracket(r, "specificity"), r.get("reason", ""),
        ]
        for r in rows
    ]  # fmt: skip
    parts = [note(HOW_TO_READ), note(SAME_SCALE), sentences]
    parts.append(note(undetermined) if undetermined else "")
    return "".join(parts) + table(headers, cells)


def _bracket(row: dict, base: str) -> str:
    low, high = row.get(f"{base}_low"), row.get(f"{base}_high")
    return bracket(low, high, fmt_num)
