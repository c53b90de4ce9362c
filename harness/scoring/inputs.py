"""Read generation records for scoring: harness `generations.jsonl` rows or {item, text} lines.

Every problem is one `UserError` naming the file and the line, raised before anything is
scored or written.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from harness.errors import UserError
from harness.models import EMBEDDED_MODEL
from harness.text.records import GenerationRecord
from harness.userfiles import user_json_objects


def _first_error(exc: ValueError) -> str:
    if not isinstance(exc, ValidationError):
        return str(exc)
    err = exc.errors()[0]
    loc = ".".join(str(part) for part in err["loc"])
    msg = err["msg"].removeprefix("Value error, ")
    return f"field '{loc}': {msg}" if loc else msg


def score_run_id(path: Path, suites: Any, config: Any, **settings: Any) -> str:
    """The run id of a `harness score` (its rows' `run_id`, its manifest's): first 12 hex of
    the sha256 of the scored file's bytes, the suites, the scoring config as in a run's id
    (without `validation`) and the command's other `settings` (model, item, format), so one
    meaning holds everywhere: the hash of what produced the rows."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    what = {
        "command": "score",
        "file": digest.hexdigest(),
        "suites": [suite.model_dump(mode="json") for suite in suites],
        "scoring": config.model_dump(mode="json", exclude={"validation"}),
        **settings,
    }
    text = json.dumps(what, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def read_records(
    path: Path, known_items: set[str], tokenizer_for, model: str | None = None, run_id: str = ""
) -> list[GenerationRecord]:
    """Parse every line; text-only lines are tokenised with `tokenizer_for(model_name)`.

    Text lines become records whose every token is generated, numbered per item in file order
    (sample 0, 1, ...), with policy `logged` and the line's `run_id`, else `run_id` (the
    score's, `score_run_id`).
    """
    if not path.is_file():
        raise UserError(f"{path}: file not found")
    parsed: list[tuple[str, dict]] = []
    for where, data in user_json_objects(path):
        parsed.append((where, _checked_line(where, data, known_items)))
    if not parsed:
        raise UserError(f"{path}: no records")
    # Every line is valid before the tokenizer (slow to load) is touched.
    records: list[GenerationRecord] = []
    per_item: dict[str, int] = {}
    for where, data in parsed:
        if "continuation_ids" not in data:
            item = data["item"]
            name = model or data.get("model") or EMBEDDED_MODEL
            ids = tokenizer_for(name)(data["text"], add_special_tokens=False)["input_ids"]
            sample = per_item.get(item, 0)
            per_item[item] = sample + 1
            data = {
                "run_id": data.get("run_id", run_id),
                "model": name,
                "item": item,
                "policy": data.get("policy", "logged"),
                "sample": data.get("sample", sample),
                "continuation_ids": ids,
            }
        try:
            records.append(GenerationRecord.from_transcript(data))
        except ValueError as exc:
            raise UserError(f"{where}: {_first_error(exc)}") from None
    return records


def _checked_line(where: str, data: dict, known_items: set[str]) -> dict:
    item = data.get("item")
    if not isinstance(item, str) or not item:
        raise UserError(f"{where}: field 'item' missing")
    if item not in known_items:
        raise UserError(f"{where}: field 'item': no task item '{item}' in the suites")
    if "continuation_ids" in data:
        try:
            GenerationRecord.from_transcript(data)
        except ValueError as exc:
            raise UserError(f"{where}: {_first_error(exc)}") from None
    else:
        text = data.get("text")
        if not isinstance(text, str) or not text.strip():
            raise UserError(f"{where}: field 'text' missing or empty")
    return data
