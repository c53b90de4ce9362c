"""Other tools' formats: `harness export DIR --format inspect` read back with Inspect's own reader
(samples, scores, metadata, results); `harness score` on an Inspect eval log written by
inspect-ai itself (tests/data/interop/make_inspect_log.py, its offline mock model) and on
OpenTelemetry GenAI spans (semconv 1.37.0); bad files are one `file: problem` line, exit 2.
The one-token-per-character tokenizer stands in for a model's."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from harness.engines.scripted import CharTokenizer
from tests.script_module import load_script

inspect_log = pytest.importorskip("inspect_ai.log")

DATA = Path(__file__).parents[1] / "data"
MOCK_EVAL = DATA / "interop" / "mockllm.eval"  # written by inspect-ai (make_inspect_log.py)
FR_SYSTEM = "Réponds toujours en français, sans virgules."
SUITE = {
    "suite": "support",
    "items": [
        {"id": "fr-support", "system": FR_SYSTEM, "user": "Bonjour",
         "checks": [{"type": "language", "target": "fr"},
                    {"type": "regex_must_not", "pattern": ",", "scope": "response"}]},
    ],
}  # fmt: skip


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("harness.units.plan.load_tokenizer", lambda name: CharTokenizer())
    (tmp_path / "suite.yaml").write_text(yaml.safe_dump(SUITE, allow_unicode=True))
    return tmp_path


def _score(run_cli, log: Path, *extra: str) -> tuple[int, str, str]:
    return run_cli(["score", str(log), "--suite", "suite.yaml", "--out", "out", *extra])


def _build_run(out: Path) -> Path:
    module = load_script(DATA / "report_run" / "make_run.py", "make_run")
    return module.build_run(out)


def test_a_run_exported_as_inspect_log_reads_back_with_inspect(tmp_path, run_cli):
    run = _build_run(tmp_path / "run")
    code, stdout, stderr = run_cli(["export", str(run), "--format", "inspect"])
    assert code == 0, stderr
    path = Path(stdout.strip())
    assert path == run / "inspect" / "harness.eval"
    log = inspect_log.read_eval_log(str(path))
    assert log.status == "success"
    generations = [json.loads(x) for x in (run / "generations.jsonl").read_text().splitlines()]
    assert len(log.samples) == len(generations) == 24  # one sample per generation
    windows = pd.read_csv(run / "windows.csv")
    for sample in log.samples:
        meta = sample.metadata
        mine = windows[(windows["item"] == meta["item"]) & (windows["policy"] == meta["policy"])
                       & (windows["sample"] == meta["sample"])]  # fmt: skip
        assert set(sample.scores) == set(mine["check"])  # one score per check
        assert sample.scores["language"].value == pytest.approx(mine["passed"].mean())
        roles = [m.role for m in sample.messages]
        if meta["policy"] == "none":  # the prompt, then the one reply
            assert roles == ["system", "user", "assistant"]
            assert sample.messages[2].text == sample.output.completion
    # pirate/none/0 fails from window 0: its explanation names that window and its reason
    first = next(s for s in log.samples if s.id == "smollm2-135m-instruct/pirate/none/7/0")
    assert first.scores["language"].value == 0.0
    assert first.scores["language"].explanation.startswith("window 0 failed: <img")
    # periodic policy: the injected reminder is a user message marked as a reminder
    periodic = next(s for s in log.samples if s.metadata["policy"] == "periodic-64-user")
    reminders = [m for m in periodic.messages if (m.metadata or {}).get("source") == "reminder"]
    assert reminders and all(m.role == "user" for m in reminders)
    # results: per check the mean over samples, and per policy
    [score] = log.results.scores
    per_sample = [s.scores["language"].value for s in log.samples]
    assert score.metrics["mean"].value == pytest.approx(sum(per_sample) / len(per_sample))
    assert score.metrics["mean[restate]"].value > score.metrics["mean[none]"].value
    assert {r["policy"] for r in log.results.metadata["adherence"]} == {
        "none", "restate", "periodic-64-user"
    }  # fmt: skip


def test_export_errors_are_one_line(tmp_path, run_cli):
    (tmp_path / "empty").mkdir()
    code, _, stderr = run_cli(["export", str(tmp_path / "empty"), "--format", "inspect"])
    assert code == 2 and "not a run folder" in stderr
    code, _, stderr = run_cli(["export", str(tmp_path), "--format", "csv"])
    assert code == 2 and "--format: 'csv' is not a known format" in stderr


def test_an_inspect_log_written_by_inspect_is_scored_turn_by_turn(folder, run_cli):
    code, _, stderr = _score(run_cli, MOCK_EVAL)  # --format auto: a .eval file
    assert code == 0, stderr
    assert "2 logged conversations scored" in stderr
    turns = pd.read_csv(folder / "out" / "turns.csv")
    language = turns[turns["check"] == "language:fr"].set_index(["conversation_id", "turn"])
    # the mock model answered ticket-1's first turn in English (make_inspect_log.REPLIES[2])
    assert language["passed"].to_dict() == {
        ("ticket-0", 1): True, ("ticket-0", 2): True, ("ticket-1", 1): False,
        ("ticket-1", 2): True,
    }  # fmt: skip
    commas = turns[turns["check"] == "regex_must_not:,"]
    assert not commas.set_index(["conversation_id", "turn"])["passed"][("ticket-1", 1)]


def test_a_scored_log_exported_as_inspect_log_has_one_scored_sample_per_conversation(
    folder, run_cli
):
    assert _score(run_cli, MOCK_EVAL)[0] == 0
    code, stdout, stderr = run_cli(["export", "out", "--format", "inspect", "--out", "x.json"])
    assert code == 0, stderr
    log = inspect_log.read_eval_log(stdout.strip())
    assert [s.id for s in log.samples] == ["ticket-0", "ticket-1"]
    by_id = {s.id: s for s in log.samples}
    # ticket-1: 1 of its 2 turns is French; its first turn explains
    assert by_id["ticket-1"].scores["language:fr"].value == 0.5
    assert by_id["ticket-1"].scores["language:fr"].explanation.startswith("turn 1 failed: found en")
    assert by_id["ticket-0"].scores["language:fr"].value == 1.0
    assert by_id["ticket-0"].metadata["item"] == "fr-support"
    assert [m.role for m in by_id["ticket-0"].messages] == [
        "system", "user", "assistant", "user", "assistant"
    ]  # fmt: skip


def _otlp(*spans: dict) -> dict:
    return {"resourceSpans": [{"resource": {"attributes": []},
                               "scopeSpans": [{"scope": {"name": "openai"}, "spans": list(spans)}]}]}  # fmt: skip  # noqa: E501


def _attr(key: str, value) -> dict:
    if isinstance(value, str):
        return {"key": key, "value": {"stringValue": value}}
    return {"key": key, "value": {"stringValue": json.dumps(value)}}


def _text(role: str, text: str) -> dict:
    return {"role": role, "parts": [{"type": "text", "content": text}]}


FRENCH = "Le colis arrive demain matin chez vous et tout va bien pour la livraison."
ENGLISH = "The parcel arrives tomorrow morning, and everything is fine with the delivery."


def _chat_span(conversation: str, end: int, inputs: list, output: str) -> dict:
    return {
        "traceId": f"trace-{conversation}", "spanId": f"{conversation}-{end}",
        "name": "chat gpt-4o", "endTimeUnixNano": str(end),
        "attributes": [
            _attr("gen_ai.operation.name", "chat"), _attr("gen_ai.request.model", "gpt-4o"),
            _attr("gen_ai.conversation.id", conversation),
            _attr("gen_ai.system_instructions", [{"type": "text", "content": FR_SYSTEM}]),
            _attr("gen_ai.input.messages", inputs),
            _attr("gen_ai.output.messages", [{**_text("assistant", output),
                                              "finish_reason": "stop"}]),
        ],
    }  # fmt: skip


def test_otel_genai_spans_are_scored_as_conversations(folder, run_cli):
    first = [_text("user", "Où est mon colis ?")]
    history = [*first, _text("assistant", FRENCH), _text("user", "Et ensuite ?")]
    spans = [
        _chat_span("conv-a", 1, first, FRENCH),
        _chat_span("conv-a", 2, history, ENGLISH),  # the later call holds the history
        _chat_span("conv-b", 3, first, FRENCH),
        {"traceId": "t", "spanId": "http", "name": "GET /", "attributes": []},  # not GenAI
    ]
    log = folder / "traces.json"
    log.write_text(json.dumps(_otlp(*spans)))
    code, _, stderr = _score(run_cli, log)  # --format auto: resourceSpans
    assert code == 0, stderr
    assert "2 logged conversations scored" in stderr
    turns = pd.read_csv(folder / "out" / "turns.csv")
    language = turns[turns["check"] == "language:fr"].set_index(["conversation_id", "turn"])
    assert language["passed"].to_dict() == {
        ("conv-a", 1): True, ("conv-a", 2): False, ("conv-b", 1): True
    }  # fmt: skip


def test_otel_tool_calls_stay_in_the_history_and_are_not_scored(folder, run_cli):
    call = {
        "role": "assistant",
        "parts": [{"type": "tool_call", "id": "c1", "name": "track", "arguments": {"parcel": 7}}],
    }
    result = {
        "role": "tool",
        "parts": [{"type": "tool_call_response", "id": "c1", "response": {"eta": "demain"}}],
    }
    inputs = [_text("user", "Où est mon colis ?"), call, result]
    log = folder / "traces.jsonl"  # one OTLP request per line, as the Collector writes
    log.write_text(json.dumps(_otlp(_chat_span("conv-t", 1, inputs, FRENCH))) + "\n")
    code, _, stderr = _score(run_cli, log)
    assert code == 0, stderr
    turns = pd.read_csv(folder / "out" / "turns.csv")
    assert turns[turns["check"] == "language:fr"]["passed"].tolist() == [True]
    logged = pd.read_csv(folder / "out" / "logged_conversations.csv")
    assert logged[["tool_calls", "tool_results", "tool_only_messages"]].values.tolist() == [
        [1, 1, 1]
    ]


@pytest.mark.parametrize(
    ("name", "content", "extra", "problem"),
    [
        ("bad.eval", "not a zip", [], "bad.eval: not a readable Inspect eval log"),
        ("t.json", '{"resourceSpans": [], "x": 1}', ["--format", "otel"],
         "t.json: no GenAI chat spans"),
        ("t.jsonl", '{"resourceSpans": []}\n{"resource', ["--format", "otel"],
         "t.jsonl:2: not valid JSON"),
        ("t.json", '{"spans": []}', ["--format", "otel"],
         "t.json: not OTLP/JSON trace data (no 'resourceSpans' list)"),
        ("t.json", json.dumps(_otlp(_chat_span("c", 1, [{"role": "user"}], "x"))),
         [], "a GenAI message must be an object with a 'parts' list"),
        ("t.jsonl", "{}", ["--format", "yaml"], "--format: 'yaml' is not one of"),
    ],
)  # fmt: skip
def test_a_bad_file_of_another_tool_is_one_line_and_exit_2(
    folder, run_cli, name, content, extra, problem
):
    (folder / name).write_text(content)
    code, _, stderr = _score(run_cli, folder / name, *extra)
    assert code == 2
    assert problem in stderr and len(stderr.strip().splitlines()) == 1
    assert not (folder / "out").exists()
