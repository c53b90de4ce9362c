"""`harness score` on a chat log: every check, then the files a run with conversations writes.

Order (docs/architecture.md, "Logged conversations"): the suites' checks built, every line of
the log parsed and matched to an item (one `file:line` UserError, nothing written), then the
tokenizer loaded and the log scored a chunk at a time (`harness.scoring.logged`), then
windows.csv, the adherence files, turns.csv, turn_adherence.csv and conversations.csv written
atomically. The caller renders the report from them.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from pathlib import Path

from harness.analysis.conversations import conversation_summary, turn_curves
from harness.atomic import atomic_write_text
from harness.config import GenerationConfig, ScoringConfig, TaskSuite
from harness.errors import UserError, notice
from harness.models import EMBEDDED_MODEL
from harness.scoring.io import adherence_frames, load_tokenizer
from harness.scoring.judge import JudgeDefaults, JudgeRunner, check_judges, judge_checks_of
from harness.scoring.logged import ItemMatcher, check_logs, log_totals, score_logged
from harness.scoring.score import item_checks
from harness.store import RunStore, write_csv


def score_log_files(
    logs: Path,
    suites: Sequence[TaskSuite],
    out: Path,
    config: ScoringConfig,
    model: str | None = None,
    item: str | None = None,
) -> tuple[list[Path], int]:
    """Validate, score and write; returns (the written paths, the conversations scored).
    `model`: whose tokenizer and chat template render the log (default the embedded model);
    judge checks default to it too."""
    matcher = ItemMatcher(suites, item)
    for _, entry in matcher.index.values():
        item_checks(entry, config.languages)  # a bad check fails before the log is read
    if out.exists() and not out.is_dir():
        raise UserError(f"{out}: exists and is not a folder")
    name = model or EMBEDDED_MODEL
    judge_checks = judge_checks_of(entry for _, entry in matcher.index.values())
    defaults = JudgeDefaults(name, GenerationConfig())
    if judge_checks:
        check_judges(defaults, judge_checks)
    check_logs(logs, matcher)
    for line in matcher.shared_notes():
        notice(f"{logs}: {line}")
    tokenizer = load_tokenizer(name)
    store = RunStore(out) if judge_checks else contextlib.nullcontext()
    with store as opened, JudgeRunner(opened, defaults) as judges:
        scores = score_logged(logs, suites, matcher, tokenizer, name, config, judges)
    frames = {
        "windows.csv": scores.windows,
        **adherence_frames(scores.windows),
        "turns.csv": scores.turns,
        "turn_adherence.csv": turn_curves(scores.turns),
        "conversations.csv": conversation_summary(scores.turns, scores.tokens),
        "logged_conversations.csv": scores.logged,
    }
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for file, frame in frames.items():
        write_csv(frame, out / file)
        written.append(out / file)
    manifest = {
        "command": "score", "log": str(logs), "model": name, "item": item,
        "counts": log_totals(scores.logged), "matching": matcher.shared_notes(),
    }  # fmt: skip
    atomic_write_text(out / "manifest.json", json.dumps(manifest, indent=2) + "\n")
    written.append(out / "manifest.json")
    return written, scores.conversations
