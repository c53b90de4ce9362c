"""One message of a logged conversation in the OpenAI chat format, parsed and checked
(`harness.text.chatlogs` reads the lines; the shapes are listed in its docstring): every problem is
one `UserError` "<where>: <problem>", the caller's `where` naming the file, line and message.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from harness.errors import UserError

ROLES = ("system", "user", "assistant", "tool")
# Read as another role: OpenAI renamed the system role `developer` for its reasoning models;
# `function` is the tool-result role of the API's older function-calling format.
_ROLE_ALIASES = {"developer": "system", "function": "tool"}


class ToolCall(BaseModel):
    """One call an assistant message asks for (`tool_calls[i].function`, or `function_call`)."""

    model_config = ConfigDict(frozen=True)

    name: str
    arguments: str
    """the call's arguments as logged (a JSON text by the API's own format)"""
    id: str | None = None


class LoggedMessage(BaseModel):
    model_config = ConfigDict(frozen=True)

    role: Literal["system", "user", "assistant", "tool"]
    content: str
    """the text: the content string, or its text parts joined by a newline ("" for null)"""
    tool_calls: tuple[ToolCall, ...] = ()
    name: str | None = None
    """a tool result's function name (`name`, the older format's only link to its call)"""
    tool_call_id: str | None = None
    skipped_parts: int = 0
    """content parts that are not text (images, audio, files), left out of `content`"""


def parse_message(at: str, raw: Any) -> LoggedMessage:
    if not isinstance(raw, dict):
        raise UserError(f"{at} is not an object with 'role' and 'content'")
    role = raw.get("role")
    role = _ROLE_ALIASES.get(role, role) if isinstance(role, str) else role
    if role not in ROLES:
        raise UserError(
            f"{at} has unknown role {json.dumps(raw.get('role'))} "
            f"(roles: {', '.join(ROLES)}, developer, function)"
        )
    at = f"{at} ({raw['role']})"
    calls = _tool_calls(at, raw) if role == "assistant" else ()
    content = raw.get("content")
    if content is None and role == "assistant" and isinstance(raw.get("refusal"), str):
        content = raw["refusal"]  # the API's shape of a refusal: the assistant's own words
    if content is None and calls:
        text, skipped = "", 0
    else:
        text, skipped = _content(at, raw, content)
    name, call_id = raw.get("name"), raw.get("tool_call_id")
    if role == "tool" and not (isinstance(name, str) or isinstance(call_id, str)):
        raise UserError(f"{at}: a tool result needs 'tool_call_id' (or the older 'name')")
    return LoggedMessage(
        role=role, content=text, tool_calls=calls, skipped_parts=skipped,
        name=name if role == "tool" and isinstance(name, str) else None,
        tool_call_id=call_id if role == "tool" and isinstance(call_id, str) else None,
    )  # fmt: skip


def _content(at: str, raw: dict, content: Any) -> tuple[str, int]:
    """(the text, the parts skipped) of a message's `content`: a string or a list of parts."""
    if isinstance(content, str):
        return content, 0
    if isinstance(content, list):
        texts, skipped = [], 0
        for j, part in enumerate(content, start=1):
            kind = part.get("type") if isinstance(part, dict) else None
            if not isinstance(kind, str):
                raise UserError(f"{at}: content part {j} is not an object with a 'type'")
            field = {"text": "text", "refusal": "refusal"}.get(kind)
            if field is None:
                skipped += 1
                continue
            if not isinstance(part.get(field), str):
                raise UserError(f"{at}: content part {j} ({kind}) has no string '{field}'")
            texts.append(part[field])
        return "\n".join(texts), skipped
    got = "missing" if "content" not in raw else f"a {json_type(content)}"
    needs = " (null only with 'tool_calls')" if raw.get("role") == "assistant" else ""
    raise UserError(f"{at}: content must be a string or a list of parts{needs}, got {got}")


def _tool_calls(at: str, raw: dict) -> tuple[ToolCall, ...]:
    """An assistant message's calls: `tool_calls` (id, function {name, arguments}), or the
    older format's one `function_call` {name, arguments}."""
    listed = raw.get("tool_calls")
    if listed is None and isinstance(raw.get("function_call"), dict):
        listed = [{"function": raw["function_call"]}]
    if listed is None:
        return ()
    if not isinstance(listed, list):
        raise UserError(f"{at}: 'tool_calls' must be a list")
    calls = []
    for j, call in enumerate(listed, start=1):
        function = call.get("function") if isinstance(call, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        if not isinstance(name, str):
            raise UserError(f"{at}: tool call {j} has no 'function' with a string 'name'")
        arguments = function.get("arguments", "")
        if not isinstance(arguments, str):  # some exporters decode the JSON text
            arguments = json.dumps(arguments, ensure_ascii=False)
        call_id = call.get("id")
        calls.append(ToolCall(name=name, arguments=arguments,
                              id=call_id if isinstance(call_id, str) else None))  # fmt: skip
    return tuple(calls)


def json_type(value: Any) -> str:
    names = {list: "list", dict: "object", type(None): "null", bool: "boolean"}
    return names.get(type(value), "number" if isinstance(value, int | float) else "value")


def check_order(where: str, messages: list[LoggedMessage]) -> None:
    """System only first; then a user message; in a turn any assistant messages, each tool
    result after a tool call; two user messages never in a row."""
    start = 1 if messages[0].role == "system" else 0
    called = False  # a tool call in this turn so far: results may follow
    for k, message in enumerate(messages[start:], start=start):
        before = messages[k - 1].role if k else None
        after = f" after '{before}'" if before else ""
        if message.role == "system" or (k == start and message.role != "user"):
            place = " (a system message must be the first)" if message.role == "system" else ""
            expected = "user" if before in (None, "system", "assistant", "tool") else "assistant"
            raise UserError(
                f"{where}: roles out of order: message {k + 1} is '{message.role}'{after}, "
                f"expected '{expected}'{place}"
            )
        if message.role == "user" and before == "user":
            raise UserError(
                f"{where}: roles out of order: message {k + 1} is 'user' after 'user', "
                "expected 'assistant'"
            )
        if message.role == "tool" and not called:
            raise UserError(
                f"{where}: message {k + 1} is a tool result with no tool call before it in its turn"
            )
        called = (called or bool(message.tool_calls)) and message.role != "user"
    if not any(m.role == "assistant" and (m.content or not m.tool_calls) for m in messages):
        why = (
            " (its assistant messages only call tools)"
            if called or any(m.tool_calls for m in messages)
            else ""
        )
        raise UserError(f"{where}: no assistant turn to score{why}")
