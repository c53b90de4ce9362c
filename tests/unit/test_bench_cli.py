"""`make bench` (bench/_index.py) lists the benchmarks or runs one with every option after its
name; the installed CLI has no `bench` command (benchmarks need a checkout)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.script_module import load_script

BENCH = Path(__file__).parents[2] / "bench"


def _index():
    return load_script(BENCH / "_index.py", "bench_index")


@pytest.mark.parametrize(
    "args",
    [["--rss-tokens", "1024", "--repeats", "3"], ["--quick"], ["--help"], []],
)
def test_options_after_the_name_reach_the_benchmark(args):
    assert _index().command(["probe", *args]) == [sys.executable, str(BENCH / "probe.py"), *args]


def test_unknown_benchmark_is_one_line_and_exit_2():
    done = subprocess.run(
        [sys.executable, str(BENCH / "_index.py"), "nope", "--rss-tokens", "1"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and done.stdout == ""
    assert "unknown benchmark 'nope' (available: checks, conversation, corrected," in done.stderr


def test_a_benchmark_runs_as_its_own_process_with_the_exit_code(tmp_path):
    (tmp_path / "_index.py").write_bytes((BENCH / "_index.py").read_bytes())
    (tmp_path / "fails.py").write_text('"""Exits 3."""\nimport sys\nsys.exit(len(sys.argv))\n')
    done = subprocess.run([sys.executable, str(tmp_path / "_index.py"), "fails", "a", "b"],
                          check=False)  # fmt: skip
    assert done.returncode == 3


def test_without_a_name_each_benchmark_is_listed_with_what_it_measures():
    done = subprocess.run(
        [sys.executable, str(BENCH / "_index.py")], capture_output=True, text=True, check=True
    )
    lines = dict(line.split(maxsplit=1) for line in done.stdout.splitlines())
    assert set(lines) == {p.stem for p in BENCH.glob("[!_]*.py")} and len(lines) >= 6
    assert lines["scoring"].startswith("Time to score 1,000 windows")


def test_the_list_is_read_from_the_folder(tmp_path):
    (tmp_path / "_helper.py").write_text('"""Not a benchmark."""\n')
    (tmp_path / "speed.py").write_text('"""How fast,\nmeasured.\n\nUsage: ..."""\nimport x\n')
    assert _index().benchmarks(tmp_path) == {"speed": "How fast, measured."}


def test_the_installed_cli_has_no_bench_command(run_cli):
    code, _, err = run_cli(["bench"])
    assert code == 2 and "No such command 'bench'" in err
