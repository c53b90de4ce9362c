"""The report's first section: the gate verdicts (gates.csv), one row per check, each with its
interval and n; failed and undecided checks stand out (`harness run` exits 1 on either)."""

from __future__ import annotations

import math

from harness.analysis.gate_rows import gate_name, verdicts_of
from harness.report.html import esc, fmt_num, note
from harness.report.load import RunData
from harness.report.terminal import family_line, gates_head, sampling_summary
from harness.stats.text import interval_text

NO_GATES = (
    "This run has no gates. Add `gates:` to the run config for pass/fail checks on the "
    "summary metrics: `harness run` then exits 1 when one fails and writes junit.xml for CI."
)
HEADERS = ["verdict", "check", "model", "estimate [interval]", "n", "samples to decide", "detail"]
UNDECIDED_NOTE = (
    "Undecided: the interval straddles the bound, so these samples cannot tell pass from fail; "
    "it does not pass (exit code 1). 'Samples to decide' estimates how many would decide it "
    "assuming the observed pass rate stays what it is: if the true rate is 0.05-0.1 away from "
    "it, the estimate is within 1.5x of the real need in only 26-39 % of cases for a fixed "
    "sample count and 52-71 % for a sequential run's looks "
    "(bench/samples_needed.py --truth-differs)."
)


def _number(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def interval_cell(row: dict) -> str:
    """The estimate, with its interval when there is one: `0.95 [0.62, 1]`."""
    value, low, high = (_number(row.get(k)) for k in ("value", "value_low", "value_high"))
    return interval_text(value, low, high, fmt_num)


def gates_section(data: RunData) -> tuple[str, dict]:
    frame = data.frame("gates.csv")
    if frame is None:
        # header-only (a run without gates) or absent (an older run): no gates to show
        empty = data.problems.get("gates.csv", "the file has no rows") == "the file has no rows"
        return note(NO_GATES if empty else data.missing("gates.csv")), {}
    verdicts = verdicts_of(frame)
    if (verdicts == "pass").all():
        head = f"All {len(verdicts)} gate checks passed."
    else:
        head = gates_head(verdicts)
        head = head[:1].upper() + head[1:] + " (exit code 1)."
    rows = []
    for row, verdict in zip(frame.to_dict("records"), verdicts, strict=True):
        n, needed = _number(row.get("n")), _number(row.get("samples_needed"))
        cells = [verdict.upper(), gate_name(row), row["model"], interval_cell(row),
                 "" if math.isnan(n) else f"{int(n)}",
                 "" if math.isnan(needed) else f"about {int(needed)}", row["detail"]]  # fmt: skip
        tds = "".join(f"<td>{esc(c)}</td>" for c in cells)
        rows.append(f'<tr class="gate-{esc(verdict)}">{tds}</tr>')
    heads = "".join(f"<th>{esc(h)}</th>" for h in HEADERS)
    table = (
        f'<div class="table-wrap"><table class="data"><thead><tr>{heads}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )
    kind = "fail" if (verdicts == "fail").any() else "undecided"
    kind = "pass" if (verdicts == "pass").all() else kind
    extra = note(UNDECIDED_NOTE) if (verdicts == "undecided").any() else ""
    extra += note(f"Error over every gate: {family_line(frame)}.") if family_line(frame) else ""
    extra += _sampling(data.manifest or {})
    return f'<p class="gates-{kind}">{esc(head)}</p>' + table + extra, {}


def _sampling(manifest: dict) -> str:
    """A run that sampled until decided: its looks, and per condition the samples it took and
    why it stopped (the verdicts above rest on those n)."""
    record = manifest.get("sequential")
    if not isinstance(record, dict) or not record.get("conditions"):
        return ""
    keys = ("model", "item", "policy", "samples", "stopped")
    rows = "".join(
        "<tr>" + "".join(f"<td>{esc(c.get(k, ''))}</td>" for k in keys) + "</tr>"
        for c in record["conditions"]
    )
    heads = "".join(f"<th>{esc(h)}</th>" for h in keys)
    return (
        f"<p>{esc(sampling_summary(record))} ({esc(record.get('rule', ''))}).</p>"
        f'<div class="table-wrap"><table class="data"><thead><tr>{heads}</tr></thead>'
        f"<tbody>{rows}</tbody></table></div>"
    )
