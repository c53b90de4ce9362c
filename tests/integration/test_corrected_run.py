"""A whole run whose check has validation data: `harness run` measures the language check on the
shipped frozen set and on the user's labelled file (`scoring.validation`), writes the corrected
AUC beside the raw one, gates on it (`corrected: true`) and shows it in the report. The
scripted engine (harness/engines/scripted.py) answers in French or in English with a known rate,
so no model generates; only the tiny model's tokenizer is loaded."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
import yaml

pytestmark = pytest.mark.integration

FRENCH = " Votre commande est partie hier soir et arrivera demain matin."
ENGLISH = " Your order left last night and will arrive tomorrow morning."


@pytest.fixture
def scripted(scripted_engine, tiny_model_path):
    from transformers import AutoTokenizer

    from harness.engines.scripted import ScriptedEngine

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_path)
    return scripted_engine(ScriptedEngine({"[fr]": 0.75}, tokenizer, good=FRENCH, bad=ENGLISH))


def _config(tmp_path, gates: list, checks: list | None = None) -> object:
    checks = checks or [{"type": "language", "target": "fr"}]
    suite = {
        "suite": "s",
        "items": [
            {
                "id": "fr",
                "system": "Always answer in French.",
                "user": "Where is my order? [fr]",
                "checks": checks,
            }
        ],
    }
    (tmp_path / "suite.yaml").write_text(yaml.safe_dump(suite))
    labels = [(FRENCH.strip(), True), (ENGLISH.strip(), False)]
    (tmp_path / "labels.jsonl").write_text(
        "".join(
            json.dumps({"text": t, "check": {"type": "language", "target": "fr"}, "expected": e})
            + "\n"
            for t, e in labels
        )
    )
    config = {
        "name": "corrected", "models": ["tiny-random-llama"], "suites": ["suite.yaml"],
        "policies": ["none"], "samples": 16,
        "generation": {"engine": "hf", "max_tokens": 64},
        "scoring": {"window": 32, "validation": "labels.jsonl"}, "probe": {"enabled": False},
        "gates": gates,
    }  # fmt: skip
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_a_run_with_validation_data_reports_and_gates_the_corrected_auc(tmp_path, scripted):
    from harness.pipeline import run_pipeline

    gates = [
        {"metric": "auc", "policy": "none", "min": 0.5, "corrected": True},
        {"metric": "auc", "policy": "none", "min": 0.99, "corrected": True},
    ]
    out = run_pipeline(_config(tmp_path, gates), out=tmp_path / "out", show_progress=False)
    (row,) = pd.read_csv(out / "adherence.csv").to_dict("records")
    assert row["undecided_windows"] == 0 and row["windows_total"] == 16 * 2
    assert row["auc_corrected_method"].startswith("rogan-gladen")
    assert row["auc_corrected_low"] <= row["auc_corrected"] <= row["auc_corrected_high"]
    assert row["auc_corrected_high"] - row["auc_corrected_low"] > row["auc_high"] - row["auc_low"]
    assert not math.isnan(row["auc_corrected"])
    summary = pd.read_csv(out / "summary.csv")
    assert summary.loc[0, "auc_corrected"] == pytest.approx(row["auc_corrected"])
    verdicts = pd.read_csv(out / "gates.csv")
    assert set(verdicts["metric"]) == {"auc_corrected"}
    assert verdicts["verdict"].tolist()[1] in ("fail", "undecided")  # never a pass at 0.99
    html = (out / "report.html").read_text()
    assert "AUC corrected" in html and "Rogan-Gladen" in html


def test_a_second_run_in_the_same_process_measures_its_own_checks(tmp_path, scripted):
    """The measured rates belong to the run: a run of another check earlier in the process
    (a notebook, a test session) must not leave the corrected AUC without validation data."""
    from harness.pipeline import run_pipeline

    first = tmp_path / "first"
    first.mkdir()
    regex = [{"type": "regex_must", "pattern": "commande"}]
    run_pipeline(_config(first, [], regex), out=first / "out", show_progress=False)
    out = run_pipeline(_config(tmp_path, []), out=tmp_path / "out", show_progress=False)
    (row,) = pd.read_csv(out / "adherence.csv").to_dict("records")
    assert row["auc_corrected_method"].startswith("rogan-gladen"), row["auc_corrected_method"]
