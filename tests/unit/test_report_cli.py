"""`harness report DIR`: one-line errors with exit code 2, nothing written on error."""

from __future__ import annotations

import json

import pytest


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda d: None, "no such run folder"),
        (lambda d: d.write_text("x"), "is not a folder"),
        (lambda d: d.mkdir(), "not a run folder (no generations.jsonl, manifest.json"),
        (lambda d: (d.mkdir(), (d / "manifest.json").write_text("{oops")), "not valid JSON"),
        (
            lambda d: (d.mkdir(), (d / "generations.jsonl").write_text('{"a": 1}\n[1, 2\n')),
            "generations.jsonl:2: not valid JSON",
        ),
        (
            lambda d: (d.mkdir(), (d / "summary.csv").write_bytes(b'a,b\n"1,2\n')),
            "summary.csv: not a readable CSV",
        ),
    ],
)
def test_bad_folder_is_one_line_exit_2_and_writes_nothing(tmp_path, run_cli, setup, message):
    target = tmp_path / "run"
    setup(target)
    code, _, err = run_cli(["report", str(target)])
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("error: ") and message in err
    if target.is_dir():
        assert [p.name for p in target.iterdir() if "report" in p.name] == []


def test_prints_the_report_path(tmp_path, run_cli):
    run = tmp_path / "run"
    run.mkdir()
    (run / "manifest.json").write_text(
        json.dumps({"run_id": "r1", "name": "<b>x</b>", "timings": {"generate": 3.25}})
    )
    code, out, _ = run_cli(["report", str(run)])
    assert code == 0
    assert out.strip() == str(run / "report.html")
    html = (run / "report.html").read_text()
    assert "Prompt persistence: &lt;b&gt;x&lt;/b&gt;" in html and "<b>x</b>" not in html
    assert "generations.jsonl is not in this run folder" in html
    assert "<td>3.25</td>" in html
    assert sorted(p.name for p in run.iterdir()) == ["manifest.json", "report.html"]
