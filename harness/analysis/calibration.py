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

Intervals (harness.stats), the record being the unit (windows of one sample are not
independent): accuracy, the bounded-mean interval of the per-record shares of agreeing windows
(exact binomial when each record agrees everywhere or nowhere); the judge's sensitivity and
specificity against the code check likewise over the per-record shares; kappa of one rule, the range
of (p_o - p_e) / (1 - p_e) over the box of simultaneous intervals for p_o and the two pass
rates (each per-record bounded-mean, at level 1 - alpha/3, Bonferroni): kappa rises with p_o
and falls with p_e, and p_e is bilinear in the rates, so the box's corners bound it
("projection"); clipped to [-1, 1]. kappa pooled over rules: percentile bootstrap over records
(`harness.stats.bootstrap.bootstrap_interval`, approximate, so its method says so). Where
records have different numbers of windows the intervals are those of the per-record means,
the point values the pooled shares. Rows: one per (model, item, judge check, code
check), then one pooled row per model (item = judge = code = `all`) over every meeting, when
the model has more than one such pair (kappa stratified by rule, see above).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from harness.results import SAMPLE, TASK_CONDITION, CalibrationRow, as_bool, result_frame
from harness.scoring.corrected import CheckRates
from harness.stats import DEFAULT_DRAWS, DEFAULT_LEVEL, Interval, mean_interval, none_interval
from harness.stats.bootstrap import bootstrap_interval

COLUMNS = CalibrationRow.columns()
RECORD = [*TASK_CONDITION, *SAMPLE]  # a record as windows.csv names it
JUDGE_PREFIX = "judge:"
POOLED = "all"


def verdict_value(passed) -> float:
    """windows.csv `passed` (bool, "True"/"False" read back from CSV, empty) -> 1 / 0 / NaN."""
    verdict = as_bool(passed)
    return math.nan if verdict is None else float(verdict)


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


def _record_rates(tables: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per record (R,): share of agreeing windows, judge pass rate, code pass rate."""
    both_pass, judge_only, code_only, both_fail = np.moveaxis(tables.sum(axis=1), -1, 0)
    n = both_pass + judge_only + code_only + both_fail
    with np.errstate(invalid="ignore", divide="ignore"):
        return (
            (both_pass + both_fail) / n,
            (both_pass + judge_only) / n,
            (both_pass + code_only) / n,
        )


def judge_error_rates(tables: np.ndarray, level: float) -> tuple[Interval, Interval]:
    """The judge's sensitivity (it passes where the code check passes) and specificity (it
    fails where the code check fails), the record the unit: the bounded-mean interval of the
    per-record shares over the records that have such windows (a judge and a code check that
    read a record alike in every window are one observation, not one per window: window
    counts gave 0.44-0.56 coverage at 16-64 records, bench/coverage.py); the point value is
    the pooled share, as for accuracy."""
    both_pass, judge_only, code_only, both_fail = np.moveaxis(tables.sum(axis=1), -1, 0)
    out = []
    for hits, misses, where in ((both_pass, code_only, "passes"), (both_fail, judge_only, "fails")):
        n = hits + misses
        held = n > 0
        if not held.any():
            out.append(none_interval(math.nan, 0, f"no window where the code check {where}"))
            continue
        per_record = mean_interval(hits[held] / n[held], level=level)
        pooled = float(hits.sum() / n.sum())
        method = f"{per_record.method} over records"
        out.append(Interval(pooled, per_record.low, per_record.high, per_record.n, method))
    return out[0], out[1]


def _kappa(p_o: float, p_e: float) -> float:
    return (p_o - p_e) / (1 - p_e) if p_e < 1 - 1e-12 else -math.inf


def kappa_projection(tables: np.ndarray, kappa: float, level: float) -> Interval:
    """kappa of one rule bounded over the box of simultaneous intervals (module docstring)."""
    observed, judge, code = _record_rates(tables)
    third = 1 - (1 - level) / 3
    po, pj, pc = (mean_interval(v, level=third) for v in (observed, judge, code))
    corners = [
        x * y + (1 - x) * (1 - y) for x in (pj.low, pj.high) for y in (pc.low, pc.high)
    ]  # p_e at the box's corners: its extremes (bilinear)
    low = max(-1.0, _kappa(po.low, max(corners)))
    high = min(1.0, max(-1.0, _kappa(po.high, min(corners))))
    return Interval(kappa, low, high, po.n, f"projection ({po.method}, bonferroni over 3)")


def _kappa_bootstrap(tables, kappa: float, level: float, draws: int, seed: int) -> Interval:
    rng = np.random.default_rng(seed)
    # how often each record is drawn, per draw: (draws, records)
    weights = rng.multinomial(len(tables), np.full(len(tables), 1 / len(tables)), size=draws)
    _, boot = stratified_agreement(np.einsum("br,rsk->bsk", weights.astype(float), tables))
    return bootstrap_interval(
        kappa, boot, n=len(tables), level=level, min_finite=max(10, draws // 2),
        method="percentile-bootstrap over records (approximate)",
    )  # fmt: skip


def judge_rates(row: dict) -> CheckRates:
    """The judge's confusion counts in one calibration.csv row, the code check's verdict taken
    as the truth: what `harness.scoring.corrected` and a labelled set's counts are."""
    return CheckRates(
        str(row["judge"]), true_pass=int(row["agree_pass"]), false_fail=int(row["code_only_pass"]),
        true_fail=int(row["agree_fail"]), false_pass=int(row["judge_only_pass"]),
        source=f"calibration.csv against {row['code']}",
    )  # fmt: skip


def measured_judges(calibration: pd.DataFrame) -> dict[str, CheckRates]:
    """Each judge check's counts summed over its (model, item, code check) rows: the rates the
    corrected estimates of a condition that only the judge decides can use."""
    rows = calibration[calibration["item"] != POOLED] if len(calibration) else calibration
    out: dict[str, CheckRates] = {}
    for judge, group in rows.groupby("judge", sort=True):
        sums = group[["agree_pass", "code_only_pass", "agree_fail", "judge_only_pass"]].sum()
        codes = ", ".join(sorted(map(str, group["code"].unique())))
        out[str(judge)] = judge_rates({"judge": judge, "code": codes, **sums.to_dict()})
    return out


def calibration_row(labels: dict, group: pd.DataFrame, level: float, draws: int, seed: int):
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
        "undetermined": len(group) - len(decided), "reason": "",
    }  # fmt: skip
    sensitivity, specificity = judge_error_rates(tables, level)
    row |= sensitivity.row("sensitivity") | specificity.row("specificity")
    if row["n"] == 0:
        nothing = none_interval(math.nan, 0, "no window where both checks decided")
        return {**row, **nothing.row("accuracy"), **nothing.row("kappa"),
                "reason": "no window where both checks decided"}  # fmt: skip
    acc = mean_interval(_record_rates(tables)[0], level=level)
    row |= {**acc.row("accuracy"), "accuracy": accuracy}
    if math.isnan(kappa):
        row["reason"] = "kappa undefined: both checks gave the same verdict on every window"
        return {**row, **none_interval(kappa, len(tables), "kappa undefined").row("kappa")}
    if tables.shape[1] == 1:
        return {**row, **kappa_projection(tables, kappa, level).row("kappa")}
    return {**row, **_kappa_bootstrap(tables, kappa, level, draws, seed).row("kappa")}


def judge_calibration(
    windows: pd.DataFrame,
    *,
    level: float = DEFAULT_LEVEL,
    draws: int = DEFAULT_DRAWS,
    seed: int = 0,
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
        calibration_row(labels, g, level, draws, seed + i) for i, (labels, g) in enumerate(groups)
    ]
    return result_frame(CalibrationRow, pd.DataFrame(rows, columns=COLUMNS))
