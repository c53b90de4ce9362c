"""OpenTelemetry GenAI spans as logged conversations: semantic conventions v1.37.0
(`SEMCONV`), the version that put the messages on the span as `gen_ai.input.messages`,
`gen_ai.output.messages` and `gen_ai.system_instructions`.

The file: OTLP/JSON trace data (`ExportTraceServiceRequest`: `{"resourceSpans": [...]}`), one
object, or one per line (the OpenTelemetry Collector's file exporter). Spans whose
`gen_ai.operation.name` is `chat` (or that carry `gen_ai.input.messages`) are model calls; the
calls of one conversation share `gen_ai.conversation.id` (else their trace id). A later call's
input holds the history, so a conversation is its last call (by end time): the system
instructions, its input messages, then its first output message. Message parts: `text`
(content), `tool_call` (id, name, arguments) and `tool_call_response` (id, response); other
parts (reasoning, blobs, uris) are kept as non-text parts, skipped and counted by the chat-log
reader. A message attribute may be a JSON string (what most SDKs write) or structured OTLP
values. Conversation metadata: the span's `gen_ai.request.model`, `gen_ai.provider.name`
and trace id. `number` in `file:number` messages is the conversation's position (first
appearance) in the file.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from harness.errors import UserError
from harness.text.chatlogs import LoggedConversation, conversation_from

SEMCONV = "1.37.0"
INPUT, OUTPUT = "gen_ai.input.messages", "gen_ai.output.messages"
SYSTEM = "gen_ai.system_instructions"


def read_otel_spans(path: Path) -> Iterator[LoggedConversation]:
    calls: dict[str, dict[str, Any]] = {}  # conversation -> its latest call
    for where, span in _spans(Path(path)):
        attrs = _attributes(where, span.get("attributes", []))
        if attrs.get("gen_ai.operation.name") != "chat" and INPUT not in attrs:
            continue
        key = str(attrs.get("gen_ai.conversation.id") or span.get("traceId") or where)
        end = int(span.get("endTimeUnixNano") or 0)
        earlier = calls.get(key)
        if earlier is None or end >= earlier["end"]:
            order = earlier["order"] if earlier else len(calls) + 1
            calls[key] = {"end": end, "attrs": attrs, "where": where, "order": order,
                          "trace": span.get("traceId", "")}  # fmt: skip
    if not calls:
        raise UserError(f"{path}: no GenAI chat spans (gen_ai.operation.name 'chat')")
    for key, call in sorted(calls.items(), key=lambda kv: kv[1]["order"]):
        yield conversation_from(Path(path), call["order"], _line(key, call))


def _spans(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    if not path.is_file():
        raise UserError(f"{path}: file not found")
    text = path.read_text(encoding="utf-8", errors="replace")
    try:
        requests = [(f"{path}", json.loads(text))]
    except ValueError:
        requests = []
        for number, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                try:
                    requests.append((f"{path}:{number}", json.loads(line)))
                except ValueError as exc:
                    raise UserError(f"{path}:{number}: not valid JSON ({exc})") from None
    for where, request in requests:
        if not isinstance(request, dict) or not isinstance(request.get("resourceSpans"), list):
            raise UserError(f"{where}: not OTLP/JSON trace data (no 'resourceSpans' list)")
        for resource in request["resourceSpans"]:
            for scope in (resource or {}).get("scopeSpans", []) or []:
                for span in (scope or {}).get("spans", []) or []:
                    if not isinstance(span, dict):
                        raise UserError(f"{where}: a span is not an object")
                    yield f"{where} (span {span.get('spanId', '?')})", span


def _attributes(where: str, raw: Any) -> dict[str, Any]:
    if not isinstance(raw, list):
        raise UserError(f"{where}: 'attributes' must be a list of {{key, value}}")
    return {a.get("key"): _value(a.get("value") or {}) for a in raw if isinstance(a, dict)}


def _value(value: dict[str, Any]) -> Any:
    """An OTLP AnyValue as Python."""
    if "stringValue" in value:
        return value["stringValue"]
    if "intValue" in value:
        return int(value["intValue"])
    if "doubleValue" in value:
        return float(value["doubleValue"])
    if "boolValue" in value:
        return bool(value["boolValue"])
    if "arrayValue" in value:
        return [_value(v) for v in (value["arrayValue"] or {}).get("values", [])]
    if "kvlistValue" in value:
        pairs = (value["kvlistValue"] or {}).get("values", [])
        return {p.get("key"): _value(p.get("value") or {}) for p in pairs}
    return None


def _messages_attr(where: str, attrs: dict, name: str) -> list:
    value = attrs.get(name)
    if value is None:
        return []
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise UserError(f"{where}: {name} is not valid JSON ({exc})") from None
    if not isinstance(value, list):
        raise UserError(f"{where}: {name} must be a list of messages")
    return value


def _line(key: str, call: dict[str, Any]) -> dict[str, Any]:
    where, attrs = call["where"], call["attrs"]
    messages = []
    system = _messages_attr(where, attrs, SYSTEM)
    if system:
        messages.append({"role": "system", "content": _parts(where, system)["content"]})
    for message in _messages_attr(where, attrs, INPUT):
        messages.extend(_message(where, message))
    for message in _messages_attr(where, attrs, OUTPUT)[:1]:  # the first choice
        messages.extend(_message(where, message))
    meta = {k: attrs[k] for k in ("gen_ai.request.model", "gen_ai.provider.name") if k in attrs}
    return {"id": key, "messages": messages, "metadata": {**meta, "trace_id": call["trace"]}}


def _message(where: str, message: Any) -> list[dict[str, Any]]:
    """One semconv message as OpenAI chat messages: tool-call responses become `tool`
    messages (one per response), the rest one message of its role."""
    if not isinstance(message, dict) or not isinstance(message.get("parts"), list):
        raise UserError(f"{where}: a GenAI message must be an object with a 'parts' list")
    role = message.get("role")
    fields = _parts(where, message["parts"])
    out: list[dict[str, Any]] = []
    if role != "tool" and (fields["content"] or fields["tool_calls"] or not fields["results"]):
        msg: dict[str, Any] = {"role": role, "content": fields["content"] or None}
        if fields["tool_calls"]:
            msg["tool_calls"] = fields["tool_calls"]
        elif msg["content"] is None:
            msg["content"] = ""
        out.append(msg)
    for call_id, response in fields["results"]:
        out.append({"role": "tool", "tool_call_id": call_id, "content": response})
    return out


def _parts(where: str, parts: list) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    calls, results = [], []
    for part in parts:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            content.append({"type": "text", "text": str(part.get("content", ""))})
        elif kind == "tool_call":
            args = part.get("arguments")
            calls.append({"id": part.get("id"), "type": "function",
                          "function": {"name": str(part.get("name", "")),
                                       "arguments": args if isinstance(args, str)
                                       else json.dumps(args)}})  # fmt: skip
        elif kind == "tool_call_response":
            response = part.get("response")
            text = response if isinstance(response, str) else json.dumps(response)
            results.append((str(part.get("id") or ""), text))
        elif isinstance(kind, str):
            content.append({"type": kind})
        else:
            raise UserError(f"{where}: a message part has no 'type'")
    plain = all(p["type"] == "text" for p in content)
    text: Any = "\n".join(p["text"] for p in content) if plain else content
    return {"content": text, "tool_calls": calls, "results": results}
