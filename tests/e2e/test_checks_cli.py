"""`harness checks LABELS.jsonl` as a user runs it: their labelled replies in, the accuracy
table out; a bad line is one `file:line: problem` and exit 2. No model starts (no row has a
window, so no tokenizer is loaded)."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.e2e

NO_COMMA = {"type": "ifeval", "id": "punctuation:no_comma"}


def _lang(target: str) -> dict:
    return {"type": "language", "target": target}


ROWS = [
    {"text": "You can pay by card or bank transfer.", "check": _lang("en"), "expected": True},
    {"text": "Puede pagar con tarjeta o transferencia.", "check": _lang("fr"), "expected": False},
    {"text": "Ja, gut!", "check": _lang("de"), "expected": True},
    {"text": "Your parcel ships today and arrives Friday.", "check": NO_COMMA, "expected": True},
    {"text": "Yes, it ships today and arrives Friday.", "check": NO_COMMA, "expected": True},
]  # fmt: skip


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _line(out: str, check: str, band: str) -> list[str]:
    (line,) = [ln for ln in out.splitlines() if ln.split()[1:3] == [check, band]]
    return line.split()


def test_table_of_a_users_labels(run_cli, tmp_path):
    code, out, err = run_cli(["checks", str(_write(tmp_path / "labels.jsonl", ROWS))])
    assert code in (0, None), err
    assert "labels.jsonl: 5 labelled replies" in out
    language = _line(out, "language", "all")
    # n=3: both decided rows right, the 5-letter reply abstained (counted as not right)
    assert language[3:6] == ["3", "66.7", "%"] and language[-2:] == ["33", "%"]
    ifeval = _line(out, "ifeval", "30-80")
    # the mislabelled comma reply is a false fail: sensitivity 1 of 2
    assert ifeval[3] == "2" and ifeval[6:8] == ["50.0", "%"]


def test_bad_line_names_file_and_line(run_cli, tmp_path):
    bad = _write(tmp_path / "labels.jsonl", [ROWS[0], {**ROWS[1], "expected": "maybe"}])
    code, _, err = run_cli(["checks", str(bad)])
    assert code == 2 and "labels.jsonl:2: field 'expected'" in err
    old_check = {**ROWS[0]["check"], "threshold": 0.5}
    old = _write(tmp_path / "old.jsonl", [{**ROWS[0], "check": old_check}])
    code, _, err = run_cli(["checks", str(old)])
    assert code == 2 and "old.jsonl:1:" in err and "'margin' / 'abstain_below'" in err
