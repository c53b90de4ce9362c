"""The harness from Python: a config from a dict, its plan read before anything runs, the run,
and its summary as a typed frame. Runs in about a minute on 2 cores (the tiny random model,
built locally on first use; its replies are noise, so the numbers mean nothing).

    python examples/python_api.py [OUT_FOLDER]
"""

from __future__ import annotations

import sys
from pathlib import Path

import harness
from harness.results import SummaryRow

ROOT = Path(__file__).resolve().parent.parent

config = harness.load_config(
    {
        "name": "python-api",
        "models": ["tiny-random-llama"],
        "suites": ["tasks/formats.yaml"],
        "items": ["fmt-lowercase-story"],
        "policies": ["none", "restate"],
        "samples": 2,
        "generation": {"engine": "hf", "max_tokens": 48, "temperature": 0.8},
        "scoring": {"window": 16},
        "probe": {"t_min": 4},
    },
    base=ROOT,  # where the relative suite path is
)
out = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "reports" / config.name

plan = harness.plan(config, out)  # nothing runs yet: every unit, its key and token budget
for unit in plan.units:
    budget = unit.budget
    print(f"{unit.stage:9} {unit.model:30} {unit.policy:8} requests {budget.requests:3} "
          f"tokens in <= {budget.input_tokens:5}, out <= {budget.output_tokens:5}")  # fmt: skip
totals = plan.totals.of("tiny-random-llama")
print(f"to send: {totals.to_send.input_tokens} input, {totals.to_send.output_tokens} output tokens")

run = harness.run(plan)
summary = run.frame(SummaryRow)  # summary.csv, columns typed by its row model
print(summary[["model", "policy", "auc", "auc_low", "auc_high", "n"]].to_string(index=False))
print(f"{len(run.records)} records; generate took {run.manifest.timings['generate']} s")
