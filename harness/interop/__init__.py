"""Other tools' logs read as the conversations `harness score` scores: Inspect AI eval logs
(`inspect_import`) and OpenTelemetry GenAI spans (`otel`), each converted to the OpenAI chat
format of a chat-log line and checked by `harness.text.chatlogs.conversation_from`, so every format
ends in the one record type (`LoggedConversation`) and the one scoring path."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from harness.errors import UserError
from harness.interop import inspect_import, otel
from harness.text.chatlogs import LoggedConversation, read_chat_logs

FORMATS = ("auto", "chat", "inspect", "otel")


def detect_format(path: Path) -> str:
    """`inspect` for a .eval file or a JSON object with Inspect's `eval` and `version`; `otel`
    for OTLP JSON (`resourceSpans`); else `chat` (one conversation per line)."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: file not found")
    if path.suffix == ".eval":
        return "inspect"
    with path.open("rb") as handle:
        head = handle.read(4096).decode("utf-8", errors="replace").lstrip()
    if '"resourceSpans"' in head:
        return "otel"
    if path.suffix == ".json" and head.startswith("{"):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError):
            return "chat"  # the chat-log reader names the problem
        if isinstance(data, dict) and "eval" in data and "version" in data:
            return "inspect"
    return "chat"


def read_conversations(path: Path, fmt: str = "auto") -> Iterator[LoggedConversation]:
    """The file's conversations in order, whatever the format (`FORMATS`)."""
    if fmt not in FORMATS:
        raise UserError(f"--format: '{fmt}' is not one of {', '.join(FORMATS)}")
    fmt = detect_format(path) if fmt == "auto" else fmt
    if fmt == "inspect":
        return inspect_import.read_inspect_log(Path(path))
    if fmt == "otel":
        return otel.read_otel_spans(Path(path))
    return read_chat_logs(path)
