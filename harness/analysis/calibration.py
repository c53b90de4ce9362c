"""How far to trust a judge: its agreement with code checks on the same windows.

calibration.csv, from windows.csv. A judge check (id `judge:...`) and a code check (any other
check) of one item meet on a (record, window): the same sample's same window, or both on the
whole response (window -1). Over the meetings where both decided, the 2x2 table of verdicts
gives

- accuracy = share of windows where the two agree;
- Cohen's kappa = (p_o - p_e) / (1 - p_e), p_o = accuracy, p_e = the agreement expected by
  chance from the two pass rates, p_j p_c + (1 - p_j)(1 - p_c). NaN when p_e = 1 (both gave one
  and the same verdict everywhere: agreement beyond chance is not defined).
- Pooled over rules (strata s = (item, judge, code)), chance is taken within each rule:
  kappa = sum_s n_s (p_o,s - p_e,s) / sum_s n_s (1 - p_e,s), which is Cohen's kappa for one
  rule. Pooled marginals would credit a judge that only tracks which rule it is asked about
  (say, "fail" on every rule that mostly fails) with agreement it does not have.

CIs: percentile bootstrap over records (a record's windows are drawn together: windows of one
sample are not independent), n_boot draws from a generator seeded seed + row index; NaN when
fewer than max(10, n_boot / 2) draws are finite. Rows: one per (model, item, judge check, code
check), then one pooled row per model (item = judge = code = `all`) over every meeting, when
the model has more than one such pair (kappa stratified by rule, see above).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from harness.results import SAMPLE, TASK_CONDITION, CalibrationRow, result_frame

COLUMNS = CalibrationRow.columns()
RECORD = [*TASK_CONDITION, *SAMPLE]  # a record as windows.csv names it
JUDGE_PREFIX = "judge:"
POOLED = "all"


def verdict_value(passed) -> float:
    """windows.csv `passed` (bool, "True"/"False" read back from CSV, empty) -> 1 / 0 / NaN."""
    if passed is True or str(passed).lower() == "true":
        return 1.0
    if passed is False or str(passed).lower() == "false":
        return 0.0
    return math.nan


def agreement(tables: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(accuracy, kappa) of confusion tables (..., 4): [agree_pass, judge_only_pass,
    code_only_pass, agree_fail]. NaN where a table is empty (and kappa where p_e = 1)."""
    tables = np.asarray(tables, dtype=np.float64)
    both_pass, judge_only, code_only, both_fail = np.moveaxis(tables, -1, 0)
    n = tables.sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        observed = (both_pass + both_fail) / n
        judge_rate = (both_pass + judge_only) / n
        code_rate = (both_pass + code_only) / n
        chance = judge_rate * code_rate + (1 - judge_rate) * (1 - code_rate)
        kappa = np.where(chance < 1 - 1e-12, (observed - chance) / (1 - chance), np.nan)
    return observed, kappa


def stratified_agreement(tables: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(accuracy, kappa) pooled over strata: tables (..., S, 4), chance agreement per stratum
    (see the module docstring). One stratum gives `agreement`'s values."""
    tables = np.asarray(tables, dtype=np.float64)
    n = tables.sum(axis=-1)  # (..., S)
    observed, _ = agreement(tables)
    both_pass, judge_only, code_only, _ = np.moveaxis(tables, -1, 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        judge_rate, code_rate = (both_pass + judge_only) / n, (both_pass + code_only) / n
        chance = judge_rate * code_rate + (1 - judge_rate) * (1 - code_rate)
        used = n > 0
        agree = np.where(used, n * observed, 0.0).sum(axis=-1)
        expected = np.where(used, n * chance, 0.0).sum(axis=-1)
        total = n.sum(axis=-1)
        accuracy = agree / total
        room = total - expected
        kappa = np.where(room > 1e-9 * np.maximum(total, 1), (agree - expected) / room, np.nan)
    return accuracy, kappa


def meetings(windows: pd.DataFrame) -> pd.DataFrame:
    """One row per (record, window, judge check, code check) with both verdicts (1/0/NaN)."""
    keys = [c for c in RECORD if c in windows.columns] + ["window"]
    if windows.empty or "check" not in windows.columns:
        return pd.DataFrame(columns=[*keys, "judge", "judge_pass", "code", "code_pass"])
    frame = windows[[*keys, "check", "passed"]].copy()
    frame["verdict"] = frame["passed"].map(verdict_value)
    is_judge = frame["check"].astype(str).str.startswith(JUDGE_PREFIX)
    judged = frame[is_judge].rename(columns={"check": "judge", "verdict": "judge_pass"})
    coded = frame[~is_judge].rename(columns={"check": "code", "verdict": "code_pass"})
    return judged.drop(columns="passed").merge(coded.drop(columns="passed"), on=keys)


def _record_tables(group: pd.DataFrame) -> np.ndarray:
    """(records, rules, 4) confusion counts of the decided meetings: a record is the unit the
    bootstrap draws, a rule (item, judge, code) the stratum that chance agreement is taken in."""
    j, c = group["judge_pass"].to_numpy(), group["code_pass"].to_numpy()
    cells = np.stack(
        [(j == 1) & (c == 1), (j == 1) & (c == 0), (j == 0) & (c == 1), (j == 0) & (c == 0)],
        axis=1,
    ).astype(np.int64)
    record = group.groupby([k for k in RECORD if k in group], sort=True).ngroup().to_numpy()
    rule = group.groupby(["item", "judge", "code"], sort=True).ngroup().to_numpy()
    if not len(record):
        return np.zeros((0, 1, 4), dtype=np.int64)
    tables = np.zeros((record.max() + 1, rule.max() + 1, 4), dtype=np.int64)
    np.add.at(tables, (record, rule), cells)
    return tables


def _interval(draws: np.ndarray, n_boot: int, ci: float) -> tuple[float, float]:
    finite = draws[np.isfinite(draws)]
    if len(finite) < max(10, n_boot / 2):
        return math.nan, math.nan
    low, high = np.percentile(finite, [50 * (1 - ci), 50 * (1 + ci)])
    return float(low), float(high)


def calibration_row(labels: dict, group: pd.DataFrame, n_boot: int, ci: float, seed: int):
    """One calibration.csv row for these meetings (see the module docstring)."""
    decided = group.dropna(subset=["judge_pass", "code_pass"])
    tables = _record_tables(decided)
    by_rule = tables.sum(axis=0)  # (rules, 4)
    total = by_rule.sum(axis=0)
    accuracy, kappa = (float(v) for v in stratified_agreement(by_rule))
    row = {
        **labels, "n": int(total.sum()), "n_records": len(tables),
        "agree_pass": int(total[0]), "agree_fail": int(total[3]),
        "judge_only_pass": int(total[1]), "code_only_pass": int(total[2]),
        "undetermined": len(group) - len(decided), "accuracy": accuracy, "kappa": kappa,
        "accuracy_low": math.nan, "accuracy_high": math.nan,
        "kappa_low": math.nan, "kappa_high": math.nan, "reason": "",
    }  # fmt: skip
    if row["n"] == 0:
        return {**row, "reason": "no window where both checks decided"}
    if math.isnan(kappa):
        row["reason"] = "kappa undefined: both checks gave the same verdict on every window"
    if len(tables) < 2:
        return {**row, "reason": row["reason"] or "one record: no bootstrap CI"}
    rng = np.random.default_rng(seed)
    # how often each record is drawn, per draw: (n_boot, records)
    weights = rng.multinomial(len(tables), np.full(len(tables), 1 / len(tables)), size=n_boot)
    draws = np.einsum("br,rsk->bsk", weights.astype(np.float64), tables)
    draws_accuracy, draws_kappa = stratified_agreement(draws)
    row["accuracy_low"], row["accuracy_high"] = _interval(draws_accuracy, n_boot, ci)
    row["kappa_low"], row["kappa_high"] = _interval(draws_kappa, n_boot, ci)
    return row


def judge_calibration(
    windows: pd.DataFrame, *, n_boot: int = 1000, ci: float = 0.95, seed: int = 0
) -> pd.DataFrame:
    """calibration.csv: per (model, item, judge, code) and pooled per model (`all`)."""
    met = meetings(windows)
    if met.empty:
        return result_frame(CalibrationRow)
    groups = [
        (dict(zip(["model", "item", "judge", "code"], labels, strict=True)), group)
        for labels, group in met.groupby(["model", "item", "judge", "code"], sort=True)
    ]
    for model, group in met.groupby("model", sort=True):
        if group.groupby(["item", "judge", "code"]).ngroups > 1:  # else the pool is that row
            groups.append(
                ({"model": model, "item": POOLED, "judge": POOLED, "code": POOLED}, group)
            )
    rows = [
        calibration_row(labels, g, n_boot, ci, seed + i) for i, (labels, g) in enumerate(groups)
    ]
    return result_frame(CalibrationRow, pd.DataFrame(rows, columns=COLUMNS))
