"""`harness score LOG --gates CONFIG` keeps one false-verdict budget over its gates, as a run
does (`stats.family`, Holm by default; harness.analysis.gate_family), and its report says so.

The log: 8 conversations of the five-rule Nordbank prompt, each keeping its word limit and its
persona in every reply (AUC 1) and never signing off (all rules: AUC 0). The one-sided
Clopper-Pearson lower bound of 8 of 8 is 0.05^(1/8) = 0.6877 at 95 % and (0.05/3)^(1/8) =
0.5995 at 1 - 0.05/3; the upper bound of 0 of 8 is 1 minus those. So the two rule gates at
min 0.66 (rules.csv) and the all-rules gate at max 0.34 (adherence.csv) each pass alone (per
check at 95 %) and none decides under Holm over their 3 bounds (first step at 1 - 0.05/3; no
step decides, so no later one is taken)."""

from __future__ import annotations

import pandas as pd
import pytest
import yaml

from harness.engines.scripted import CharTokenizer
from tests.unit.test_five_rules import DATA, _chat_log

GATES = [
    {"metric": "auc", "policy": "none", "rule": "max-80-words", "min": 0.66},
    {"metric": "auc", "policy": "none", "rule": "persona", "min": 0.66},
    {"metric": "auc", "policy": "none", "max": 0.34},
]
HOLM_FIRST = 1 - 0.05 / 3


def _score(tmp_path, run_cli, stats: dict | None) -> tuple[int, pd.DataFrame, str]:
    config = {"gates": GATES, **({"stats": stats} if stats is not None else {})}
    (tmp_path / "gates.yaml").write_text(yaml.safe_dump(config))
    log = _chat_log(tmp_path / "support.jsonl", 8)
    out = tmp_path / "out"
    argv = ["score", str(log), "--suite", str(DATA / "lena-suite.yaml"), "--out", str(out)]
    code, _, stderr = run_cli([*argv, "--gates", str(tmp_path / "gates.yaml")])
    assert code in (0, 1), stderr
    report = (out / "report.html").read_text(encoding="utf-8")
    return code, pd.read_csv(out / "gates.csv"), report


@pytest.fixture(autouse=True)
def _char_tokens(monkeypatch):
    monkeypatch.setattr("harness.units.plan.load_tokenizer", lambda name: CharTokenizer())


def test_a_logs_gates_share_holms_budget_by_default(tmp_path, run_cli):
    code, gates, report = _score(tmp_path, run_cli, None)
    assert gates["rule"].fillna("").tolist() == ["max-80-words", "persona", ""]
    assert gates["verdict"].tolist() == ["undecided"] * 3 and code == 1
    assert gates["family"].tolist() == ["holm"] * 3
    assert gates["level"].tolist() == pytest.approx([HOLM_FIRST] * 3)
    bound = (1 - HOLM_FIRST) ** (1 / 8)
    assert gates["value_low"].tolist()[:2] == pytest.approx([bound] * 2, abs=1e-4)
    assert gates["value_high"].tolist()[2] == pytest.approx(1 - bound, abs=1e-4)
    section = report[report.index('<section id="gates">') :].split("</section>")[0]
    assert "Holm over 3 bounds (stats.family: holm)" in section
    assert "wrong is &lt;= 5 %" in section or "wrong is <= 5 %" in section


def test_per_check_gates_on_a_log_are_a_setting(tmp_path, run_cli):
    """`stats.family: none`: each bound at stats.level alone; the report says what the
    verdicts together risk."""
    code, gates, report = _score(tmp_path, run_cli, {"family": "none"})
    assert gates["verdict"].tolist() == ["pass"] * 3 and code == 0
    assert gates["level"].tolist() == pytest.approx([0.95] * 3)
    assert gates["value_low"].tolist()[:2] == pytest.approx([0.05 ** (1 / 8)] * 2, abs=1e-4)
    assert gates["value_high"].tolist()[2] == pytest.approx(1 - 0.05 ** (1 / 8), abs=1e-4)
    section = report[report.index('<section id="gates">') :].split("</section>")[0]
    assert "3 bounds tested, each wrong with probability" in section


def test_a_bad_stats_field_in_the_gates_file_is_one_line(tmp_path, run_cli):
    config = {"gates": GATES, "stats": {"family": "holmes"}}
    (tmp_path / "gates.yaml").write_text(yaml.safe_dump(config))
    log = _chat_log(tmp_path / "support.jsonl", 1)
    out = tmp_path / "out"
    argv = ["score", str(log), "--suite", str(DATA / "lena-suite.yaml"), "--out", str(out)]
    code, _, stderr = run_cli([*argv, "--gates", str(tmp_path / "gates.yaml")])
    assert code == 2 and stderr.count("\n") == 1 and "stats.family" in stderr, stderr
    assert not out.exists()


def test_gates_on_scored_texts_share_the_budget_too(tmp_path, run_cli):
    """A file of {item, text} lines (policy `logged`): two items whose 8 texts all keep the
    rule, a gate at min 0.66 on each: Holm over 2 bounds tests each at 97.5 %, where 8 of 8
    leaves 0.025^(1/8) = 0.6306: undecided (per check at 95 %, 0.6877: pass)."""
    import json

    suite = {"suite": "r", "items": [
        {"id": item, "system": "Answer briefly.", "user": "Hi",
         "checks": [{"type": "regex_must_not", "pattern": "sorry", "rule": "no-sorry"}]}
        for item in ("a", "b")
    ]}  # fmt: skip
    (tmp_path / "suite.yaml").write_text(yaml.safe_dump(suite))
    text = "The weather is fine today and the sun is out. " * 6
    lines = [json.dumps({"item": item, "text": text}) for item in "ab" for _ in range(8)]
    (tmp_path / "texts.jsonl").write_text("\n".join(lines) + "\n")
    gates = [{"metric": "auc", "policy": "logged", "min": 0.66, "items": [i]} for i in "ab"]
    (tmp_path / "gates.yaml").write_text(yaml.safe_dump({"gates": gates}))
    out = tmp_path / "out"
    argv = ["score", str(tmp_path / "texts.jsonl"), "--suite", str(tmp_path / "suite.yaml")]
    code, _, stderr = run_cli(
        [*argv, "--out", str(out), "--window", "16", "--gates", str(tmp_path / "gates.yaml")]
    )
    verdicts = pd.read_csv(out / "gates.csv")
    assert code == 1 and verdicts["verdict"].tolist() == ["undecided"] * 2, stderr
    assert verdicts["family"].tolist() == ["holm"] * 2
    assert verdicts["value_low"].tolist() == pytest.approx([0.025 ** (1 / 8)] * 2, abs=1e-4)
