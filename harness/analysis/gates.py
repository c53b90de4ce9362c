"""Gates: pass, fail or undecided on summary.csv's per-condition metrics -> gates.csv, junit.xml.

A gate (`harness.config.gate_specs.GateSpec`) bounds one metric of one policy and is checked on
every
(model, item) it covers: its `model`, else every model of the run, times its `items`, else
every item of the run. Each check has one of three verdicts:

- `use: interval` (the default for a metric with an interval, `<metric>_low/_high`): `min` is
  compared with the interval's lower bound and `max` with its upper one. pass: the interval
  clears every bound; fail: it lies wholly on the wrong side of one; undecided: it straddles a
  bound, so the samples cannot tell (nor can they when no interval could be formed, n = 1).
- `use: value` (the default for a metric without an interval): the point estimate against the
  bounds, pass or fail only; the detail says it is a point comparison.

Undecided never passes: `harness run` and `harness gate` exit 1 on it as on a fail. An
undecided check carries `samples_needed`, an estimate of the samples that would decide it
(`samples_needed`), and `undecided_conditions` names the conditions to sample further.

- A censored half-life (a(t) never fell below half its first value within the run) counts as
  +inf: it never fell, so it passes any `min` (and fails any `max`); the detail says so. With
  AUC 0 (nothing adhered to, so nothing to halve) it is undetermined, as the terminal reads it.
  An interval bound of inf (draws that never halved) reads the same way.
- survival_median is inf when fewer than half the samples ever fail: the same rule.
- An undetermined estimate (NaN: no window could be scored, no alpha fit) or a condition
  missing from summary.csv fails: a gate that cannot be verified must not let a deployment
  through.

The definitions: docs/architecture.md, "Gates".
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from harness.analysis.gate_causes import cut_off_cause, left_out_note
from harness.analysis.gate_family import OUTSIDE, holm, ladder_row
from harness.analysis.gate_rows import bound_text
from harness.analysis.gate_sequential import sequential_check
from harness.analysis.gate_sources import GATE_TABLES as GATE_TABLES
from harness.analysis.gate_sources import gate_source, source_rows
from harness.analysis.gate_sources import read_gate_tables as read_gate_tables
from harness.config.gate_specs import (
    GATE_METRICS,
    Family,
    GateSpec,
    gate_column,
    gate_level,
    gate_use,
    one_sided,
    tested_bounds,
)
from harness.errors import UserError
from harness.results import CONDITION, GateRow, as_bool, result_frame
from harness.stats import FRACTION_CS, Interval
from harness.stats import verdict as bound_verdict
from harness.stats.sided import samples_to_decide
from harness.stats.text import interval_text

GATE_COLUMNS = GateRow.columns()
INFINITE_BECAUSE = {
    "half_life": "never halved within the run (censored), so it counts as infinite",
    "survival_median": "fewer than half the samples ever failed, so it counts as infinite",
}
# The bounded means of per-sample values in [lower, upper] with one-sided bounds: the metrics
# `samples_needed` can project (see there).
BOUNDED_MEANS = {"auc": (0.0, 1.0), "final": (0.0, 1.0)}
# alpha_mean's interval over fewer probed pairs than this reflects one curve's noise, not
# sample-to-sample variation (a bootstrap of 1-2 pairs): its gates are undecided below it
MIN_ALPHA_PAIRS = 8
# beyond this an undecided check is reported as "not decided within MAX_SAMPLES" (and each
# look at a larger n costs an interval over that many values)
MAX_SAMPLES = 1024


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


# metrics that are not adherence to the rules (gate names say which rules the others cover)


def _float(row: dict, column: str) -> float:
    value = row.get(column)
    try:
        return math.nan if value is None else float(value)
    except (TypeError, ValueError):
        return math.nan


def _reading(
    gate: GateSpec, row: dict | None, source: str = "summary.csv"
) -> tuple[float, float, float, float, str]:
    """(estimate, low, high, n, why the estimate is inf or NaN) of one condition's row."""
    if row is None:
        nan = math.nan
        what = "model, item and policy" + (", rule" if gate.rule else "")
        what += f" at turn {gate.turn}" if gate.turn else ""
        return nan, nan, nan, nan, f"no {source} row for this {what}"
    value = _float(row, gate.metric)
    ends = ("_lcb", "_ucb") if one_sided(gate) else ("_low", "_high")  # see _test_level
    low, high = (_float(row, f"{gate.metric}{end}") for end in ends)
    n = _float(row, f"{gate.metric}_n")  # the units this metric's interval rests on
    if math.isnan(n) and GATE_METRICS.get(gate.metric, False):
        n = _float(row, "n")  # the adherence samples; a metric with no interval has no n
    if gate.metric == "half_life" and as_bool(row.get("half_life_censored")) is True:
        if _float(row, "auc") > 0:  # NaN > 0 is False
            return math.inf, low, high, n, INFINITE_BECAUSE["half_life"]
        return math.nan, low, high, n, "adherence was 0 from the start, so nothing to halve"
    if math.isinf(value) and gate.metric in INFINITE_BECAUSE:
        return value, low, high, n, INFINITE_BECAUSE[gate.metric]
    return value, low, high, n, "undetermined (NaN)" if math.isnan(value) else ""


def interval_verdict(low: float, high: float, lo_bound, hi_bound) -> str:
    """pass when [low, high] clears every bound, fail when it lies wholly on the wrong side of
    one, else undecided (also when an end of the interval is NaN: no interval). Per bound it
    is `harness.stats.verdict`."""
    interval = Interval(math.nan, low, high, 0, "")
    sides = [("min", lo_bound)] if lo_bound is not None else []
    sides += [("max", hi_bound)] if hi_bound is not None else []
    each = [bound_verdict(interval, bound, side) for side, bound in sides]
    if "fail" in each:
        return "fail"
    return "pass" if all(v == "pass" for v in each) else "undecided"


def _fmt(x: float) -> str:
    return f"{x:.4g}"


def _n_text(n: float) -> str:
    """`, n = 4` (nothing where summary.csv predates n)."""
    return "" if math.isnan(n) else f", n = {int(n)}"


def _straddled(gate: GateSpec, low: float, high: float) -> list[tuple[str, float]]:
    """The bounds an undecided interval lies across: ("min" | "max", bound)."""
    out = [("min", gate.min)] if gate.min is not None and not low >= gate.min else []
    return out + ([("max", gate.max)] if gate.max is not None and not high <= gate.max else [])


def _what(gate: GateSpec, method: str, level: float) -> str:
    """The bounds the check read, in words: `one-sided 95% clopper-pearson bounds`."""
    if one_sided(gate):
        return f"one-sided {100 * level:.4g} % {method + ' ' if method else ''}bounds"
    return f"{method} interval" if method else ""


def _interval_detail(gate: GateSpec, verdict: str, value, low, high, n, what: str) -> str:
    if math.isnan(low) or math.isnan(high):
        return f"{gate.metric} {_fmt(value)}{_n_text(n)}{what}: no interval: undecided"
    head = f"{gate.metric} {interval_text(value, low, high, _fmt)}{_n_text(n)}{what}"
    lo_b, hi_b = gate.min, gate.max
    if verdict == "pass":
        parts = [f"lower bound {_fmt(low)} >= min {lo_b:g}"] if lo_b is not None else []
        parts += [f"upper bound {_fmt(high)} <= max {hi_b:g}"] if hi_b is not None else []
        return f"{head}: {' and '.join(parts)}"
    if verdict == "fail":
        if lo_b is not None and high < lo_b:
            return f"{head}: upper bound {_fmt(high)} below min {lo_b:g}"
        return f"{head}: lower bound {_fmt(low)} above max {hi_b:g}"
    across = " and ".join(f"{side} {bound:g}" for side, bound in _straddled(gate, low, high))
    return f"{head}: the interval straddles {across}: undecided"


def _value_verdict(gate: GateSpec, value: float) -> tuple[str, str]:
    """(verdict, detail) of a point comparison: pass or fail, never undecided."""
    low, high = gate.min, gate.max
    ignored = ", its interval ignored" if GATE_METRICS.get(gate.metric, False) else ""
    head = f"{gate.metric} = {_fmt(value)} (point value{ignored})"
    if low is not None and value < low:
        return "fail", f"{head}, below min {low:g}"
    if high is not None and value > high:
        return "fail", f"{head}, above max {high:g}"
    return "pass", f"{head}, {bound_text(low, high)}"


def samples_needed(
    gate: GateSpec,
    value: float,
    low: float,
    high: float,
    n: float,
    level: float,
    anytime: bool,
    intersected: bool = False,
) -> tuple[float, str]:
    """(samples, why none) that would decide an undecided one-sided check:
    `harness.stats.sided.samples_to_decide` (at the observed mean, order-neutral, always more
    than n) for each bound it straddles; the bound on the estimate's wrong side decides it (a
    fail), else the most any straddled bound needs (a pass). `level`: the bounds' own;
    `anytime`: they are a confidence sequence (a sequential run's); `intersected`: the fraction
    type's two sequences at alpha/2 each (harness.stats.FRACTION_CS). NaN with a reason for other
    metrics and where n or the estimate is unknown."""
    if gate.metric not in BOUNDED_MEANS or not one_sided(gate):
        return math.nan, f"no estimate of the samples needed: {gate.metric} is not a bounded mean"
    if math.isnan(n) or n < 1 or not math.isfinite(value):
        return math.nan, "no estimate of the samples needed (no n or estimate)"
    lower, upper = BOUNDED_MEANS[gate.metric]
    straddled = _straddled(gate, low, high)
    needs = {
        side: samples_to_decide(
            value, int(n), bound=bound, level=level, lower=lower, upper=upper,
            anytime=anytime, intersected=intersected, max_n=MAX_SAMPLES,
        )
        for side, bound in straddled
    }  # fmt: skip
    wrong = [s for s, b in straddled if (value < b if s == "min" else value > b)]
    picked = [needs[wrong[0]]] if wrong else list(needs.values())
    if not picked or any(p is None for p in picked):
        return math.nan, f"not decided within {MAX_SAMPLES} samples at this estimate"
    return float(max(picked)), ""


def _test_level(gate: GateSpec, use: str, level: float, checked: float) -> float:
    """The level each bound of the check is tested at (gates.csv's `level`): the one-sided
    bounds' own (`checked`, harness.config.gate_specs.gate_level), one side of a two-sided
    interval at `level` (its error is half of 1 - level), none for a point comparison."""
    if use != "interval":
        return math.nan
    return checked if one_sided(gate) else 1 - (1 - level) / 2


def _read_as(gate: GateSpec) -> GateSpec:
    """The gate as the columns it reads: `corrected: true` bounds `<metric>_corrected`."""
    return gate.model_copy(update={"metric": gate_column(gate)}) if gate.corrected else gate


def _check(
    index: int, spec: GateSpec, model: str, item: str, row: dict | None, levels: tuple,
    source: str = "summary.csv", looks: tuple[int, ...] | None = None,
    rules: pd.DataFrame | None = None,
) -> dict:  # fmt: skip
    use, gate = gate_use(spec), _read_as(spec)
    value, low, high, n, why = _reading(gate, row, source)
    cause = cut_off_cause(rules, spec, (model, item, spec.policy))
    if math.isnan(value) and row is not None and cause:
        why = f"undetermined: {cause}"
    needed, tested = math.nan, _test_level(gate, use, *levels)
    method = (row or {}).get(f"{gate.metric}_method")
    method = method if isinstance(method, str) else ""  # NaN: summary.csv has none
    few_pairs = gate.metric == "alpha_mean" and not n >= MIN_ALPHA_PAIRS  # NaN n: unknown
    if math.isnan(value) and "cannot tell" in method:  # too few samples: never a pass or fail
        verdict, detail, why = "undecided", f"{gate.metric}: {method}: undecided", ""
    elif few_pairs and use == "interval" and not math.isnan(value):
        pairs = "an unknown number of" if math.isnan(n) else str(int(n))
        verdict, why = "undecided", ""
        detail = (
            f"{gate.metric} {_fmt(value)} over {pairs} probed pairs ({method or 'unknown method'}"
            f"): fewer than {MIN_ALPHA_PAIRS} pairs, so the interval is one curve's noise, not "
            "sample-to-sample variation: cannot tell: undecided"
        )
    elif math.isnan(value):
        verdict, detail = "fail", f"{gate.metric} {why}: fails"
        why = ""
    elif use == "value":
        verdict, detail = _value_verdict(gate, value)
    elif (
        use == "interval"
        and source == "summary.csv"
        and one_sided(gate)
        and (decided := sequential_check(gate, row, looks, tested))
    ):
        verdict, detail, needed = decided
    else:
        verdict = interval_verdict(low, high, gate.min, gate.max)
        what = _what(gate, method, tested)
        detail = _interval_detail(gate, verdict, value, low, high, n, what and f" ({what})")
        if verdict == "undecided":
            anytime = method.endswith("-cs")  # stats' confidence sequences: *-cs
            needed, none_why = samples_needed(
                gate, value, low, high, n, tested, anytime, method == FRACTION_CS
            )
            detail += "; " + (
                none_why
                or f"about {int(needed)} samples would decide it if the observed rate stays"
            )
    if why:
        detail += f" ({gate.metric} {why})"
    if not math.isnan(value) and (note := left_out_note(rules, spec, (model, item, spec.policy))):
        detail += f" ({note})"
    return {
        "gate": index, "metric": gate.metric, "policy": gate.policy,
        "rule": spec.rule or "", "turn": spec.turn, "item": item, "model": model, "use": use,
        "value": value, "value_low": low, "value_high": high,
        "n": n,
        "min": math.nan if gate.min is None else gate.min,
        "max": math.nan if gate.max is None else gate.max,
        "level": tested, "verdict": verdict, "passed": verdict == "pass",
        "samples_needed": needed, "detail": detail,
    }  # fmt: skip


def _needed_columns(spec: GateSpec) -> list[str]:
    gate = _read_as(spec)
    columns = [gate.metric]
    if gate_use(spec) == "interval":
        ends = ("_lcb", "_ucb") if one_sided(gate) else ("_low", "_high")
        columns += [f"{gate.metric}{end}" for end in ends]
    return columns + (["half_life_censored", "auc"] if gate.metric == "half_life" else [])


def evaluate_gates(
    gates: list[GateSpec],
    summary: pd.DataFrame,
    items: list[str],
    models: list[str],
    level: float = 0.95,
    family: Family = "none",
    tables: dict[str, pd.DataFrame] | None = None,
    looks: tuple[int, ...] | None = None,
    units: dict[int, list[str]] | None = None,
) -> pd.DataFrame:
    """gates.csv: one row per gate x model x item (gate order, then models, then items as the
    run lists them). `items`/`models`: the run's, for gates that name none; `units`: gate
    index -> the items it judges (`harness.config.gate_specs.gate_units`: where its policy runs, its
    rule is checked, a turn metric has turns), else its `items`, else the run's; `level` and
    `family`: stats.level and stats.family, which fix the level each bound is tested at (the
    one-sided bounds in summary.csv and rules.csv were made at it; samples_needed projects at
    it). `tables`: GATE_TABLES by name, for rule gates and the turn metrics (a gate whose
    file is missing fails: it cannot be verified). `looks`: a sequential run's schedule, at
    which its auc/final gates are the group-sequential test (harness.analysis.gate_sequential)."""
    levels = (level, gate_level(gates, models, items, level, family))
    rows = {}
    if not summary.empty:
        keys = zip(*(summary[c].astype(str) for c in CONDITION), strict=True)
        rows = dict(zip(keys, summary.to_dict("records"), strict=True))
    out, read = [], []
    rules = (tables or {}).get("rules.csv")  # what a check without a verdict lacked
    for index, gate in enumerate(gates):
        source = gate_source(gate)
        found = rows
        if source != "summary.csv":
            found = source_rows(gate, (tables or {}).get(source, pd.DataFrame()))
        for column in _needed_columns(gate) if source == "summary.csv" else []:
            if rows and column not in summary.columns:
                raise UserError(
                    f"gates[{index}]: summary.csv has no column '{column}' (a run folder from "
                    "an older harness: run `harness run` again)"
                )
        for model in [gate.model] if gate.model else models:
            for item in (units or {}).get(index) or gate.items or items:
                row = found.get((model, item, gate.policy))
                read.append((index, gate, model, item, row, source))
                out.append(_check(index, gate, model, item, row, levels, source, looks, rules))
                out[-1]["family"] = _family(gate, family)
                out[-1]["family_level"] = level if family != "none" else math.nan
    if family == "holm":

        def recheck(i: int, step: float) -> dict:
            index, gate, model, item, row, source = read[i]
            stepped = ladder_row(row or {}, _read_as(gate).metric, step)
            if stepped is None:  # no bounds at this level: it stays as read
                return out[i]
            again = _check(index, gate, model, item, stepped, (level, step), source, looks, rules)
            return {**again, "family": out[i]["family"], "family_level": level}

        members = [i for i, (*_, row, _s) in enumerate(read) if out[i]["family"] == OUTSIDE
                   and one_sided(read[i][1]) and row is not None]  # fmt: skip
        out = holm(out, members, level, tested_bounds(gates, models, items), recheck)
    return result_frame(GateRow, pd.DataFrame(out, columns=GATE_COLUMNS).astype({"passed": bool}))


def _family(gate: GateSpec, family: Family) -> str:
    """gates.csv's `family` of a check before Holm's steps (see there): members of a Holm
    budget are marked once the steps ran; a point comparison tests no bound."""
    if gate_use(gate) != "interval":
        return ""
    return OUTSIDE if family == "holm" else family
