"""Labelled replies (harness.scoring.validation): the loader's errors, the confusion counts
and their exact intervals, and windowed rows cut as a run cuts them."""

from __future__ import annotations

import json

import pytest

from harness.errors import UserError
from harness.scoring.validation import (
    LabelledReply,
    confusions,
    length_band,
    read_labelled,
    score_labelled,
)
from harness.stats import binomial_interval

NO_COMMA = {"type": "regex_must_not", "pattern": ","}


def _rows(*pairs):
    return [LabelledReply(text=t, check=NO_COMMA, expected=e) for t, e in pairs]


def test_length_bands():
    assert [length_band("x" * n) for n in (9, 10, 29, 30, 79, 80, 200, 201)] == [
        "<10", "10-30", "10-30", "30-80", "30-80", "80-200", "80-200", ">200",
    ]  # fmt: skip


def test_confusion_counts_every_outcome():
    rows = _rows(
        ("No comma here at all.", True),  # true pass
        ("One, comma here.", True),  # false fail (mislabelled on purpose)
        ("Yes, a comma.", False),  # true fail
        ("No comma at all.", False),  # false pass
    )
    table = confusions(score_labelled(rows), by=("check", "band"))
    total = next(c for c in table if c.group["band"] == "all")
    assert (total.true_pass, total.false_fail, total.true_fail, total.false_pass) == (1, 1, 1, 1)
    assert total.abstained == 0 and total.accuracy == 0.5
    estimate, low, high, n = total.sensitivity()
    want = binomial_interval([1], [2])
    assert (estimate, n) == (0.5, 2) and (low, high) == (want[0][0], want[1][0])


def test_language_abstention_is_counted():
    rows = [
        LabelledReply(text="Ok!!! 42", check={"type": "language", "target": "en"}, expected=True)
    ]
    (scored,) = score_labelled(rows)
    assert scored.passed is None and scored.outcome == "abstained"
    (total,) = [c for c in confusions([scored]) if c.group["band"] == "all"]
    assert total.abstained == 1 and total.abstention == 1.0


def test_loader_names_file_and_line(tmp_path):
    path = tmp_path / "labels.jsonl"
    good = {
        "text": "Bonjour, merci.",
        "check": {"type": "language", "target": "fr"},
        "expected": True,
    }
    path.write_text(json.dumps(good) + "\n\n" + json.dumps({**good, "expected": "maybe"}) + "\n")
    with pytest.raises(UserError, match=r"labels.jsonl:3: field 'expected'"):
        read_labelled(path)
    path.write_text(json.dumps({**good, "check": {"type": "nope"}}) + "\n")
    with pytest.raises(UserError, match=r"labels.jsonl:1: field 'check'"):
        read_labelled(path)
    path.write_text("not json\n")
    with pytest.raises(UserError, match=r"labels.jsonl:1: not valid JSON"):
        read_labelled(path)
    with pytest.raises(UserError, match="file not found"):
        read_labelled(tmp_path / "missing.jsonl")


class _CharTokenizer:
    """One token per character: windows of n tokens are n characters."""

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [ord(c) for c in text]}

    def batch_decode(self, batches, skip_special_tokens=True):
        return ["".join(chr(i) for i in ids) for ids in batches]


def test_window_rows_are_cut_and_skip_the_reminder():
    ends = {"type": "regex_must", "pattern": r"thanks\.?$"}
    text = "Your order ships today, thanks."
    whole = LabelledReply(text=text, check=ends, expected=True)
    cut = LabelledReply(text=text, check=ends, expected=True, window=10)
    reminder = LabelledReply(
        text="No commas here", check=NO_COMMA, expected=True, window=40,
        reminder="Remember, no commas.", reminder_at=3,
    )  # fmt: skip
    scored = score_labelled([whole, cut, reminder], tokenizer=_CharTokenizer())
    # a constraint on the reply's end fails in the windows the boundary cuts off from it
    assert [s.outcome for s in scored] == ["true_pass", "false_fail", "true_pass"]


def test_a_response_check_on_a_windowed_row_reads_the_whole_reply():
    # as a run scores it: the whole reply, the reminder left out (not each window)
    ends = {"type": "ifeval", "id": "startend:end_checker", "kwargs": {"end_phrase": "Bye, Ada."}}
    text = "Your books are due back on 4 June. Bye, Ada."
    row = LabelledReply(
        text=text, check=ends, expected=True, window=8, reminder="Remember: be Ada.",
        reminder_at=text.index("Bye"),
    )  # fmt: skip
    (scored,) = score_labelled([row], tokenizer=_CharTokenizer())
    assert scored.outcome == "true_pass", scored.reason


def test_the_script_check_does_not_count_code():
    cyrillic = {"type": "script", "script": "Cyrillic", "min_share": 0.8}
    text = "Запустите команду:\n```\npip install requests --upgrade\n```\nи перезапустите."
    (scored,) = score_labelled([LabelledReply(text=text, check=cyrillic, expected=True)])
    assert scored.outcome == "true_pass", scored.reason
