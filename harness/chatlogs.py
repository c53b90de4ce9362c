"""Logged conversations in the OpenAI chat format, read one JSON line at a time.

A line is one conversation: `{"messages": [{"role", "content"}, ...], "id"?, "item"?}` or a
bare list of messages. Roles: an optional `system` message first, then `user` and
`assistant` alternating, starting with `user`; at least one assistant turn; a trailing user
message (asked, not yet answered) is allowed. `developer` (OpenAI's newer name for the system
role) is read as `system`. Keys besides these are ignored, on the line (`model`, `metadata`,
...) and on a message (`name`, `refusal`, `annotations`, ...): production exports carry them
and they do not change what the turns say. Content must be a string: a multi-part content list
or the null content of a tool call is refused, as are the `tool` and `function` roles (the
harness scores what the assistant wrote, not tool traffic).

The file is never read whole: `read_chat_logs` yields conversations as it parses them, so a
caller holding one at a time stays flat in memory however long the log. Every problem is one
`UserError` "<file>:<line>: <problem>"; `validate_chat_logs` runs the whole file through the
same checks first, so a command can refuse bad input before it writes anything.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from harness.errors import UserError
from harness.userfiles import user_text_lines

ROLES = ("system", "user", "assistant")
# Read as another role: OpenAI renamed the system role `developer` for its reasoning models.
_ROLE_ALIASES = {"developer": "system"}


class LoggedMessage(BaseModel):
    model_config = ConfigDict(frozen=True)

    role: Literal["system", "user", "assistant"]
    content: str


class LoggedConversation(BaseModel):
    """One line of a chat log: its messages in order, where it came from, and its id (the
    line's `id`, else "<file stem>:<line>") by which a user finds it in their own logs."""

    model_config = ConfigDict(frozen=True)

    id: str
    item: str | None = None
    path: Path
    line: int
    messages: list[LoggedMessage]

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
        return sum(m.role == "assistant" for m in self.messages)

    def exchanges(self) -> list[tuple[str, str | None]]:
        """(user message, the assistant's reply) per turn, 1-based turn k at index k - 1; the
        reply is None for a trailing user message."""
        talk = self.messages[1:] if self.system is not None else self.messages
        users = [m.content for m in talk[0::2]]
        replies: list[str | None] = [m.content for m in talk[1::2]]
        return list(zip(users, replies + [None] * (len(users) - len(replies)), strict=True))


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
        raise UserError(f"{path}:{number}: not valid JSON ({exc.msg})") from None
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


def _messages(where: str, raw: Any) -> list[LoggedMessage]:
    if not isinstance(raw, list) or not raw:
        raise UserError(f"{where}: 'messages' must be a non-empty list")
    messages = [_message(where, k, m) for k, m in enumerate(raw, start=1)]
    _check_order(where, messages)
    return messages


def _message(where: str, k: int, raw: Any) -> LoggedMessage:
    if not isinstance(raw, dict):
        raise UserError(f"{where}: message {k} is not an object with 'role' and 'content'")
    role = raw.get("role")
    role = _ROLE_ALIASES.get(role, role) if isinstance(role, str) else role
    if role not in ROLES:
        raise UserError(
            f"{where}: message {k} has unknown role {json.dumps(raw.get('role'))} "
            f"(roles: {', '.join(ROLES)})"
        )
    content = raw.get("content")
    if not isinstance(content, str):
        got = "missing" if "content" not in raw else f"a {_json_type(content)}"
        raise UserError(f"{where}: message {k} ({role}): content must be a string, got {got}")
    return LoggedMessage(role=role, content=content)


def _json_type(value: Any) -> str:
    names = {list: "list", dict: "object", type(None): "null", bool: "boolean"}
    return names.get(type(value), "number" if isinstance(value, int | float) else "value")


def _check_order(where: str, messages: list[LoggedMessage]) -> None:
    """System only first; then user, assistant, user, ... starting with user."""
    start = 1 if messages[0].role == "system" else 0
    for k, message in enumerate(messages[start:], start=start):
        expected = "user" if (k - start) % 2 == 0 else "assistant"
        if message.role != expected:
            after = f" after '{messages[k - 1].role}'" if k else ""
            place = " (a system message must be the first)" if message.role == "system" else ""
            raise UserError(
                f"{where}: roles out of order: message {k + 1} is '{message.role}'{after}, "
                f"expected '{expected}'{place}"
            )
    if not any(m.role == "assistant" for m in messages):
        raise UserError(f"{where}: no assistant turn to score")
