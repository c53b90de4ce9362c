"""Inspect AI eval logs (.eval or .json, inspect_ai 0.3.285) as logged conversations.

One conversation per sample (and epoch), read one sample at a time with Inspect's own reader
(`read_eval_log_samples`, attachments resolved): its `messages` in the OpenAI chat format
(text content parts kept as parts, reasoning and media parts as non-text parts, which the
chat-log reader skips and counts; assistant `tool_calls`; `tool` results), its id the sample's
id (`id:epoch` when the log has several epochs), its `metadata` the sample's (an `item` there,
as the harness's own export writes it, names the item). `number` in `file:number` messages is
the sample's position in the log (1-based).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from harness.errors import UserError
from harness.text.chatlogs import LoggedConversation, conversation_from


def read_inspect_log(path: Path) -> Iterator[LoggedConversation]:
    for number, sample in enumerate(_samples(path), start=1):
        yield conversation_from(path, number, sample_line(sample))


def _samples(path: Path) -> Iterator[Any]:
    try:
        from inspect_ai.log import read_eval_log, read_eval_log_samples  # lazy: optional extra
    except ImportError:
        raise UserError(
            f"{path}: reading an Inspect eval log needs inspect-ai: pip install -e '.[inspect]' "
            "(scripts/setup.sh installs it)"
        ) from None
    if not Path(path).is_file():
        raise UserError(f"{path}: file not found")
    try:
        header = read_eval_log(str(path), header_only=True)
        if header.eval.dataset.sample_ids is None:  # an older log: read whole
            yield from read_eval_log(str(path), resolve_attachments=True).samples or []
            return
        yield from read_eval_log_samples(
            str(path), all_samples_required=False, resolve_attachments=True,
            exclude_fields={"events", "store"},
        )  # fmt: skip
    except UserError:
        raise
    except Exception as exc:  # Inspect's reader raises its own and pydantic's errors
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise UserError(f"{path}: not a readable Inspect eval log ({first})") from None


def sample_line(sample: Any) -> dict[str, Any]:
    """The sample as a chat-log line: {"id", "messages", "metadata", "item"?}."""
    metadata = dict(sample.metadata or {})
    ident = str(sample.id) if sample.epoch == 1 else f"{sample.id}:{sample.epoch}"
    line: dict[str, Any] = {
        "id": ident,
        "messages": [_message(m) for m in sample.messages],
        "metadata": json.loads(json.dumps(metadata, default=str)),
    }
    if isinstance(metadata.get("item"), str):
        line["item"] = metadata["item"]
    return line


def _message(message: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"role": message.role, "content": _content(message.content)}
    if message.role == "assistant" and message.tool_calls:
        out["tool_calls"] = [
            {"id": call.id, "type": "function",
             "function": {"name": call.function, "arguments": json.dumps(call.arguments)}}
            for call in message.tool_calls
        ]  # fmt: skip
        if not message.text:
            out["content"] = None
    if message.role == "tool":
        out["tool_call_id"] = message.tool_call_id or message.function or ""
        if message.function:
            out["name"] = message.function
    return out


def _content(content: Any) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    parts = []
    for part in content:
        if part.type == "text":
            parts.append({"type": "text", "text": part.text})
        else:  # reasoning, image, audio, video, data...: not what the assistant said
            parts.append({"type": part.type})
    return parts
