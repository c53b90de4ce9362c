"""The report's first table and the terminal summary's first lines: the prescription
(harness.analysis.prescription), one row per rule of each item, in words a team lead acts on:
does it hold, where it breaks, what fixes it at what cost. prescription.csv holds the same
rows. Every string from the run (items, rules, policies, sentences) is escaped."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from harness.analysis.prescription import NOT_NEEDED, prescribe, prescription_frame, rule_gains
from harness.atomic import atomic_write_text
from harness.report.html import esc, note
from harness.report.load import RunData
from harness.results import PrescriptionRow
from harness.stats import DEFAULT_LEVEL

HEADERS = ["item", "rule", "holds?", "breaks at", "fix", "cost of the fix", "gain (paired)"]
LEGEND = (
    "Per rule of each item, under the prompt as written (the baseline policy): does it hold "
    "(its gates, else its adherence AUC's one-sided bound against the target), where half the "
    "samples have broken it (turn k of a conversation or position t of a reply, with its 95 % "
    "interval; never: fewer than half ever break it), and the cheapest of the run's other "
    "policies that passes the same test, with the tokens it adds and the rule's AUC gain "
    "over the baseline on the same samples (paired). The evidence follows below; "
    "prescription.csv holds these rows."
)


def prescription_rows(data: RunData) -> list[PrescriptionRow]:
    manifest = data.manifest or {}
    stats = ((manifest.get("config") or {}).get("stats") or {}) if isinstance(
        manifest.get("config"), dict) else {}  # fmt: skip
    level = float(stats.get("level", DEFAULT_LEVEL)) if isinstance(stats, dict) else DEFAULT_LEVEL
    rules = data.frame("rules.csv")
    # each rule's own paired gain where the windows are there, else the all-rules one
    gains = rule_gains(data.frame("windows.csv"), level) if rules is not None else None
    return prescribe(
        rules, data.frame("summary.csv"), data.frame("gates.csv"),
        gains if gains is not None else data.frame("policies.csv"),
        manifest.get("hosted_conditions"), level=level, quality=data.frame("quality.csv"),
    )  # fmt: skip


def write_prescription(run_dir: Path, rows: list[PrescriptionRow]) -> Path | None:
    """prescription.csv in the run folder; where no rule was judged none is written, and one
    an earlier run left in a reused folder is removed (it would speak for another run)."""
    out = Path(run_dir) / "prescription.csv"
    if not rows:
        out.unlink(missing_ok=True)
        return None
    atomic_write_text(out, prescription_frame(rows).to_csv(index=False))
    return out


def _num(x: float) -> str:
    if math.isinf(x):
        return "∞"
    return f"{x:.0f}" if x == int(x) else f"{x:.2f}"


def holds_text(row: PrescriptionRow) -> str:
    """`no (gates[0])`, `cannot tell: about 40 samples would tell`, `yes (AUC vs 0.8)`."""
    if row.basis.startswith("no verdict"):
        return row.basis
    if row.holds == "cannot tell":
        tell = row.samples_to_tell
        more = f"; about {int(tell)} would tell" if math.isfinite(tell) else ""
        return f"cannot tell (n = {row.n}{more})"
    return f"{row.holds} ({row.basis})"


def breaks_text(row: PrescriptionRow) -> str:
    if not row.breaks_axis or math.isnan(row.breaks):
        return "no verdict"
    unit = "turn" if row.breaks_axis == "turn" else "t ="
    if math.isinf(row.breaks):
        return "never"
    interval = f" ({row.breaks_note})" if row.breaks_note else ""
    if not (math.isnan(row.breaks_low) or math.isnan(row.breaks_high)):
        interval = f" [{_num(row.breaks_low)}, {_num(row.breaks_high)}]"
    return f"{unit} {_num(row.breaks)}{interval}"


def cost_text(row: PrescriptionRow) -> str:
    if row.fix == NOT_NEEDED or math.isnan(row.fix_tokens):
        return ""
    parts = [f"+{int(row.fix_tokens):,} tokens"]
    if math.isfinite(row.fix_overhead):
        parts.append(f"{100 * row.fix_overhead:.1f} % of generated")
    if math.isfinite(row.fix_usd):
        parts.append(f"{row.fix_usd:+.4f} USD")
    return ", ".join(parts)


def gain_text(row: PrescriptionRow) -> str:
    if math.isnan(row.fix_delta):
        return ""
    if math.isnan(row.fix_delta_low) or math.isnan(row.fix_delta_high):
        return f"{row.fix_delta:+.2f}"
    return f"{row.fix_delta:+.2f} [{row.fix_delta_low:+.2f}, {row.fix_delta_high:+.2f}]"


def cells(row: PrescriptionRow, with_model: bool = False) -> list[str]:
    item = f"{row.item} · {row.model}" if with_model else row.item
    return [item, row.rule, holds_text(row), breaks_text(row), row.fix, cost_text(row),
            gain_text(row)]  # fmt: skip


def headline(rows: list[PrescriptionRow]) -> str:
    """One sentence over the table: how many rules hold, break, cannot tell, and are fixed."""
    count = pd.Series([r.holds for r in rows]).value_counts()
    fixed = sum(1 for r in rows if r.holds != "yes" and r.fix not in _NO_FIX_WORDS)
    broken = len(rows) - int(count.get("yes", 0))
    return (
        f"{int(count.get('yes', 0))} of {len(rows)} rules hold, {int(count.get('no', 0))} "
        f"break, {int(count.get('cannot tell', 0))} cannot be told at this run's samples; "
        f"a tried policy fixes {fixed} of the {broken} that do not hold."
    )


_NO_FIX_WORDS = ("none of the tried policies passes", "no other policy tried", NOT_NEEDED)


def error_control_line(rows: list[PrescriptionRow]) -> str:
    """One sentence naming the error budget(s) the table's decided rows share ("" if none)."""
    controls = "; ".join(dict.fromkeys(r.error_control for r in rows if r.error_control))
    return f"Error control of the decided rows: {controls}." if controls else ""


def prescription_section(data: RunData) -> tuple[str, dict]:
    rows = prescription_rows(data)
    if not rows:
        return note("No rule of this run has a verdict (no rules.csv or summary.csv)."), {}
    several = len({r.model for r in rows}) > 1
    body = []
    for r in rows:
        tds = "".join(f"<td>{esc(c)}</td>" for c in cells(r, several))
        title = esc(r.sentence) if r.sentence else ""
        holds = {"yes": "pass", "no": "fail"}.get(r.holds, "undecided")
        body.append(f'<tr class="gate-{holds}" title="{title}">{tds}</tr>')
    heads = "".join(f"<th>{esc(h)}</th>" for h in HEADERS)
    table = (
        f'<div class="table-wrap"><table class="data prescription"><thead><tr>{heads}</tr>'
        f"</thead><tbody>{''.join(body)}</tbody></table></div>"
    )
    why = [f"<li>{esc(r.item)} / {esc(r.rule)}: {esc(r.rejected)}</li>" for r in rows if r.rejected]
    details = (
        f"<details><summary>Why the other policies are not the fix ({len(why)} rules)</summary>"
        f"<ul>{''.join(why)}</ul></details>"
        if why else ""
    )  # fmt: skip
    control = note(error_control_line(rows)) if error_control_line(rows) else ""
    head = f'<p class="claim">{esc(headline(rows))}</p>'
    return head + table + control + note(LEGEND) + details, {}
