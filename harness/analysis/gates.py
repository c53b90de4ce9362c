"""Gates: pass/fail bounds on summary.csv's per-condition metrics -> gates.csv and junit.xml.

A gate (`harness.config.GateSpec`) bounds one metric of one policy and is checked on every
(model, item) it covers: its `model`, else every model of the run, times its `items`, else
every item of the run. The value is summary.csv's column `<metric>` (use: value) or the CI
bound `<metric>_low` / `<metric>_high` (use: ci_low / ci_high). A check passes when
min <= value <= max (a bound not given does not bound).

- A censored half-life (a(t) never fell below half its first value within the run) counts as
  +inf: it never fell, so it passes any `min` (and fails any `max`); the detail says so. With
  AUC 0 (nothing adhered to, so nothing to halve) it is undetermined, as the terminal reads it.
  A CI bound of the half-life is inf when the bootstrap draws never halved: the same rule.
- survival_median is inf when fewer than half the samples ever fail: the same rule.
- An undetermined value (NaN: no window could be scored, no alpha fit) or a condition missing
  from summary.csv fails: a gate that cannot be verified must not let a deployment through.

The definitions: docs/architecture.md, "Gates".
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pandas as pd

from harness.config import GateSpec
from harness.errors import UserError
from harness.results import CONDITION, GateRow, result_frame

GATE_COLUMNS = GateRow.columns()
USE_SUFFIX = {"value": "", "ci_low": "_low", "ci_high": "_high"}
INFINITE_BECAUSE = {
    "half_life": "never halved within the run (censored), so it counts as infinite",
    "survival_median": "fewer than half the samples ever failed, so it counts as infinite",
}


def read_summary(path: Path) -> pd.DataFrame:
    """summary.csv as written, with model/item/policy kept as strings (an item "1" or "NA")."""
    if not path.is_file():
        raise UserError(f"{path}: not found (gates read summary.csv of a finished run)")
    try:
        return pd.read_csv(
            path, dtype={c: str for c in CONDITION}, keep_default_na=False, na_values=[""]
        )
    except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: not a readable CSV ({str(exc).splitlines()[0]})") from None


def _label(metric: str, use: str) -> str:
    return metric if use == "value" else f"{metric} {use}"


def bound_text(low: float | None, high: float | None) -> str:
    """The bound as a reader writes it: `>= 0.8`, `<= 0.1`, `in [0.2, 0.5]`."""
    low = None if low is None or pd.isna(low) else low
    high = None if high is None or pd.isna(high) else high
    if low is not None and high is not None:
        return f"in [{low:g}, {high:g}]"
    return f">= {low:g}" if low is not None else f"<= {high:g}"


def gate_name(row: dict) -> str:
    """One check's name in the terminal, the report and junit.xml, e.g.
    `gates[0] auc of none >= 0.8 on lang-fr-story`."""
    label = _label(row["metric"], row["use"])
    bound = bound_text(row["min"], row["max"])
    return f"gates[{row['gate']}] {label} of {row['policy']} {bound} on {row['item']}"


def _truthy(value) -> bool:
    return value is True or str(value).strip().lower() == "true"


def _value(gate: GateSpec, row: dict | None) -> tuple[float, str]:
    """(value, why it is inf or NaN) of one condition's summary row."""
    if row is None:
        return math.nan, "no summary.csv row for this model, item and policy"
    value = float(row[gate.metric + USE_SUFFIX[gate.use]])
    if gate.metric == "half_life" and gate.use == "value" and _truthy(row["half_life_censored"]):
        if float(row["auc"]) > 0:  # NaN > 0 is False
            return math.inf, INFINITE_BECAUSE["half_life"]
        return math.nan, "adherence was 0 from the start, so there is nothing to halve"
    if math.isinf(value) and gate.metric in INFINITE_BECAUSE:
        return value, INFINITE_BECAUSE[gate.metric]
    return value, "undetermined (NaN)" if math.isnan(value) else ""


def _check(index: int, gate: GateSpec, model: str, item: str, row: dict | None) -> dict:
    value, why = _value(gate, row)
    low, high = gate.min, gate.max
    label = _label(gate.metric, gate.use)
    if math.isnan(value):
        passed, verdict = False, f"{label} {why}: fails"
    else:
        passed = (low is None or value >= low) and (high is None or value <= high)
        if passed:
            verdict = f"{label} = {value:.4g}, {bound_text(low, high)}"
        elif low is not None and value < low:
            verdict = f"{label} = {value:.4g}, below min {low:g}"
        else:
            verdict = f"{label} = {value:.4g}, above max {high:g}"
        if why:
            verdict += f" ({label} {why})"
    return {
        "gate": index, "metric": gate.metric, "policy": gate.policy, "item": item,
        "model": model, "use": gate.use, "value": value,
        "min": math.nan if low is None else low, "max": math.nan if high is None else high,
        "passed": passed, "detail": verdict,
    }  # fmt: skip


def evaluate_gates(
    gates: list[GateSpec], summary: pd.DataFrame, items: list[str], models: list[str]
) -> pd.DataFrame:
    """gates.csv: one row per gate x model x item (gate order, then models, then items as the
    run lists them). `items`/`models`: the run's, for gates that name none."""
    rows = {}
    if not summary.empty:
        keys = zip(*(summary[c].astype(str) for c in CONDITION), strict=True)
        rows = dict(zip(keys, summary.to_dict("records"), strict=True))
    out = []
    for index, gate in enumerate(gates):
        needed = [gate.metric + USE_SUFFIX[gate.use]]
        needed += ["half_life_censored", "auc"] if gate.metric == "half_life" else []
        for column in needed:
            if rows and column not in summary.columns:
                raise UserError(
                    f"gates[{index}]: summary.csv has no column '{column}' (a run folder from "
                    "an older harness: run `harness run` again)"
                )
        for model in [gate.model] if gate.model else models:
            for item in gate.items or items:
                out.append(_check(index, gate, model, item, rows.get((model, item, gate.policy))))
    return result_frame(GateRow, pd.DataFrame(out, columns=GATE_COLUMNS).astype({"passed": bool}))


# XML 1.0 cannot hold most control characters, even escaped.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _xml_text(value) -> str:
    return _NOT_XML.sub("\ufffd", str(value))


def junit_xml(gates: pd.DataFrame, suite: str) -> str:
    """The checks as JUnit XML, the format GitHub, GitLab and Jenkins read: <testsuites> with
    one <testsuite>, one <testcase> per check (classname = the model), a <failure> whose message
    names metric, value and bound on each failed check. ElementTree escapes every string."""
    import xml.etree.ElementTree as ET

    total, failed = len(gates), int((~gates["passed"].astype(bool)).sum())
    counts = {"tests": str(total), "failures": str(failed), "errors": "0", "time": "0"}
    root = ET.Element("testsuites", {"name": _xml_text(suite), **counts})
    suite_el = ET.SubElement(
        root, "testsuite", {"name": _xml_text(f"{suite} gates"), **counts, "skipped": "0"}
    )
    for row in gates.to_dict("records"):
        case = ET.SubElement(
            suite_el,
            "testcase",
            {"name": _xml_text(gate_name(row)), "classname": _xml_text(row["model"]), "time": "0"},
        )
        if not row["passed"]:
            message = f"{row['detail']} [model {row['model']}]"
            failure = ET.SubElement(
                case, "failure", {"message": _xml_text(message), "type": "gate"}
            )
            failure.text = _xml_text(f"{gate_name(row)}\n{message}")
    ET.indent(root)
    body = ET.tostring(root, encoding="unicode")
    return f'<?xml version="1.0" encoding="UTF-8"?>\n{body}\n'
