"""The report's "How far to trust the judge" section: the calibration table, kappa in words,
undetermined verdicts, escaping of judge ids (model-written reasons and user-written rules)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from harness.analysis.calibration import judge_calibration
from tests.script_module import load_script

MAKE_RUN = Path(__file__).parents[1] / "data" / "report_run" / "make_run.py"
EVIL = '<script>alert("judge")</script>'


@pytest.fixture(scope="module")
def plain_run(tmp_path_factory):
    """The report tests' synthetic run folder (no judge checks)."""
    module = load_script(MAKE_RUN, "report_make_run")
    return module.build_run(tmp_path_factory.mktemp("judge-report") / "run")


def windows_from(counts: tuple[int, int, int, int], undetermined: int = 0) -> pd.DataFrame:
    """windows.csv rows of one judge and one code check on the same windows, 5 per sample:
    counts = (both pass, judge only passes, code only passes, both fail)."""
    verdicts = [(True, True), (True, False), (False, True), (False, False)]
    pairs = [pair for pair, n in zip(verdicts, counts, strict=True) for _ in range(n)]
    pairs += [(None, True)] * undetermined
    rows = []
    for k, (judge, code) in enumerate(pairs):
        where = dict(
            run_id="r", model="m", task="t", item="i", policy="none", seed=k // 5,
            sample=k // 5, window=k % 5, t_start=1, t_end=2, t_gen_start=1, scope="window",
            value=0.0, reason="",
        )  # fmt: skip
        rows.append({**where, "check": f"judge:{EVIL}", "passed": judge})
        rows.append({**where, "check": "language:fr", "passed": code})
    return pd.DataFrame(rows)


def test_a_run_without_judge_checks_says_so(plain_run, tmp_path):
    from harness.report import render_report

    run = tmp_path / "plain"
    shutil.copytree(plain_run, run)
    html = render_report(run).read_text()
    # no data: the section is left out, named in the one line that lists what was left out
    assert '<section id="judge">' not in html
    left_out = html[html.index('<div class="left-out') :]
    left_out = left_out[: left_out.index("</div>")]
    assert "How far to trust the judge" in left_out
    assert "This run has no judge checks" in left_out


def test_the_table_and_the_reading_of_kappa(plain_run, tmp_path):
    from harness.report import render_report

    run = tmp_path / "judged"
    shutil.copytree(plain_run, run)
    windows = windows_from((20, 5, 10, 15), undetermined=1)
    windows.to_csv(run / "windows.csv", index=False)
    judge_calibration(windows).to_csv(run / "calibration.csv", index=False)
    html = render_report(run).read_text()
    section = html.split('<section id="judge">', 1)[1].split("</section>", 1)[0]
    assert EVIL not in html and "&lt;script&gt;alert(&quot;judge&quot;)" in section
    assert "Cohen" in section and "0.4–0.6 moderate" in section
    assert "on 70 % of 50 windows" in section and "κ = 0.4 " in section
    assert ": fair agreement." in section
    assert "no usable verdict on 1 of 51 judged windows" in section


def test_kappa_words_follow_landis_and_koch():
    from harness.report.calibration import kappa_words

    assert kappa_words(-0.1) == "no agreement beyond chance"
    assert kappa_words(0.1) == "slight agreement"
    assert kappa_words(0.7) == "substantial agreement"
    assert kappa_words(0.95) == "almost perfect agreement"
    assert kappa_words(float("nan")).startswith("κ undefined")


def test_judge_checks_without_a_code_check_are_reported(plain_run, tmp_path):
    from harness.report import render_report

    run = tmp_path / "lonely"
    shutil.copytree(plain_run, run)
    windows = windows_from((2, 0, 0, 2))
    windows[windows["check"].str.startswith("judge:")].to_csv(run / "windows.csv", index=False)
    pd.DataFrame(columns=["model", "item", "judge", "code", "n", "accuracy", "kappa"]).to_csv(
        run / "calibration.csv", index=False
    )
    html = render_report(run).read_text()
    assert "calibration.csv is not usable: the file has no rows." in html
