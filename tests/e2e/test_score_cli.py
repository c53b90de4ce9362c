"""`harness score` as a user runs it: production-log JSONL in, CSVs out; bad input exits 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from harness.scoring import WINDOW_COLUMNS

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.slow]
TASKS = Path(__file__).parents[2] / "tasks"

FRENCH = (
    "Le vieux gardien du phare regardait la mer chaque soir. Cette nuit-là, une baleine immense "
    "s'approcha du rivage et chanta doucement. Il descendit l'escalier en colimaçon, une lanterne "
    "à la main, et lui parla comme à une vieille amie. "
)
ENGLISH = (
    "Then the story went on in English, because the keeper had forgotten which language he was "
    "speaking, and the whale answered him with long songs about the deep cold currents. "
)


def _harness(*args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "harness", *args], capture_output=True, text=True, cwd=cwd
    )


def _write_jsonl(path: Path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    folder = tmp_path_factory.mktemp("score")
    logs = folder / "logs.jsonl"
    _write_jsonl(
        logs,
        [
            {"item": "lang-fr-story", "text": FRENCH * 4},
            {"item": "lang-fr-story", "text": FRENCH * 2 + ENGLISH * 3},
            {
                "item": "fmt-nocomma-story",
                "text": "The raft drifted on. " * 20 + "Slowly, it sank.",
            },
            {  # a harness generation record: the restatement is not scored
                "run_id": "r1",
                "model": "smollm2-135m-instruct",
                "task": "languages",
                "item": "lang-de-story",
                "policy": "restate",
                "seed": 3,
                "sample": 0,
                "continuation_ids": list(range(1000, 1080)),
                "finish_reason": "length",
                "segments": [
                    {"kind": "restatement", "start": 0, "end": 10},
                    {"kind": "generated", "start": 10, "end": 80},
                ],
            },
        ],
    )
    out = folder / "out"
    result = _harness(
        "score", str(logs), "--suite", str(TASKS / "languages.yaml"),
        "--suite", str(TASKS / "formats.yaml"), "--out", str(out), cwd=folder,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return out


def test_windows_csv_marks_the_drift_to_english(scored):
    windows = pd.read_csv(scored / "windows.csv")
    assert list(windows.columns) == WINDOW_COLUMNS
    french = windows[windows["item"] == "lang-fr-story"]
    kept = french[french["sample"] == 0]
    assert kept["passed"].all() and len(kept) >= 3
    drift = french[french["sample"] == 1].sort_values("window")
    assert bool(drift["passed"].iloc[0]) and not bool(drift["passed"].iloc[-1])
    assert (drift["t_gen_start"] == drift["t_start"]).all()  # logs: every token generated
    assert set(windows["task"]) == {"languages", "formats"}
    comma = windows[windows["item"] == "fmt-nocomma-story"].sort_values("window")
    assert not bool(comma["passed"].iloc[-1]) and bool(comma["passed"].iloc[0])


def test_harness_record_positions(scored):
    windows = pd.read_csv(scored / "windows.csv")
    record = windows[windows["item"] == "lang-de-story"].sort_values("window")
    assert record["t_start"].tolist() == [11, 75] and record["t_end"].tolist() == [74, 80]
    assert record["t_gen_start"].tolist() == [1, 65]
    assert set(record["policy"]) == {"restate"} and set(record["seed"]) == {3}


def test_adherence_csv_per_condition(scored):
    summary = pd.read_csv(scored / "adherence.csv").set_index("item")
    assert summary.loc["lang-fr-story", "n_samples"] == 2
    assert summary.loc["lang-fr-story", "a_first"] == 1.0
    assert summary.loc["lang-fr-story", "final"] == 0.5
    assert summary.loc["lang-fr-story", "failures"] == 1
    assert (scored / "adherence_curve.csv").exists() and (scored / "survival.csv").exists()


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ({"item": "lang-fr-story"}, "logs.jsonl:2: field 'text' missing"),
        ({"item": "lang-xx-nope", "text": "bonjour"}, "logs.jsonl:2: field 'item': no task item"),
        ("{not json", "logs.jsonl:2: not valid JSON"),
    ],
)
def test_bad_jsonl_line_exits_2_and_writes_nothing(tmp_path, line, message):
    logs = tmp_path / "logs.jsonl"
    first = json.dumps({"item": "lang-fr-story", "text": FRENCH})
    second = line if isinstance(line, str) else json.dumps(line)
    logs.write_text(first + "\n" + second + "\n")
    out = tmp_path / "out"
    result = _harness(
        "score",
        str(logs),
        "--suite",
        str(TASKS / "languages.yaml"),
        "--out",
        str(out),
        cwd=tmp_path,
    )
    assert result.returncode == 2
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not out.exists()


def test_bad_suite_exits_2(tmp_path):
    suite = tmp_path / "bad.yaml"
    suite.write_text(
        "suite: bad\nitems:\n  - {id: a, system: s, user: u, reminder: r, restatement: t,\n"
        "     checks: [{type: ifeval, id: 'punctuation:no_semicolon'}]}\n"
    )
    logs = tmp_path / "logs.jsonl"
    logs.write_text(json.dumps({"item": "a", "text": "hello"}) + "\n")
    result = _harness(
        "score", str(logs), "--suite", str(suite), "--out", str(tmp_path / "o"), cwd=tmp_path
    )
    assert result.returncode == 2
    assert "bad.yaml: field 'items.0.checks.0" in result.stderr
    assert "unknown IFEval instruction id 'punctuation:no_semicolon'" in result.stderr
    assert not (tmp_path / "o").exists()
