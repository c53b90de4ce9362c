"""The chat-log reader: OpenAI-format lines in, one conversation per line, every problem one
`file:line: problem` error; read streaming, so a file is never held whole."""

from __future__ import annotations

import json
import tracemalloc

import pytest

from harness.errors import UserError
from harness.text.chatlogs import is_chat_log, read_chat_logs, validate_chat_logs

S = {"role": "system", "content": "Réponds en français."}
U1, A1 = {"role": "user", "content": "Bonjour"}, {"role": "assistant", "content": "Salut !"}
U2, A2 = {"role": "user", "content": "Et alors ?"}, {"role": "assistant", "content": "Rien."}
CALL = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {"id": "c1", "type": "function",
         "function": {"name": "weather", "arguments": '{"city": "Paris"}'}},
    ],
}  # fmt: skip
RESULT = {"role": "tool", "tool_call_id": "c1", "content": '{"temp": 12}'}


def _log(tmp_path, *lines) -> object:
    path = tmp_path / "talks.jsonl"
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))
    return path


def test_objects_and_bare_lists_with_ids_items_and_extra_keys(tmp_path):
    path = _log(
        tmp_path,
        {"id": "c-17", "item": "fr", "messages": [S, U1, A1, U2, A2], "model": "gpt-x"},
        "",
        [U1, {**A1, "name": "bot", "refusal": None}, U2],  # extra message keys are ignored
        {"id": 42, "messages": [{"role": "developer", "content": "Be brief."}, U1, A1]},
    )
    first, bare, numbered = read_chat_logs(path)
    assert (first.id, first.item, first.line, first.system) == ("c-17", "fr", 1, S["content"])
    assert first.assistant_turns == 2
    assert first.exchanges() == [("Bonjour", "Salut !"), ("Et alors ?", "Rien.")]
    assert (bare.id, bare.item, bare.line, bare.system) == ("talks:3", None, 3, None)
    assert bare.exchanges() == [("Bonjour", "Salut !"), ("Et alors ?", None)]  # trailing user
    assert [m.model_dump(include={"role", "content"}) for m in bare.messages][1] == A1
    assert (numbered.id, numbered.system) == ("42", "Be brief.")  # developer = system
    assert first.where == f"{path}:1"
    assert is_chat_log(path) and validate_chat_logs(path) == 3


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ('{"messages": [', "not valid JSON"),
        ('"just text"', "expected a JSON object with 'messages' or a list of messages, got str"),
        ({"item": "fr", "text": "hi"}, "no 'messages'"),
        ({"messages": []}, "'messages' must be a non-empty list"),
        ({"messages": [S, U1]}, "no assistant turn to score"),
        ({"messages": [A1, U1]}, "roles out of order: message 1 is 'assistant', expected 'user'"),
        (
            {"messages": [U1, U2, A1]},
            "roles out of order: message 2 is 'user' after 'user', expected 'assistant'",
        ),
        (
            {"messages": [U1, A1, S, U2, A2]},
            "message 3 is 'system' after 'assistant', expected 'user' (a system message must",
        ),
        ({"messages": [U1, {"role": "robot", "content": "{}"}]}, 'message 2 has unknown role "ro'),
        ({"messages": [U1, {"content": "x"}]}, "message 2 has unknown role null"),
        (
            {"messages": [U1, {"role": "assistant", "content": None}]},
            "message 2 (assistant): content must be a string or a list of parts (null only "
            "with 'tool_calls'), got a null",
        ),
        (
            {"messages": [{"role": "user", "content": None}, A1]},
            "message 1 (user): content must be a string or a list of parts, got a null",
        ),
        ({"messages": [U1, {"role": "assistant"}]}, "content must be a string or a list of parts"),
        (
            {"messages": [{"role": "user", "content": ["hi"]}, A1]},
            "message 1 (user): content part 1 is not an object with a 'type'",
        ),
        (
            {"messages": [{"role": "user", "content": [{"type": "text", "text": 3}]}, A1]},
            "message 1 (user): content part 1 (text) has no string 'text'",
        ),
        ({"messages": [U1, "hello"]}, "message 2 is not an object with 'role' and 'content'"),
        (
            {"messages": [U1, {"role": "tool", "tool_call_id": "c1", "content": "{}"}, A1]},
            "message 2 is a tool result with no tool call before it in its turn",
        ),
        (
            {"messages": [U1, CALL, {"role": "tool", "content": "{}"}, A1]},
            "message 3 (tool): a tool result needs 'tool_call_id' (or the older 'name')",
        ),
        (
            {"messages": [U1, {"role": "assistant", "content": None, "tool_calls": [{"id": "c"}]}]},
            "message 2 (assistant): tool call 1 has no 'function' with a string 'name'",
        ),
        (
            {"messages": [U1, {"role": "assistant", "content": None, "tool_calls": {}}]},
            "message 2 (assistant): 'tool_calls' must be a list",
        ),
        (
            {"messages": [U1, CALL, RESULT]},
            "no assistant turn to score (its assistant messages only call tools)",
        ),
        ({"metadata": ["a"], "messages": [U1, A1]}, "'metadata' must be an object, got a list"),
        ({"tags": "vip", "messages": [U1, A1]}, "'tags' must be a list of strings"),
        ({"id": ["x"], "messages": [U1, A1]}, "'id' must be a string or an integer"),
        ({"item": "", "messages": [U1, A1]}, "'item' must be a non-empty string"),
    ],
)
def test_each_bad_line_is_one_error_naming_file_and_line(tmp_path, line, problem):
    path = _log(tmp_path, [U1, A1], line)
    with pytest.raises(UserError) as err:
        validate_chat_logs(path)
    message = str(err.value)
    assert message.startswith(f"{path}:2: ") and problem in message, message
    assert "\n" not in message


def test_empty_file_missing_file_and_record_detection(tmp_path):
    empty = _log(tmp_path, "")
    with pytest.raises(UserError, match="no conversations"):
        validate_chat_logs(empty)
    with pytest.raises(UserError, match="file not found"):
        validate_chat_logs(tmp_path / "absent.jsonl")
    records = tmp_path / "records.jsonl"
    records.write_text(json.dumps({"item": "fr", "text": "Bonjour"}) + "\n")
    assert not is_chat_log(records) and not is_chat_log(empty)


def test_the_check_sees_every_conversation_before_anything_is_kept(tmp_path):
    path = _log(tmp_path, [U1, A1], {"item": "zz", "messages": [U1, A1]})
    seen = []

    def check(conversation):
        seen.append(conversation.line)
        if conversation.item == "zz":
            raise UserError(f"{conversation.where}: conversation matches no item")

    with pytest.raises(UserError, match=r"talks.jsonl:2: conversation matches no item"):
        validate_chat_logs(path, check)
    assert seen == [1, 2]


def test_reading_streams_a_long_log(tmp_path):
    """20,000 conversations of ~1 KiB: the reader's peak allocation stays that of a few lines,
    not the 20 MiB file."""
    talk = [S, *[{"role": r, "content": "mot " * 25} for r in ("user", "assistant") * 5]]
    path = tmp_path / "long.jsonl"
    line = json.dumps({"messages": talk}) + "\n"
    path.write_text(line * 20_000)
    tracemalloc.start()
    count = 0
    for conversation in read_chat_logs(path):
        count += conversation.assistant_turns
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert count == 100_000
    assert path.stat().st_size > 20 * 2**20 and peak < 2 * 2**20, peak


def test_content_parts_are_joined_and_other_parts_counted(tmp_path):
    parts = [
        {"type": "text", "text": "Bonjour"},
        {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
        {"type": "text", "text": "voici la photo"},
        {"type": "input_audio", "input_audio": {"data": "", "format": "wav"}},
    ]
    refusal = {"role": "assistant", "content": [{"type": "refusal", "refusal": "Non."}]}
    path = _log(tmp_path, {"messages": [S, {"role": "user", "content": parts}, refusal]})
    (talk,) = read_chat_logs(path)
    assert talk.exchanges() == [("Bonjour\nvoici la photo", "Non.")]
    counts = talk.counts()
    assert (counts.skipped_parts, counts.turns, counts.scored_turns) == (2, 1, 1)
    null_refusal = {"role": "assistant", "content": None, "refusal": "Je ne peux pas."}
    (talk,) = read_chat_logs(_log(tmp_path, [U1, null_refusal]))
    assert talk.exchanges() == [("Bonjour", "Je ne peux pas.")]


def test_tool_calls_stay_in_the_history_and_a_tool_only_message_is_not_a_reply(tmp_path):
    """Turn 1: a tool call (content null), its result, then the text reply; turn 2: the older
    `function_call` / `function` format, with text beside the call; turn 3 only calls a tool,
    so it is joined to turn 4's user message and not scored."""
    old_call = {"role": "assistant", "content": "Je regarde.",
                "function_call": {"name": "forecast", "arguments": "{}"}}  # fmt: skip
    old_result = {"role": "function", "name": "forecast", "content": "pluie"}
    only_call = {**CALL, "tool_calls": [{**CALL["tool_calls"][0], "id": "c2"}]}
    path = _log(
        tmp_path,
        {"id": "t", "metadata": {"channel": "web", "tier": 2}, "tags": ["vip"],
         "messages": [S, U1, CALL, RESULT, A1, U2, old_call, old_result, A2,
                      {"role": "user", "content": "Et Lyon ?"}, only_call,
                      {"role": "user", "content": "Merci"}, A1]},
    )  # fmt: skip
    (talk,) = read_chat_logs(path)
    turns = talk.turns()
    assert [(t.turn, t.reply) for t in turns] == [
        (1, "Salut !"), (2, "Je regarde.\n\nRien."), (3, None), (4, "Salut !"),
    ]  # fmt: skip
    assert turns[1].tools[0].tool_calls[0].name == "forecast" and turns[1].tools[1].role == "tool"
    assert talk.scored_turns() == [
        (1, 'Bonjour\n\n[tool call weather({"city": "Paris"})]\n\n[tool result c1: {"temp": 12}]',
         "Salut !"),
        (2, "Et alors ?\n\n[tool call forecast({})]\n\n[tool result forecast: pluie]",
         "Je regarde.\n\nRien."),
        (4, 'Et Lyon ?\n\n[tool call weather({"city": "Paris"})]\n\nMerci', "Salut !"),
    ]  # fmt: skip
    counts = talk.counts()
    assert counts.model_dump() == {
        "turns": 4, "scored_turns": 3, "tool_calls": 3, "tool_results": 2,
        "tool_only_messages": 2, "skipped_parts": 0,
    }  # fmt: skip
    assert talk.metadata == {"channel": "web", "tier": 2} and talk.tags == ("vip",)
    assert talk.assistant_turns == 3
