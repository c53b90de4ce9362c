"""The truncated share beside the results: replies a whole-reply rule judges that hit the token
limit, overall and per rule ("no verdict (cut off)"), from windows.csv and rules.csv."""

from __future__ import annotations

import pandas as pd

from harness.report.terminal import print_summary
from harness.report.truncation import cut_by_rule, read_truncation_line, truncation_line


def _windows() -> pd.DataFrame:
    """Two conversations of 3 replies and one single reply; 4 of the 7 replies cut. Each reply
    has a window row and two response rows (two whole-reply rules): counted once."""
    rows = []
    replies = [(0, 1, "length"), (0, 2, "stop"), (0, 3, "length"), (1, 1, "length"),
               (1, 2, "stop"), (1, 3, "stop")]  # fmt: skip
    for sample, turn, finish in replies:
        for scope in ("window", "response", "response"):
            rows.append(dict(run_id="r", model="m", item="talk", policy="none", sample=sample,
                             turn=turn, scope=scope, finish_reason=finish))  # fmt: skip
    for scope in ("window", "response"):
        rows.append(dict(run_id="r", model="m", item="one", policy="none", sample=0,
                         turn=None, scope=scope, finish_reason="length"))  # fmt: skip
    return pd.DataFrame(rows)


def _rules() -> pd.DataFrame:
    return pd.DataFrame(
        [
            dict(rule="sign-off", scope="response", cut_off=3, judged=3, undecided=0),
            dict(rule="sign-off", scope="response", cut_off=1, judged=0, undecided=0),
            dict(rule="max-80-words", scope="response", cut_off=0, judged=7, undecided=0),
            dict(rule="german", scope="window", cut_off=0, judged=40, undecided=2),
        ]
    )


def test_the_line_counts_each_reply_once_and_names_the_rules_left_without_verdict():
    line = truncation_line(_windows(), _rules())
    assert line == (
        "Replies cut at the token limit: 4 of 7 (57 %); no verdict (cut off): sign-off 4 of 7"
    )
    assert cut_by_rule(_rules()) == [("sign-off", 4, 7)]  # a rule with none cut: not named


def test_no_whole_reply_rule_no_line():
    windows = _windows()
    assert truncation_line(windows[windows["scope"] == "window"], None) == ""
    assert truncation_line(None, None) == ""


def test_the_terminal_summary_states_the_share(tmp_path, capsys):
    _windows().to_csv(tmp_path / "windows.csv", index=False)
    _rules().to_csv(tmp_path / "rules.csv", index=False)
    assert read_truncation_line(tmp_path).startswith("Replies cut at the token limit: 4 of 7")
    print_summary(tmp_path)
    assert "Replies cut at the token limit: 4 of 7 (57 %)" in capsys.readouterr().out
