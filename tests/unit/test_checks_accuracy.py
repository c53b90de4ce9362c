"""The quick subset of `bench/checks.py` as CI's accuracy gate: the frozen language half and
the deterministic checks' rows without windows, scored through the scoring path, meet their
goals; a drop below a goal is reported (and makes the bench exit 1)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.scoring.validation import load_shipped, score_labelled
from harness.scoring.validation_table import LanguageGoal, language_goal_misses
from tests.script_module import load_script

BENCH = Path(__file__).parents[2] / "bench" / "checks.py"


@pytest.fixture(scope="module")
def bench():
    return load_script(BENCH, "bench_checks")


def test_quick_subset_meets_every_goal(bench, capsys):
    misses = bench.score_sets(quick=True)
    out = capsys.readouterr().out
    assert misses == [], misses
    assert "== language-test: 514 labelled replies" in out
    assert "== checks:" in out and "language-dev" not in out


def test_a_drop_below_the_goal_is_a_miss():
    rows = [r for r in load_shipped("language-test") if r.band == "10-30"][:50]
    scored = [s for s in score_labelled(rows) if s.outcome in ("true_pass", "true_fail")][:40]
    assert len(scored) == 40 and language_goal_misses(scored, LanguageGoal()) == []
    # three wrong of 40 (92.5 %) is below 95 %
    flipped = [
        s.model_copy(update={"row": s.row.model_copy(update={"expected": not s.row.expected})})
        if i < 3
        else s
        for i, s in enumerate(scored)
    ]
    (miss,) = language_goal_misses(flipped, LanguageGoal())
    assert miss.startswith("language 10-30: 37/40 right < 95%")
