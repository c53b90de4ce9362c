"""`harness relay` as a user runs it: the table, relay.csv, the sweep, and bad input."""

from __future__ import annotations

import csv
import subprocess
import sys

import pytest

from harness.analysis.relay import csv_positions
from harness.results.base import MODEL_TOKENS

pytestmark = pytest.mark.e2e


def run_cli(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "harness", "relay", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
    )


def test_relay_writes_csv_and_prints_table(tmp_path):
    out = tmp_path / "relay"
    proc = run_cli(
        "--prompt-len", "8", "--layers", "3", "--tokens", "20000", "--out", str(out), "--sweep"
    )
    assert proc.returncode == 0, proc.stderr
    assert "relay model  P=8  L=3  T=20,000" in proc.stdout
    assert "W=0.75" in proc.stdout  # the sweep table
    with open(out / "relay.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0]) == ["layer", "t", "delta", "local_alpha", "bound_ratio", "t_unit"]
    assert {r["t_unit"] for r in rows} == {MODEL_TOKENS}  # the relay model's positions are tokens
    positions = csv_positions(20000)
    assert len(rows) == 3 * len(positions)
    assert {r["layer"] for r in rows} == {"1", "2", "3"}
    layer1 = [r for r in rows if r["layer"] == "1"]
    assert [int(r["t"]) for r in layer1] == positions.tolist()
    for r in layer1:
        assert float(r["delta"]) == pytest.approx(8 / (8 + int(r["t"])), rel=1e-12)
    top_last = [r for r in rows if r["layer"] == "3"][-1]
    assert int(top_last["t"]) == 20000
    assert 0.5 < float(top_last["local_alpha"]) < 1.0
    with open(out / "relay_sweep.csv", newline="") as fh:
        assert len(list(csv.DictReader(fh))) == 16
    assert sorted(p.name for p in out.iterdir()) == ["relay.csv", "relay_sweep.csv"]


@pytest.mark.parametrize(
    "args",
    [
        ["--prompt-len", "0"],
        ["--layers", "0"],
        ["--tokens", "15"],
        ["--self-weight", "1.0"],
    ],
)
def test_bad_input_exits_2_one_line_nothing_written(tmp_path, args):
    out = tmp_path / "never"
    proc = run_cli(*args, "--out", str(out), cwd=tmp_path)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --"), proc.stderr
    assert not out.exists()
    assert list(tmp_path.iterdir()) == []  # not even the default reports/ folder
