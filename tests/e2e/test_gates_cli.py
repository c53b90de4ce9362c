"""Gates through the CLI on the tiny model: a failing gate exits 1 and junit.xml names it;
`harness gate` re-judges the finished folder with a new threshold without recomputing; a suite
without reminder/restatement runs periodic (reminder = the system prompt) and refuses restate."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pandas as pd
import pytest
import yaml

# whole runs (the module's fixtures count against its first test's limit)
pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(1200)]

CONFIGS = Path(__file__).parent.parent / "data" / "configs"
FAILING = "gates[1] token_overhead of periodic-16-user <= 0.05 on mini-fr"
UNDECIDED = "gates[3] auc (all rules) of none >= 0.5 on mini-fr"


def _harness(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "harness", *argv],
        capture_output=True,
        text=True,
        timeout=1200,
        cwd=cwd,
    )


def _config(folder: Path, **changes) -> Path:
    """tiny-gates.yaml and its suite copied into `folder`, top-level keys changed."""
    shutil.copy(CONFIGS / "bare-suite.yaml", folder / "bare-suite.yaml")
    config = yaml.safe_load((CONFIGS / "tiny-gates.yaml").read_text())
    config.update(changes)
    path = folder / "tiny-gates.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def gated_run(tmp_path_factory, tiny_model_path):
    folder = tmp_path_factory.mktemp("gates")
    _config(folder)
    done = _harness("run", "tiny-gates.yaml", "--out", "run", cwd=folder)
    return folder, folder / "run", done


def test_failing_and_undecided_gates_exit_1_are_shown_first_and_named_in_junit(gated_run):
    _, run, done = gated_run
    assert done.returncode == 1, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    out = done.stdout
    head = "Gates: 3 of 6 gate checks passed, 2 failed, 1 undecided"
    assert out.index(head) < out.index("adherence AUC")
    assert f"FAIL {FAILING}: token_overhead = " in out
    assert f"UNDECIDED {UNDECIDED}: auc " in out and ", n = 2" in out
    gates = pd.read_csv(run / "gates.csv")
    assert len(gates) == 6  # gates 0 and 1 on both items, gates 2 and 3 on one item each
    assert gates["verdict"].tolist() == ["pass", "pass", "fail", "fail", "pass", "undecided"]
    assert gates["passed"].tolist() == [True, True, False, False, True, False]
    assert gates["n"].isna().tolist() == [True] * 4 + [False] * 2  # a point value has no n
    assert gates["n"].iloc[4:].tolist() == [2, 2]  # the AUC intervals rest on 2 samples each
    undecided = gates.iloc[5]
    assert undecided["value_low"] < 0.5 <= undecided["value_high"]
    assert undecided["samples_needed"] > 2
    root = ET.parse(run / "junit.xml").getroot()
    assert root.get("tests") == "6" and root.get("failures") == "3"
    failures = {
        case.get("name"): case.find("failure").get("message")
        for case in root.iter("testcase")
        if case.find("failure") is not None
    }
    assert set(failures) == {FAILING, FAILING.replace("mini-fr", "mini-lower"), UNDECIDED}
    assert failures[FAILING].startswith("fail: token_overhead = ")
    assert "above max 0.05 [model tiny-random-llama]" in failures[FAILING]
    assert failures[UNDECIDED].startswith("undecided: auc ")
    report = (run / "report.html").read_text()
    assert report.index('<section id="gates">') < report.index('<section id="verdicts">')
    assert "3 of 6 gate checks passed, 2 failed, 1 undecided (exit code 1)." in report
    assert '<tr class="gate-undecided"><td>UNDECIDED</td>' in report


def test_periodic_reminds_with_the_system_prompt_when_the_item_has_no_reminder(gated_run):
    _, run, _ = gated_run
    records = [json.loads(line) for line in (run / "generations.jsonl").open()]
    periodic = [r for r in records if r["policy"] == "periodic-16-user"]
    assert len(periodic) == 4
    for record in periodic:
        system = record["prompt_messages"][0]["content"]
        reminders = [s for s in record["segments"] if s["source"] == "reminder"]
        assert len(reminders) == 2 and all(system in s["text"] for s in reminders)


def test_harness_gate_rejudges_the_folder_without_recomputing(gated_run):
    folder, run, _ = gated_run
    cache = sorted(p.relative_to(run) for p in (run / "cache").rglob("*"))
    summary = (run / "summary.csv").read_bytes()
    written = {name: (run / name).read_bytes() for name in ("gates.csv", "junit.xml")}
    config = yaml.safe_load((folder / "tiny-gates.yaml").read_text())
    config["gates"][1]["max"] = 5.0  # every reminder-heavy run passes now
    del config["gates"][3]  # and the undecided check is gone
    relaxed = folder / "relaxed.yaml"
    relaxed.write_text(yaml.safe_dump(config, sort_keys=False))
    done = _harness("gate", "run", "relaxed.yaml", cwd=folder)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Gates: every gate check passed" in done.stdout
    assert pd.read_csv(run / "gates.csv")["passed"].all()
    assert ET.parse(run / "junit.xml").getroot().get("failures") == "0"
    assert sorted(p.relative_to(run) for p in (run / "cache").rglob("*")) == cache
    assert (run / "summary.csv").read_bytes() == summary
    assert "All 5 gate checks passed." in (run / "report.html").read_text()
    assert "verdict" in pd.read_csv(run / "gates.csv").columns
    # the original thresholds again: byte for byte what the run wrote
    assert _harness("gate", "run", "tiny-gates.yaml", cwd=folder).returncode == 1
    assert {name: (run / name).read_bytes() for name in written} == written


def test_restate_without_a_restatement_is_one_line_before_anything_runs(tmp_path, tiny_model_path):
    _config(tmp_path, policies=["none", "restate"], gates=[])
    done = _harness("run", "tiny-gates.yaml", "--out", "run", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr == (
        "error: tiny-gates.yaml: item 'mini-fr', policy 'restate': the item has no "
        "`restatement` (add one to "
        "the suite, or drop the policy)\n"
    )
    assert not (tmp_path / "run").exists()
