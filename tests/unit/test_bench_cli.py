"""`harness bench NAME ...` hands every option after NAME to bench/NAME.py (no benchmark runs
here: `subprocess.call`, which starts the script, is replaced)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).parents[2] / "bench"


def _fake_call(calls: list, code: int):
    def call(argv, *args, **kwargs):
        calls.append(argv)
        return code

    return call


@pytest.fixture
def started(monkeypatch):
    """The argv of each benchmark the CLI would start; the script 'exits' with 0."""
    calls = []
    monkeypatch.setattr(subprocess, "call", _fake_call(calls, 0))
    return calls


@pytest.mark.parametrize(
    "argv, args",
    [
        (["--rss-tokens", "1024", "--repeats", "3"], ["--rss-tokens", "1024", "--repeats", "3"]),
        (["--quick"], ["--quick"]),
        (["--", "--help"], ["--help"]),  # the benchmark's own help
        ([], []),
    ],
)
def test_options_after_the_name_reach_the_benchmark(run_cli, started, argv, args):
    code, _, err = run_cli(["bench", "probe", *argv])
    assert code == 0, err
    assert started == [[sys.executable, str(BENCH / "probe.py"), *args]]


def test_the_benchmark_exit_code_is_the_commands(run_cli, monkeypatch):
    monkeypatch.setattr(subprocess, "call", _fake_call([], 3))
    code, _, _ = run_cli(["bench", "scoring", "--whatever"])
    assert code == 3


def test_unknown_benchmark_is_one_line(run_cli, started):
    code, _, err = run_cli(["bench", "nope", "--rss-tokens", "1"])
    assert code == 2 and err.count("\n") == 1
    available = (
        "available: checks, conversation, corrected, coverage, forks, generation, laws, probe, "
        "runtime, samples_needed, scoring"
    )
    assert f"unknown benchmark 'nope' ({available}" in err
    assert started == []


def test_help_says_where_options_go_and_names_every_benchmark(run_cli, started):
    code, out, _ = run_cli(["bench", "--help"])
    text = " ".join(out.split())
    assert code == 0 and started == []
    assert "Options after NAME go to the benchmark" in text
    assert "harness bench NAME -- --help" in text
    names = sorted(p.stem for p in BENCH.glob("*.py") if not p.name.startswith("_"))
    assert len(names) >= 6
    for name in names:
        assert name in text


def test_without_a_name_each_benchmark_is_listed_with_what_it_measures(run_cli, started):
    code, out, _ = run_cli(["bench"])
    assert code == 0 and started == []
    lines = dict(line.split(maxsplit=1) for line in out.splitlines())
    assert set(lines) == {p.stem for p in BENCH.glob("[!_]*.py")}
    assert lines["scoring"].startswith("Time to score 1,000 windows")


def test_the_list_is_read_from_the_folder(tmp_path):
    from harness.commands.bench import benchmarks

    (tmp_path / "_helper.py").write_text('"""Not a benchmark."""\n')
    (tmp_path / "speed.py").write_text('"""How fast,\nmeasured.\n\nUsage: ..."""\nimport x\n')
    assert benchmarks(tmp_path) == {"speed": "How fast, measured."}
    assert benchmarks(tmp_path / "absent") == {}
