"""THROWAWAY STUB (replay branch): stands in for the logs engineer's reader until it lands
on main; deleted at the merge. Same API: LoggedMessage, LoggedConversation, read_chat_logs."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from harness.errors import UserError
from harness.userfiles import user_text_lines


class LoggedMessage(BaseModel):
    role: Literal["system", "user", "assistant"]
    content: str


class LoggedConversation(BaseModel):
    id: str
    item: str | None = None
    path: Path
    line: int
    messages: list[LoggedMessage]

    @property
    def system(self) -> str | None:
        first = self.messages[0] if self.messages else None
        return first.content if first is not None and first.role == "system" else None

    @property
    def assistant_turns(self) -> int:
        return sum(m.role == "assistant" for m in self.messages)


def read_chat_logs(path: Path) -> Iterator[LoggedConversation]:
    for number, line in user_text_lines(Path(path)):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UserError(f"{where}: not valid JSON ({exc.msg})") from None
        if isinstance(data, list):
            data = {"messages": data}
        msgs = [LoggedMessage(**m) for m in data["messages"]]
        conv = LoggedConversation(
            id=str(data.get("id", number)),
            item=data.get("item"),
            path=path,
            line=number,
            messages=msgs,
        )
        if conv.assistant_turns == 0:
            raise UserError(f"{where}: the conversation has no assistant turn")
        yield conv
