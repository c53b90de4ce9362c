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
        (
            lambda d: (d.mkdir(), (d / "manifest.json").write_text('{"files": "summary.csv"}')),
            "manifest.json: `files` must be a list of file names",
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


def test_reads_the_files_the_manifest_lists_or_every_file_of_an_older_folder(tmp_path, run_cli):
    """A folder's manifest lists the files its run wrote: `harness report` reads those (a file
    an earlier run left is not read, nor a name outside the known files); a manifest from
    before the list: every known file present."""
    from harness.report.load import run_files

    run = tmp_path / "run"
    run.mkdir()
    stale = b"model,item\n\x80\xff an earlier run's\n"
    (run / "carried.csv").write_bytes(stale)  # no readable CSV: reading it fails the report
    (run / "junit.xml").write_text("<testsuites/>")
    manifest = {"name": "reused", "files": ["junit.xml", "../outside.csv", "carried.csv"]}
    (run / "manifest.json").write_text(json.dumps({**manifest, "files": ["junit.xml"]}))
    assert run_files(run) == {"manifest.json": run / "manifest.json"}
    code, out, err = run_cli(["report", str(run)])
    assert code == 0, err
    assert "carried.csv is not in this run folder" in (run / "report.html").read_text()
    (run / "manifest.json").write_text(json.dumps(manifest))
    assert sorted(run_files(run)) == ["carried.csv", "manifest.json"]
    (run / "manifest.json").write_text(json.dumps({"name": "older"}))  # before the list
    assert sorted(run_files(run)) == ["carried.csv", "manifest.json"]
    code, _, err = run_cli(["report", str(run)])
    assert code == 2 and "carried.csv: not a readable CSV" in err
