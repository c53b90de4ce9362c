"""examples/python_api.py, executed: a config from a dict, planned, run on the tiny model,
its summary read as a typed frame; the plan's budgets hold for what the run generated."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent.parent

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def test_the_python_api_example_plans_runs_and_reads_typed_frames(tmp_path):
    import pandas as pd

    import harness
    from harness.results import SummaryRow

    out = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "python_api.py"), str(out)],
        capture_output=True, text=True, env=env, timeout=1200, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "to send:" in done.stdout and "records; generate took" in done.stdout

    run = harness.Run(out)
    summary = run.frame(SummaryRow)
    assert sorted(summary["policy"]) == ["none", "restate"]
    assert pd.api.types.is_float_dtype(summary["auc"])
    assert summary["auc"].between(0, 1).all()
    assert run.manifest.name == "python-api" and run.manifest.timings["generate"] > 0

    plan = harness.plan(run.manifest.config, out)  # the config as the manifest recorded it
    generated = [u for u in plan.units if u.stage == "generate"]
    assert all(u.cached for u in generated)  # the same plan again: everything is in the cache
    assert len(run.records) == sum(u.samples * len(u.items) for u in generated) == 4
    for unit in generated:  # the budgets bound what the run sent and generated
        mine = [r for r in run.records if r.policy == unit.policy]
        made = sum(s.end - s.start for r in mine for s in r.segments if s.kind == "generated")
        assert 0 < made <= unit.budget.output_tokens
        assert 0 < sum(len(r.prompt_ids) for r in mine) <= unit.budget.input_tokens
