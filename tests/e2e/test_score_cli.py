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


FR_SYSTEM = (
    "Tu es un conteur. Réponds toujours et uniquement en français, quelle que soit la langue "
    "de l'utilisateur."
)
GERMAN = (
    "Der junge Uhrmacher arbeitete jede Nacht in seiner kleinen Werkstatt am Rande des Dorfes, "
    "und die Nachbarn wunderten sich über die seltsamen Geräusche aus dem Keller. "
)


def _turns(system, replies):
    head = [{"role": "system", "content": system}] if system else []
    talk = [
        m
        for k, reply in enumerate(replies, start=1)
        for m in ({"role": "user", "content": f"Continue the story, part {k}."},
                  {"role": "assistant", "content": reply})
    ]  # fmt: skip
    return head + talk


@pytest.fixture(scope="module")
def logged(tmp_path_factory):
    """A chat log with known languages per reply, scored with the embedded model's tokenizer
    and chat template."""
    folder = tmp_path_factory.mktemp("logged")
    logs = folder / "chats.jsonl"
    _write_jsonl(
        logs,
        [
            # matched by its system message: French, French, then an English turn
            {"id": "ticket-7", "messages": _turns(FR_SYSTEM, [FRENCH * 2, FRENCH, ENGLISH * 2])},
            # matched by `item`, a bare list would do too: German, then English
            {"item": "lang-de-story", "messages": _turns(None, [GERMAN * 2, ENGLISH * 2])},
        ],
    )
    out = folder / "out"
    result = _harness(
        "score", str(logs), "--suite", str(TASKS / "languages.yaml"), "--out", str(out),
        cwd=folder,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return out


def test_logged_conversations_are_scored_turn_by_turn(logged):
    turns = pd.read_csv(logged / "turns.csv")
    got = [(r.conversation_id, r.turn, r.check, bool(r.passed)) for r in turns.itertuples()]
    assert got == [
        ("chats:2", 1, "language:de", True),
        ("chats:2", 2, "language:de", False),
        ("ticket-7", 1, "language:fr", True),
        ("ticket-7", 2, "language:fr", True),
        ("ticket-7", 3, "language:fr", False),
    ]
    assert set(turns.history) == {"logged"} and set(turns.policy) == {"logged"}
    assert set(turns["item"]) == {"lang-fr-story", "lang-de-story"}
    # each reply is tokenised alone and the template's markup + the user turn sit between
    fr = turns[turns.conversation_id == "ticket-7"]
    assert (fr.t_start.iloc[1:].values > fr.t_end.iloc[:-1].values + 1).all()
    windows = pd.read_csv(logged / "windows.csv")
    last = windows[(windows["item"] == "lang-fr-story") & (windows.t_start >= fr.t_start.iloc[2])]
    decided = last[last.passed.notna()]  # the English reply's windows (a short tail: undecided)
    assert len(decided) >= 1 and not decided.passed.astype(bool).any()
    curve = pd.read_csv(logged / "turn_adherence.csv")
    assert curve[curve["item"] == "lang-fr-story"].a.tolist() == [1.0, 1.0, 0.0]
    assert 'id="failing"' in (logged / "report.html").read_text()  # the report of a log


def test_the_lean_tokenizer_is_autotokenizer_s(embedded_model_path):
    from transformers import AutoTokenizer

    from harness.scoring.io import tokenizer_at

    auto, lean = (
        AutoTokenizer.from_pretrained(embedded_model_path),
        tokenizer_at(embedded_model_path),
    )
    assert type(auto) is type(lean)
    chat = _turns(FR_SYSTEM, [FRENCH, GERMAN + "<|im_end|>"])
    for text in (FRENCH, GERMAN, ENGLISH, "  spaces\n\n\ttabs <|im_end|> 日本語"):
        assert auto(text, return_offsets_mapping=True) == lean(text, return_offsets_mapping=True)
    rendered = auto.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
    assert rendered == lean.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
    ids = auto(rendered)["input_ids"]
    assert auto.decode(ids, skip_special_tokens=True) == lean.decode(ids, skip_special_tokens=True)
    assert (auto.eos_token_id, auto.bos_token) == (lean.eos_token_id, lean.bos_token)


def test_a_tool_calling_log_is_scored_with_the_embedded_model_s_template(tmp_path):
    """An agent's log as the API writes it: content parts, a tool call with `content: null`,
    its `tool` result, then the text reply. The text replies are in turns.csv, the tool-call
    message is not scored and is counted, and the report lists the failing turn."""
    call = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "find_story", "arguments": '{"topic": "phare"}'}}]}  # fmt: skip
    talk = [
        {"role": "system", "content": FR_SYSTEM},
        {"role": "user", "content": [{"type": "text", "text": "Raconte une histoire."}]},
        call,
        {"role": "tool", "tool_call_id": "call_1", "content": '{"story": "le phare"}'},
        {"role": "assistant", "content": [{"type": "text", "text": FRENCH * 2}]},
        {"role": "user", "content": "Continue, please."},
        {"role": "assistant", "content": ENGLISH * 2},
    ]
    logs = tmp_path / "agent.jsonl"
    _write_jsonl(logs, [{"id": "agent-1", "metadata": {"channel": "web"}, "messages": talk}])
    out = tmp_path / "out"
    result = _harness(
        "score", str(logs), "--suite", str(TASKS / "languages.yaml"), "--out", str(out),
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    turns = pd.read_csv(out / "turns.csv")
    got = [(r.conversation_id, r.turn, r.check, bool(r.passed)) for r in turns.itertuples()]
    assert got == [("agent-1", 1, "language:fr", True), ("agent-1", 2, "language:fr", False)]
    logged = pd.read_csv(out / "logged_conversations.csv")
    assert logged[["tool_calls", "tool_results", "tool_only_messages"]].values.tolist() == [
        [1, 1, 1]
    ]
    page = (out / "report.html").read_text()
    assert "Conversations that fail first" in page and "agent-1" in page
    assert "Then the story went on in English" in page and "is not in this run folder" not in page
