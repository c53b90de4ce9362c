"""The report of a scored chat log: the conversations that fail first with their first failing
turn, check and reason; each failing turn with its user message and logged reply, escaped;
a(k) by turn and check and the share each check failed; failures by metadata; no section
that does not apply; `--worst` keeps it small and `--no-text` leaves every text out."""

from __future__ import annotations

import html as html_lib
import json
import re
from pathlib import Path

import pytest
import yaml

from harness.engines.scripted import CharTokenizer

FR_SYSTEM = "Réponds toujours en français."
FRENCH = (
    "Le vieux gardien du phare regardait la mer chaque soir et parlait doucement aux baleines "
    "qui passaient près du rivage. "
)
ENGLISH = (
    "Then the keeper went on in English, because he had forgotten which language he was "
    "speaking to the whale. "
)
ATTACK = "<script>alert('x')</script><img src=x onerror=alert(1)> "
SUITE = {"suite": "support", "items": [
    {"id": "fr", "system": FR_SYSTEM, "user": "Bonjour",
     "checks": [{"type": "language", "target": "fr"},
                {"type": "regex_must_not", "pattern": "whale", "scope": "response"}]},
]}  # fmt: skip


def _talk(*replies, user="Et ensuite ?"):
    head = [{"role": "system", "content": FR_SYSTEM}]
    return head + [
        m
        for k, r in enumerate(replies, start=1)
        for m in (
            {"role": "user", "content": f"{user} <b>{k}</b>"},
            {"role": "assistant", "content": r},
        )
    ]


@pytest.fixture
def folder(tmp_path, monkeypatch, run_cli):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("harness.units.plan.load_tokenizer", lambda name: CharTokenizer())
    (tmp_path / "suite.yaml").write_text(yaml.safe_dump(SUITE, allow_unicode=True))
    lines = [
        {"id": "late", "metadata": {"channel": "app"},
         "messages": _talk(FRENCH, FRENCH, ATTACK + ENGLISH)},
        {"id": "early", "metadata": {"channel": "web"}, "tags": ["vip"],
         "messages": _talk(ATTACK + ENGLISH, FRENCH)},
        {"id": "fine", "metadata": {"channel": "web"}, "messages": _talk(FRENCH, FRENCH)},
    ]  # fmt: skip
    (tmp_path / "talks.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return tmp_path


def _score(run_cli, *args):
    code, _, stderr = run_cli(
        ["score", "talks.jsonl", "--suite", "suite.yaml", "--out", "out", *args]
    )
    assert code == 0, stderr
    return Path("out/report.html").read_text(encoding="utf-8")


def _table_rows(page: str, heading: str) -> list[list[str]]:
    """The body rows of the first table after `heading`, as unescaped cell texts."""
    part = page.split(heading, 1)[1]
    body = part.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    return [
        [html_lib.unescape(c) for c in re.findall(r"<td>(.*?)</td>", row, flags=re.S)]
        for row in re.findall(r"<tr>(.*?)</tr>", body, flags=re.S)
    ]


def test_the_failing_conversations_and_turns_with_their_texts_escaped(folder, run_cli):
    page = _score(run_cli)
    first = _table_rows(page, "Conversations that fail first</h2>")
    assert [(r[0], r[2], r[3]) for r in first] == [
        ("early", "1", "language:fr"), ("late", "3", "language:fr")
    ]  # fmt: skip
    # the reason names what was found
    assert first[0][5] == "1 / 2" and first[0][4].startswith("found en ")
    turns = _table_rows(page, "<h3>Failing turns</h3>")
    assert [(r[0], r[1]) for r in turns] == [("early", "1"), ("late", "3")]
    assert "language:fr: found en " in turns[0][2] and "regex_must_not:whale" in turns[0][2]
    assert turns[0][3] == "Et ensuite ? <b>1</b>" and turns[1][3] == "Et ensuite ? <b>3</b>"
    assert turns[0][4] == (ATTACK + ENGLISH).strip()
    # model output and user text are escaped: no tag of the log reaches the page
    assert "<script>alert" not in page and "<img src=x" not in page and "<b>1</b>" not in page
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page


def test_by_turn_by_check_metadata_and_nothing_that_does_not_apply(folder, run_cli):
    page = _score(run_cli)
    shares = {r[0]: r[1:] for r in _table_rows(page, "Share of turns each check failed")}
    assert shares["language:fr"] == ["7", "2", "28.6 %", "0"]
    assert shares["regex_must_not:whale"] == ["7", "2", "28.6 %", "0"]
    by_turn = _table_rows(page, "<h3>a(k) by turn and check</h3>")
    assert by_turn[0] == ["1", "0.667 (n = 3)", "0.667 (n = 3)"]
    assert by_turn[2] == ["3", "0 (n = 1)", "0 (n = 1)"]
    channel = {r[0]: r[1:] for r in _table_rows(page, "<h3>channel</h3>")}
    assert channel == {"web": ["2", "1", "50.0 %"], "app": ["1", "1", "100.0 %"]}
    assert "is not in this run folder" not in page and "left out" not in page
    for absent in ("gates", "divergence", "verdicts", "samples", "judge", "manifest"):
        assert f'id="{absent}"' not in page
    (line,) = re.findall(r"This folder holds a scored log, so it does not contain [^<]*", page)
    assert "generations.jsonl" in line and "gates.csv" in line


def test_worst_and_no_text_keep_the_page_small_and_the_texts_out(folder, run_cli):
    page = _score(run_cli, "--worst", "1")
    assert [r[0] for r in _table_rows(page, "Conversations that fail first</h2>")] == ["early"]
    assert "1 of the 1 failing turns" in page
    page = _score(run_cli, "--no-text")
    assert "keeper" not in page and "Et ensuite" not in page and "alert" not in page
    assert [r[:2] for r in _table_rows(page, "<h3>Failing turns</h3>")] == [
        ["early", "1"], ["late", "3"]
    ]  # fmt: skip
    code, stdout, stderr = run_cli(["report", "out", "--worst", "1"])
    assert code == 0, stderr
    assert "keeper" in Path("out/report.html").read_text(encoding="utf-8")
