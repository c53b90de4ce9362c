"""Reading the text files a user names (configs, suites, pairs, prompts, JSONL logs).

They must be UTF-8; anything else (a binary file, a Latin-1 export) is one `UserError` naming
the file and where decoding failed, never a UnicodeDecodeError traceback.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from harness.errors import UserError


def _not_utf8(where: str, exc: UnicodeDecodeError) -> UserError:
    byte = exc.object[exc.start]
    return UserError(
        f"{where}: not UTF-8 text (byte 0x{byte:02x} at offset {exc.start}; "
        "a binary file or another encoding?)"
    )


def read_user_text(path: Path) -> str:
    """The whole file as UTF-8 text, with universal newlines (as `Path.read_text`)."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise _not_utf8(str(path), exc) from None


def user_text_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number from 1, line with its newline) of a UTF-8 text file.

    Lines are decoded one by one so the error names the line that is not UTF-8 (a text-mode
    file decodes in blocks and would fail lines ahead of the one being read).
    """
    with Path(path).open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise _not_utf8(f"{path}:{number}", exc) from None
            yield number, line


def json_line_error(
    path: Path | str, number: int, line: str, exc: json.JSONDecodeError
) -> UserError:
    """A JSON-lines line that does not parse, as one error naming its line and column and the
    whole reason: json's own message stops at "at" where its position would follow
    ("Invalid control character at"), so the character found there is named instead."""
    reason = exc.msg.removesuffix(" at")
    found = repr(line[exc.pos]) if exc.pos < len(line.rstrip("\n")) else "the end of the line"
    return UserError(
        f"{path}:{number}: not valid JSON at line {number}, column {exc.colno}: {reason} "
        f"(found {found})"
    )


def user_json_objects(path: Path) -> Iterator[tuple[str, dict]]:
    """("PATH:LINE", object) for each non-blank line of a JSON-lines file; a line that is not
    one JSON object is one `UserError` naming it."""
    for number, line in user_text_lines(path):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise json_line_error(path, number, line, exc) from None
        if not isinstance(data, dict):
            raise UserError(f"{where}: expected a JSON object")
        yield where, data
