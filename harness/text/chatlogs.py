"""Logged conversations in the OpenAI chat format, read one JSON line at a time.

A line is one conversation: `{"messages": [...], "id"?, "item"?, "metadata"?, "tags"?}` or a
bare list of messages, in every shape the Chat Completions API writes them:

- content a string, or a list of parts: the `text` parts are joined by a newline, any other
  part (`image_url`, `input_audio`, `file`, ...) is skipped and counted (`skipped_parts`);
  an assistant `refusal` part is the assistant's words and counts as text;
- an assistant message with `tool_calls` (or the older `function_call`) and `content: null`,
  then `tool` messages (or the older `function` messages) with the results;
- `developer` (OpenAI's newer name for the system role) is read as `system`.

Order: an optional system message first, then turns. **A turn** is a user message and every
message up to the next user message; its scored reply is the assistant text of that turn (the
text of its assistant messages, joined by a blank line). A turn whose assistant messages only
call tools has no reply: it is not scored, and counted. A trailing user message (asked, not
yet answered) is allowed. Tool calls and results stay in the history, rendered as text into
the user side of the turn (`tool_text`), since a chat template that renders `tool` messages
is the exception among the models this harness runs (docs/architecture.md, "Logged
conversations"). The line's own `metadata` (an object) and `tags` (a list of strings) are kept
for the report. Keys besides these are ignored (`model`, `usage`, a message's `name`,
`annotations`, ...).

The file is never read whole: `read_chat_logs` yields conversations as it parses them, so a
caller holding one at a time stays flat in memory however long the log. Every problem is one
`UserError` "<file>:<line>: <problem>"; `validate_chat_logs` runs the whole file through the
same checks first, so a command can refuse bad input before it writes anything.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from functools import cached_property
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from harness.errors import UserError
from harness.text.chatmessages import LoggedMessage, ToolCall, check_order, json_type, parse_message
from harness.userfiles import json_line_error, user_text_lines

__all__ = ["LoggedConversation", "LoggedMessage", "LoggedTurn", "ToolCall", "read_chat_logs"]


class LoggedTurn(BaseModel):
    """Turn `turn` (the `turn`-th user message) with what followed it up to the next one."""

    model_config = ConfigDict(frozen=True)

    turn: int
    user: str
    reply: str | None
    """the turn's assistant text; None when the assistant only called tools, or said nothing"""
    tools: tuple[LoggedMessage, ...] = ()
    """the turn's tool traffic in order: assistant messages with tool calls, tool results"""


class LogCounts(BaseModel):
    """What a usable line holds that is not scored (conversations.csv and the manifest)."""

    turns: int = 0
    scored_turns: int = 0
    tool_calls: int = 0
    tool_results: int = 0
    tool_only_messages: int = 0
    """assistant messages with tool calls and no text: not scored"""
    skipped_parts: int = 0


class LoggedConversation(BaseModel):
    """One line of a chat log: its messages in order, where it came from, and its id (the
    line's `id`, else "<file stem>:<line>") by which a user finds it in their own logs."""

    model_config = ConfigDict(frozen=True)

    id: str
    item: str | None = None
    path: Path
    line: int
    messages: list[LoggedMessage]
    metadata: dict[str, Any] = {}
    tags: tuple[str, ...] = ()

    @property
    def where(self) -> str:
        """`<file>:<line>`, the prefix of every message about this conversation."""
        return f"{self.path}:{self.line}"

    @property
    def system(self) -> str | None:
        first = self.messages[0]
        return first.content if first.role == "system" else None

    @property
    def assistant_turns(self) -> int:
        """Turns with a reply to score."""
        return sum(turn.reply is not None for turn in self.turns())

    def turns(self) -> list[LoggedTurn]:
        """Every turn in order (see the module docstring)."""
        return self._turns

    @cached_property  # the scorer asks for them three times per conversation
    def _turns(self) -> list[LoggedTurn]:
        out: list[LoggedTurn] = []
        talk = self.messages[1:] if self.system is not None else self.messages
        user, texts, tools = None, [], []
        for message in [*talk, None]:  # None closes the last turn
            if message is None or message.role == "user":
                if user is not None:
                    reply = "\n\n".join(texts) if texts else None
                    out.append(LoggedTurn(turn=len(out) + 1, user=user, reply=reply,
                                          tools=tuple(tools)))  # fmt: skip
                user, texts, tools = (message.content if message else None), [], []
                continue
            if message.role == "assistant" and (message.content or not message.tool_calls):
                texts.append(message.content)
            if message.role == "tool" or message.tool_calls:
                tools.append(message)
        return out

    def exchanges(self) -> list[tuple[str, str | None]]:
        """(what the model read as user turn k, its reply) per turn with a reply, and a trailing
        unanswered user turn as (text, None): a turn's tool traffic is written after its user
        message (`tool_text`), and a turn without a reply is joined to the next user message,
        since a chat template alternates user and assistant. Turn numbers: `scored_turns`."""
        return [(user, reply) for _, user, reply in self.scored_turns()]

    def scored_turns(self) -> list[tuple[int, str, str | None]]:
        """(turn number, user text as the model read it, reply): see `exchanges`."""
        out, pending = [], []
        for turn in self.turns():
            pending.append(turn_text(turn))
            if turn.reply is not None:
                out.append((turn.turn, "\n\n".join(pending), turn.reply))
                pending = []
        if pending:
            out.append((self.turns()[-1].turn, "\n\n".join(pending), None))
        return out

    def counts(self) -> LogCounts:
        turns = self.turns()
        tools = [m for t in turns for m in t.tools]
        return LogCounts(
            turns=len(turns),
            scored_turns=sum(t.reply is not None for t in turns),
            tool_calls=sum(len(m.tool_calls) for m in tools),
            tool_results=sum(m.role == "tool" for m in tools),
            tool_only_messages=sum(m.role == "assistant" and not m.content for m in tools),
            skipped_parts=sum(m.skipped_parts for m in self.messages),
        )


def tool_text(message: LoggedMessage) -> str:
    """A tool call or result as the text a replay and the scorer put in the history."""
    if message.role == "tool":
        return f"[tool result {message.name or message.tool_call_id or ''}: {message.content}]"
    return "\n".join(f"[tool call {call.name}({call.arguments})]" for call in message.tool_calls)


def turn_text(turn: LoggedTurn) -> str:
    """The user message, then the turn's tool traffic as text (nothing added without any)."""
    return "\n\n".join([turn.user, *(tool_text(m) for m in turn.tools)])


def is_chat_log(path: Path) -> bool:
    """Does the file's first non-blank line look like a chat log (a list, or an object with
    `messages`) rather than a generation record or an {item, text} line?"""
    if not Path(path).is_file():
        return False
    for _number, line in user_text_lines(path):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError:
            return False  # the records reader names the line
        return isinstance(data, list) or (isinstance(data, dict) and "messages" in data)
    return False


def read_chat_logs(path: Path) -> Iterator[LoggedConversation]:
    """Each non-blank line's conversation, in file order, parsed as it is read."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: file not found")
    for number, line in user_text_lines(path):
        if line.strip():
            yield _conversation(path, number, line)


def read_chat_lines(path: Path, numbers: set[int]) -> dict[int, LoggedConversation]:
    """The conversations on the given line numbers (the report's few shown ones), parsed as
    `read_chat_logs` does; the other lines are skipped unparsed."""
    path, found = Path(path), {}
    for number, line in user_text_lines(path):
        if number in numbers:
            found[number] = _conversation(path, number, line)
            if len(found) == len(numbers):
                break
    return found


def validate_chat_logs(
    path: Path,
    check: Callable[[LoggedConversation], None] | None = None,
    conversations: Iterable[LoggedConversation] | None = None,
) -> int:
    """Parse every line (and pass each conversation to `check`, which raises UserError on a
    problem, e.g. one that matches no item) without keeping any; returns how many there are.
    A file with none is an error. `conversations`: the file's, read by another reader (another
    tool's log, `harness.interop`)."""
    count = 0
    for conversation in read_chat_logs(path) if conversations is None else conversations:
        if check is not None:
            check(conversation)
        count += 1
    if not count:
        raise UserError(f"{path}: no conversations")
    return count


def _conversation(path: Path, number: int, line: str) -> LoggedConversation:
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        raise json_line_error(path, number, line, exc) from None
    return conversation_from(path, number, data)


def conversation_from(path: Path, number: int, data: Any) -> LoggedConversation:
    """One conversation from a parsed line (or a converted record of another tool's log,
    `harness.interop`: `number` is then its position there), checked as a line is."""
    where = f"{path}:{number}"
    if isinstance(data, list):
        data = {"messages": data}
    if not isinstance(data, dict):
        raise UserError(
            f"{where}: expected a JSON object with 'messages' or a list of messages, "
            f"got {type(data).__name__}"
        )
    if "messages" not in data:
        raise UserError(f"{where}: no 'messages' (a chat log line is {{\"messages\": [...]}})")
    messages = _messages(where, data["messages"])
    return LoggedConversation(
        id=_id(where, data.get("id"), f"{path.stem}:{number}"),
        item=_item(where, data.get("item")),
        path=path,
        line=number,
        messages=messages,
        metadata=_metadata(where, data.get("metadata")),
        tags=_tags(where, data.get("tags")),
    )


def _id(where: str, value: Any, default: str) -> str:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise UserError(f"{where}: 'id' must be a string or an integer")
    text = str(value)
    if not text.strip():
        raise UserError(f"{where}: 'id' is empty")
    return text


def _item(where: str, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise UserError(f"{where}: 'item' must be a non-empty string (a task item's id)")
    return value


def _metadata(where: str, value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise UserError(f"{where}: 'metadata' must be an object, got a {json_type(value)}")
    return value


def _tags(where: str, value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(tag, str) for tag in value):
        raise UserError(f"{where}: 'tags' must be a list of strings")
    return tuple(value)


def _messages(where: str, raw: Any) -> list[LoggedMessage]:
    if not isinstance(raw, list) or not raw:
        raise UserError(f"{where}: 'messages' must be a non-empty list")
    messages = [parse_message(f"{where}: message {k}", m) for k, m in enumerate(raw, start=1)]
    check_order(where, messages)
    return messages
