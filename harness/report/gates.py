"""The report's first section: the gate verdicts (gates.csv), one row per check, failures
first-class; `harness run` exits 1 on the same failures."""

from __future__ import annotations

from harness.analysis.gates import gate_name
from harness.report.html import esc, fmt_num, note
from harness.report.load import RunData

NO_GATES = (
    "This run has no gates. Add `gates:` to the run config for pass/fail checks on the "
    "summary metrics: `harness run` then exits 1 when one fails and writes junit.xml for CI."
)
HEADERS = ["verdict", "check", "model", "value", "detail"]


def gates_section(data: RunData) -> tuple[str, dict]:
    frame = data.frame("gates.csv")
    if frame is None:
        # header-only (a run without gates) or absent (an older run): no gates to show
        empty = data.problems.get("gates.csv", "the file has no rows") == "the file has no rows"
        return note(NO_GATES if empty else data.missing("gates.csv")), {}

    passed = frame["passed"].map(lambda v: v is True or str(v).lower() == "true")
    failed = int((~passed).sum())
    if failed:
        head = f"{failed} of {len(frame)} gate checks failed (exit code 1)."
    else:
        head = f"All {len(frame)} gate checks passed."
    rows = []
    for row, ok in zip(frame.to_dict("records"), passed, strict=True):
        cells = ["PASS" if ok else "FAIL", gate_name(row), row["model"],
                 fmt_num(float(row["value"])), row["detail"]]  # fmt: skip
        tds = "".join(f"<td>{esc(c)}</td>" for c in cells)
        rows.append(f'<tr class="gate-{"pass" if ok else "fail"}">{tds}</tr>')
    heads = "".join(f"<th>{esc(h)}</th>" for h in HEADERS)
    table = (
        f'<div class="table-wrap"><table class="data"><thead><tr>{heads}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )
    verdict = "gates-fail" if failed else "gates-pass"
    return f'<p class="{verdict}">{esc(head)}</p>' + table, {}
