"""`harness run --until-decided` through the CLI on the tiny model (hf engine): the samples each
condition took, as manifest.json records them, are the samples generations.jsonl holds, and
the conditions that decided at the first look kept their first samples."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(1200)]

CONFIGS = Path(__file__).parent.parent / "data" / "configs"


def test_until_decided_samples_the_undecided_condition_and_records_why_each_stopped(
    tmp_path, tiny_model_path
):
    shutil.copy(CONFIGS / "bare-suite.yaml", tmp_path / "bare-suite.yaml")
    config = yaml.safe_load((CONFIGS / "tiny-gates.yaml").read_text())
    # token_overhead gates compare values (decided at once); the AUC interval of the tiny
    # random model's lowercase item cannot clear 0.5, nor fall below it, from 2 samples; max 8
    # because a gate that cannot pass by max is refused before the run (4 could not: needs 5)
    config["gates"] = [
        {"metric": "token_overhead", "policy": "none", "max": 0},
        {"metric": "token_overhead", "policy": "periodic-16-user", "max": 0.05},
        {"metric": "auc", "policy": "none", "min": 0.5, "items": ["mini-lower"]},
    ]
    config["probe"] = {"enabled": False}
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(config, sort_keys=False))

    done = subprocess.run(
        [sys.executable, "-m", "harness", "run", "run.yaml", "--out", "run", "--until-decided",
         "--max-samples", "8"],
        capture_output=True, text=True, timeout=1200, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stderr[-2000:]
    assert "Traceback" not in done.stderr

    run = tmp_path / "run"
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["config"]["samples"] == {"min": 2, "max": 8, "batch": None}
    sequential = manifest["sequential"]
    # the looks of harness.config.sampling.schedule: x1.3 per look, at least one more sample each
    assert sequential["looks"][0] == 2 and set(sequential["looks"]) <= set(range(2, 9))
    assert sequential["rule"] == "x1.3 per look"
    took = {
        (c["item"], c["policy"]): (c["samples"], c["stopped"]) for c in sequential["conditions"]
    }
    # the overhead gates read every condition: a value comparison is decided at the first look
    assert took[("mini-fr", "none")] == took[("mini-fr", "periodic-16-user")] == (2, "decided")
    samples, stopped = took[("mini-lower", "none")]
    assert samples > 2 and stopped in ("decided", "max reached")
    assert stopped == "decided" or samples == 8

    records = [json.loads(line) for line in (run / "generations.jsonl").read_text().splitlines()]
    held: dict = {}
    for record in records:
        held.setdefault((record["item"], record["policy"]), set()).add(record["sample"])
    assert held == {key: set(range(n)) for key, (n, _) in took.items()}
