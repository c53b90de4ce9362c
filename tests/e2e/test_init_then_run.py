"""The before-deployment workflow as a new user runs it on the embedded model: `harness init`
from a prompt file, then `harness run` of the written config (shortened so the test stays
quick: fewer samples and tokens, the rest as written), with its gate verdict and junit.xml."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pandas as pd
import pytest
import yaml

# whole runs (the module's fixtures count against its first test's limit)
pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(1500)]


def _harness(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "harness", *argv]
    return subprocess.run(command, capture_output=True, text=True, timeout=1500, cwd=cwd)


def test_init_then_run_on_the_embedded_model(tmp_path, embedded_model_path):
    (tmp_path / "prompt.txt").write_text(
        "You are Ava, a support agent for Acme: answer in English, politely.\n"
    )
    made = _harness("init", "acme", "--system", "@prompt.txt", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    config = yaml.safe_load((tmp_path / "acme.yaml").read_text())
    assert config["models"] == ["smollm2-135m-instruct"] and config["gates"]
    config.update(samples=1, generation={**config["generation"], "max_tokens": 64})
    (tmp_path / "acme.yaml").write_text(yaml.safe_dump(config, sort_keys=False))

    done = _harness("run", "acme.yaml", "--out", "run", cwd=tmp_path)
    assert done.returncode in (0, 1), done.stderr[-2000:]  # 1: a gate failed, as reported
    run = tmp_path / "run"
    gates = pd.read_csv(run / "gates.csv")
    suite = yaml.safe_load((tmp_path / "acme.suite.yaml").read_text())
    assert len(gates) == len(suite["items"])  # the one gate, on every item
    assert done.returncode == (1 if (~gates["passed"]).any() else 0)
    cases = ET.parse(run / "junit.xml").getroot().iter("testcase")
    assert len(list(cases)) == len(gates)
    records = [line for line in (run / "generations.jsonl").read_text().splitlines() if line]
    assert len(records) == len(suite["items"]) * len(config["policies"])
    assert (run / "report.html").is_file()
