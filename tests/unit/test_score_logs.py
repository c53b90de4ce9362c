"""`harness score` on a chat log through the CLI: every bad line is one `file:line` error, exit
2, nothing written (and no tokenizer loaded); a good log is matched to its items and scored
turn by turn into turns.csv, windows per reply, turn_adherence.csv, conversations.csv and the
report's Conversations section. The one-token-per-character tokenizer stands in for a model's."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
import yaml

from harness.engines.scripted import CharTokenizer

FR_SYSTEM, EN_SYSTEM = "Réponds toujours en français.", "Answer in English."
SUITE = {
    "suite": "support",
    "items": [
        {"id": "fr", "system": FR_SYSTEM, "user": "Bonjour",
         "checks": [{"type": "language", "target": "fr"}]},
        {"id": "en", "system": EN_SYSTEM, "user": "Hello",
         "checks": [{"type": "language", "target": "en"},
                    {"type": "regex_must_not", "pattern": "sorry", "scope": "response"}]},
        {"id": "brief", "system": "Be brief.", "user": "Hi",
         "checks": [{"type": "language", "target": "fr"}]},
    ],
}  # fmt: skip
FRENCH = (
    "Le vieux gardien du phare regardait la mer chaque soir et parlait doucement aux baleines "
    "qui passaient près du rivage. "
)
ENGLISH = (
    "Then the keeper went on in English, because he had forgotten which language he was "
    "speaking to the whale. "
)


def _msg(role, content):
    return {"role": role, "content": content}


def _talk(system, *replies, user="Et ensuite ?"):
    head = [_msg("system", system)] if system else []
    return head + [m for r in replies for m in (_msg("user", user), _msg("assistant", r))]


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "suite.yaml").write_text(yaml.safe_dump(SUITE, allow_unicode=True))
    return tmp_path


def _write(path, *lines):
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))
    return path


GOOD = {"id": "ok", "messages": _talk(FR_SYSTEM, FRENCH)}
DUPLICATE = {"id": "ok", "messages": _talk(FR_SYSTEM, FRENCH)}


@pytest.mark.parametrize(
    ("line", "args", "problem"),
    [
        ('{"messages": [{"role": "user"', [], "not valid JSON"),
        # a raw tab inside a string: json's message ends in "at", the line and column follow
        (
            '{"messages": [{"role": "user", "content": "a\tb"}]}',
            [],
            "not valid JSON at line 2, column 45: Invalid control character (found '\\t')",
        ),
        ({"messages": _talk(FR_SYSTEM)}, [], "no assistant turn to score"),
        (
            {"messages": [_msg("user", "a"), _msg("user", "b"), _msg("assistant", "c")]},
            [],
            "roles out of order: message 2 is 'user' after 'user', expected 'assistant'",
        ),
        ({"messages": [_msg("user", "a"), _msg("robot", "b")]}, [], 'unknown role "robot"'),
        (
            {"messages": [_msg("user", "a"), {"role": "assistant", "content": [{"text": "b"}]}]},
            [],
            "message 2 (assistant): content part 1 is not an object with a 'type'",
        ),
        (
            {"messages": _talk("Sois poli.", FRENCH)},
            [],
            "conversation matches no item (no 'item' on the line, its system message is no "
            "item's system, no --item)",
        ),
        (
            {"messages": _talk(None, FRENCH)},
            [],
            "conversation matches no item (no 'item' on the line, it has no system message",
        ),
        (
            {"item": "nope", "messages": _talk(None, FRENCH)},
            [],
            "field 'item': no task item 'nope'",
        ),
        (DUPLICATE, [], "id 'ok' is also the id of line 1"),
    ],
)
def test_a_bad_line_is_one_error_naming_file_and_line_and_nothing_is_written(
    folder, run_cli, monkeypatch, line, args, problem
):
    def no_tokenizer(name):
        raise AssertionError("the tokenizer was loaded before the log was checked")

    monkeypatch.setattr("harness.units.plan.load_tokenizer", no_tokenizer)
    log = _write(folder / "talks.jsonl", GOOD, line, GOOD | {"id": "later"})
    code, stdout, stderr = run_cli(
        ["score", str(log), "--suite", "suite.yaml", "--out", "out", *args]
    )
    assert code == 2 and stdout == "", stderr
    assert stderr.startswith(f"error: {log}:2: ") and stderr.count("\n") == 1, stderr
    assert problem in stderr and "Traceback" not in stderr
    assert not (folder / "out").exists()


@pytest.mark.parametrize(
    ("lines", "args", "problem"),
    [
        ([GOOD], ["--item", "absent"], "--item: no task item 'absent' in the suites"),
        ([{"item": "fr", "text": FRENCH}], ["--item", "fr"], "--item: only for chat logs"),
    ],
)
def test_item_option_errors(folder, run_cli, lines, args, problem):
    log = _write(folder / "talks.jsonl", *lines)
    code, _, stderr = run_cli(["score", str(log), "--suite", "suite.yaml", "--out", "out", *args])
    assert code == 2 and problem in stderr and stderr.count("\n") == 1, stderr
    assert not (folder / "out").exists()


def test_two_items_with_one_system_score_as_the_first_and_say_so(folder, run_cli, monkeypatch):
    """What `harness init` writes: every item one system prompt. A line naming no item is
    scored as the first of them, in one note line; `--item` picks another."""
    monkeypatch.setattr("harness.units.plan.load_tokenizer", lambda name: CharTokenizer())
    suite = {**SUITE, "items": [*SUITE["items"], {**SUITE["items"][0], "id": "fr-2"}]}
    (folder / "suite.yaml").write_text(yaml.safe_dump(suite, allow_unicode=True))
    log = _write(folder / "talks.jsonl", *[{"messages": _talk(FR_SYSTEM, FRENCH)}] * 2)
    code, _, stderr = run_cli(["score", str(log), "--suite", "suite.yaml", "--out", "out"])
    assert code == 0, stderr
    assert (
        f"note: {log}: 2 conversations with the system prompt of items fr, fr-2 and no 'item': "
        "scored as 'fr' (give lines an 'item', or pass --item, to choose)"
    ) in stderr.splitlines()
    logged = pd.read_csv(folder / "out" / "logged_conversations.csv")
    assert set(logged["item"]) == {"fr"} and set(logged.matched_by) == {"shared system"}
    argv = ["score", str(log), "--suite", "suite.yaml", "--out", "out2", "--item", "fr-2"]
    code, _, stderr = run_cli(argv)
    assert code == 0 and "note:" not in stderr, stderr
    assert set(pd.read_csv(folder / "out2" / "turns.csv")["item"]) == {"fr-2"}


@pytest.fixture
def scored(folder, run_cli, monkeypatch):
    monkeypatch.setattr("harness.units.plan.load_tokenizer", lambda name: CharTokenizer())
    log = _write(
        folder / "talks.jsonl",
        # matched by its system message: French, French, then English
        {"id": "c-fr", "messages": _talk(FR_SYSTEM, FRENCH * 2, FRENCH, ENGLISH * 2)},
        # matched by `item` (and a bare list, no id: named <stem>:<line>)
        {"item": "en", "messages": _talk(None, ENGLISH, "Sorry, " + ENGLISH, user="Hi")},
        # no item, no known system: --item brief; a trailing user message is not scored
        [_msg("user", "Salut"), _msg("assistant", ENGLISH), _msg("user", "Encore ?")],
    )
    argv = ["score", str(log), "--suite", "suite.yaml", "--out", "out", "--item", "brief"]
    argv += ["--window", "64"]
    code, stdout, stderr = run_cli(argv)
    assert code == 0, stderr
    assert "3 logged conversations scored" in stderr
    return folder / "out", stdout


def test_every_reply_of_every_logged_conversation_is_in_turns_csv(scored):
    out, stdout = scored
    names = ("windows.csv", "adherence.csv", "turns.csv", "turn_adherence.csv",
             "conversations.csv", "report.html")  # fmt: skip
    assert all(f"out/{name}" in stdout.splitlines() for name in names), stdout
    turns = pd.read_csv(out / "turns.csv", keep_default_na=False)
    got = [(r.item, r.conversation_id, r.turn, r.check, str(r.passed)) for r in turns.itertuples()]
    assert got == [
        ("brief", "talks:3", 1, "language:fr", "False"),
        ("en", "talks:2", 1, "language:en", "True"),
        ("en", "talks:2", 1, "regex_must_not:sorry", "True"),
        ("en", "talks:2", 2, "language:en", "True"),
        ("en", "talks:2", 2, "regex_must_not:sorry", "False"),
        ("fr", "c-fr", 1, "language:fr", "True"),
        ("fr", "c-fr", 2, "language:fr", "True"),
        ("fr", "c-fr", 3, "language:fr", "False"),
    ]
    assert set(turns.history) == {"logged"} and set(turns.policy) == {"logged"}
    # run_id: the score's id (the hash of the log and the settings), as in manifest.json
    run_id = json.loads((out / "manifest.json").read_text())["run_id"]
    assert re.fullmatch("[0-9a-f]{12}", run_id) and set(turns.run_id) == {run_id}
    assert not turns.pressure.any()
    fr = turns[turns.conversation_id == "c-fr"]
    assert fr.tokens.tolist() == [len(FRENCH) * 2, len(FRENCH), len(ENGLISH) * 2]
    # the user turn and the chat markup sit between the replies: t counts them
    assert (
        fr.t_start.tolist()[0] == 1 and (fr.t_start.diff().dropna() > fr.tokens[:-1].values).all()
    )


def test_windows_are_cut_per_reply_and_the_turn_files_aggregate_conversations(scored):
    out, _ = scored
    turns = pd.read_csv(out / "turns.csv", keep_default_na=False)
    windows = pd.read_csv(out / "windows.csv")
    spans = turns.groupby(["item", "sample", "turn"])[["t_start", "t_end"]].first()
    inner = windows[windows.window >= 0]
    replies = (2 * len(FRENCH), len(FRENCH), 2 * len(ENGLISH))
    assert len(inner[inner.item == "fr"]) == sum(-(-n // 64) for n in replies)
    for w in inner.itertuples():  # a window never spans a user turn
        mine = spans.loc[(w.item, w.sample)]
        assert ((mine.t_start <= w.t_start) & (w.t_end <= mine.t_end)).any(), w
    curve = pd.read_csv(out / "turn_adherence.csv")
    fr = curve[curve["item"] == "fr"]
    assert fr.turn.tolist() == [1, 2, 3] and fr.a.tolist() == [1.0, 1.0, 0.0]
    assert set(curve.history) == {"logged"}
    summary = pd.read_csv(out / "conversations.csv")
    row = summary[summary["item"] == "fr"].iloc[0]
    assert (row.n_samples, row.n_turns, row.first_fail_median) == (1, 3, 3)
    assert row.tokens_generated == 3 * len(FRENCH) + 2 * len(ENGLISH)
    page = (out / "report.html").read_text()
    assert 'id="turns"' in page and "fig-turn-adherence" in page  # the report of a log


def test_a_tool_calling_log_scores_its_text_replies_and_counts_the_rest(
    folder, run_cli, monkeypatch
):
    """Content parts, a tool call with `content: null`, its `tool` result, the older
    `function_call` / `function` pair: the text replies are in turns.csv, the tool-only
    messages are not scored and are counted (logged_conversations.csv and manifest.json),
    the line's metadata and tags are kept."""
    monkeypatch.setattr("harness.units.plan.load_tokenizer", lambda name: CharTokenizer())
    call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
        ],
    }
    old_call = {
        "role": "assistant",
        "content": None,
        "function_call": {"name": "stock", "arguments": '{"sku": 4}'},
    }
    parts = [{"type": "text", "text": FRENCH}, {"type": "image_url", "image_url": {"url": "u"}}]
    talk = [
        _msg("system", FR_SYSTEM),
        _msg("user", "Bonjour"),
        call,
        {"role": "tool", "tool_call_id": "c1", "content": '{"ok": true}'},
        {"role": "assistant", "content": parts},
        _msg("user", "Et le stock ?"),
        old_call,
        {"role": "function", "name": "stock", "content": "3"},
        _msg("assistant", ENGLISH),
    ]
    line = {"id": "agent-1", "metadata": {"channel": "web"}, "tags": ["beta"], "messages": talk}
    log = _write(folder / "agent.jsonl", line)
    code, stdout, stderr = run_cli(["score", str(log), "--suite", "suite.yaml", "--out", "out"])
    assert code == 0, stderr
    turns = pd.read_csv(folder / "out" / "turns.csv")
    got = [(r.conversation_id, r.turn, r.tokens, bool(r.passed)) for r in turns.itertuples()]
    assert got == [("agent-1", 1, len(FRENCH), True), ("agent-1", 2, len(ENGLISH), False)]
    # the tool traffic is in the history: turn 2's reply starts after it
    assert turns.t_start.iloc[1] > turns.t_end.iloc[0] + len("Et le stock ?[tool call stock(")
    (row,) = pd.read_csv(folder / "out" / "logged_conversations.csv").itertuples()
    assert (row.turns, row.scored_turns, row.failed_turns, row.first_failed_turn) == (2, 2, 1, 2)
    assert (row.tool_calls, row.tool_results, row.tool_only_messages, row.skipped_parts) == (
        2, 2, 2, 1)  # fmt: skip
    assert row.first_failed_check == "language:fr" and row.where == f"{log}:1"
    assert json.loads(row.metadata) == {"channel": "web"} and json.loads(row.tags) == ["beta"]
    manifest = json.loads((folder / "out" / "manifest.json").read_text())
    assert manifest["counts"] == {
        "conversations": 1, "turns": 2, "scored_turns": 2, "failed_turns": 1, "tool_calls": 2,
        "tool_results": 2, "tool_only_messages": 2, "skipped_parts": 1,
    }  # fmt: skip


def test_every_file_harness_score_writes_is_declared_by_a_log_stage(scored):
    """`harness score` on a chat log is LOG_STAGES over a plan: each stage declares what it
    reads and writes (row models, in docs/results.md), in order, and writes nothing else."""
    from harness.results import RESULT_FILES
    from harness.stages.base import check_order
    from harness.stages.logs import LOG_STAGES

    check_order(LOG_STAGES)
    _, stdout = scored
    # (a Product with no file, the chunks' digests, stays in the context)
    declared = [a.file for stage in LOG_STAGES for a in stage.writes if a.file]
    gated = {"gates.csv", "junit.xml"}  # the gates stage's, where gates are given (none here)
    assert gated <= set(declared)
    written = sorted(line.removeprefix("out/") for line in stdout.splitlines())
    assert written == sorted(set(declared) - gated)
    csvs = [name for name in declared if name.endswith(".csv")]
    assert all(name in RESULT_FILES for name in csvs) and "logged_conversations.csv" in csvs
    docs = (Path(__file__).parents[2] / "docs" / "results.md").read_text()
    assert all(f"## {name}" in docs for name in csvs)


def test_the_score_run_id_is_the_hash_of_the_file_and_the_settings(tmp_path):
    from harness.config.run import ScoringConfig, TaskSuite
    from harness.scoring.inputs import score_run_id

    log = tmp_path / "talks.jsonl"
    log.write_text('{"item": "fr", "text": "Bonjour."}\n')
    checks = [{"type": "regex_must", "pattern": "o"}]
    item = {"id": "fr", "system": "French.", "user": "Hi.", "reminder": "French.",
            "restatement": "Voici :", "checks": checks}  # fmt: skip
    suites = [TaskSuite.model_validate({"suite": "s", "items": [item]})]
    first = score_run_id(log, suites, ScoringConfig(), model="m")
    assert re.fullmatch("[0-9a-f]{12}", first)
    assert score_run_id(log, suites, ScoringConfig(), model="m") == first
    assert score_run_id(log, suites, ScoringConfig(window=8), model="m") != first
    assert score_run_id(log, suites, ScoringConfig(), model="other") != first
    renamed = tmp_path / "other-name.jsonl"
    renamed.write_bytes(log.read_bytes())
    assert score_run_id(renamed, suites, ScoringConfig(), model="m") == first  # not the stem
    log.write_text('{"item": "fr", "text": "Bonsoir."}\n')
    assert score_run_id(log, suites, ScoringConfig(), model="m") != first


def test_a_log_scored_a_conversation_at_a_time_writes_the_same_bytes(folder, run_cli, monkeypatch):
    """Chunks of one conversation, items interleaved, their digests folded two at a time
    (`logged.FOLD`): every CSV the same bytes as the log scored in one chunk."""
    from functools import partial

    from harness.scoring import logged

    monkeypatch.setattr("harness.units.plan.load_tokenizer", lambda name: CharTokenizer())
    replies = [FRENCH * 2, ENGLISH, FRENCH + ENGLISH, FRENCH, ENGLISH * 3]
    lines = [
        {"messages": _talk((FR_SYSTEM, EN_SYSTEM)[i % 2], *replies[i % 3 : i % 3 + 1 + i % 4])}
        for i in range(11)
    ]
    log = _write(folder / "talks.jsonl", *lines)
    argv = ["score", str(log), "--suite", "suite.yaml", "--window", "48", "--out"]
    assert run_cli([*argv, "whole"])[0] == 0
    monkeypatch.setattr(logged, "FOLD", 2)
    monkeypatch.setattr("harness.stages.logs.score_logged", partial(logged.score_logged, chunk=1))
    assert run_cli([*argv, "chunked"])[0] == 0
    names = sorted(p.name for p in (folder / "whole").glob("*.csv"))
    assert len(names) == 10
    for name in names:
        assert (folder / "chunked" / name).read_bytes() == (folder / "whole" / name).read_bytes()
