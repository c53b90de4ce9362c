"""The report of logged conversations (docs/architecture.md, "Report of a log"): which
conversations fail first and why, each failing turn with the user message before it and the
logged reply, a(k) by turn and by check, the share of turns each check failed, and failures
by the conversations' own metadata.

A folder `harness score` wrote from a chat log gets only these sections; a run that replays
a log gets them as one section of its report, with the reference and own replies beside the
logged one. Only the worst `worst` conversations are shown, so a log of 10,000+ conversations
gives a page of the same size; `with_text=False` leaves every text of the log out (logs are
user data). A scored log's turns.csv and logged_conversations.csv are read a chunk at a time
(`harness.report.log_tallies`, `RunData.chunks`): only tallies and the worst conversations
are kept, so memory is flat in the log's length too. Texts come from the log itself
(logged_conversations.csv's `where`; only the shown lines are parsed) or, in a replay run,
from generations.jsonl. Every text is escaped by `table`: model output and user messages are
untrusted.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from harness.errors import UserError
from harness.report.gates import gates_section
from harness.report.html import esc, fmt_num, note, section, table
from harness.report.load import RunData
from harness.report.log_tallies import TurnTallies, logged_chunks, tally_turns
from harness.text.chatlogs import read_chat_lines

WORST = 20  # conversations shown by default (`--worst`)
TEXT_CHARS = 600  # a text shown beyond this is cut (the whole text is in the log)
TURNS_SHOWN = 40  # turns of the a(k) by check table (the figure has every turn)
METADATA_KEYS, METADATA_VALUES = 8, 20  # metadata keys and values per key shown
LOG_TITLES = {
    "gates": "Gates",
    "failing": "Conversations that fail first",
    "turns": "By turn and by check",
    "metadata": "By metadata",
}


def _cut(text: str | None) -> str:
    if text is None:
        return "–"
    text = text.strip()
    return text if len(text) <= TEXT_CHARS else text[:TEXT_CHARS] + " …"


def _log_texts(data: RunData, shown: pd.DataFrame) -> dict[tuple[str, int], tuple[str, str]]:
    """(conversation id, turn) -> (user message, logged reply) of the shown conversations,
    read from the log named by logged_conversations.csv (only their lines are parsed)."""
    ids = set(shown["conversation_id"])
    by_file: dict[str, set[int]] = {}
    for conversations in data.chunks("logged_conversations.csv"):
        for where in conversations.loc[conversations["conversation_id"].isin(ids), "where"]:
            path, _, line = where.rpartition(":")
            by_file.setdefault(path, set()).add(int(line))
    out = {}
    logged = Path(str((data.manifest or {}).get("log", "")))  # absolute: score resolves it
    for path, lines in by_file.items():
        log = Path(path)
        if not log.is_file() and logged.name == log.name and logged.is_file():
            log = logged  # `where` is as the user named the log, relative to where they were
        try:
            found = read_chat_lines(log, lines)
        except (OSError, UserError):
            continue  # the folder was moved away from its log: the section says so
        for conversation in found.values():
            for turn in conversation.turns():
                out[(conversation.id, turn.turn)] = (turn.user, turn.reply)
    return out


def _run_texts(data: RunData) -> dict[tuple[str, int], dict[str, str]]:
    """(conversation id, turn) -> {user, logged, reference, own} from a replay run's
    generations.jsonl (the first sample of the first replayed policy)."""
    out: dict[tuple[str, int], dict[str, str]] = {}
    policy = next(
        (g["policy"] for g in data.generations or [] if g.get("history") in ("reference", "own")),
        None,
    )
    for g in data.generations or []:
        history, conv = g.get("history"), g.get("conversation_id")
        if history not in ("logged", "reference", "own") or conv is None:
            continue
        if history != "logged" and g.get("policy") != policy:
            continue
        kind = "logged" if history == "logged" else "generated"
        segments = g.get("segments", [])
        replied = [s.get("turn") for s in segments if s.get("kind") == kind and s.get("turn")]
        for turn in set(replied) if history != "reference" else {max(replied, default=0)}:
            slot = out.setdefault((conv, turn), {})
            text = "".join(
                s.get("text", "")
                for s in segments
                if s.get("kind") == kind and s.get("turn") == turn
            )
            slot.setdefault(history, text)
            if history == "logged":
                users = [s for s in segments if s.get("kind") == "user" and s.get("turn") == turn]
                first = (g.get("prompt_messages") or [{}])[-1].get("content", "")
                slot.setdefault("user", "".join(s.get("text", "") for s in users) or first)
    return out


def _failing_part(data: RunData, tallies: TurnTallies, worst: int, with_text: bool) -> str:
    failing = tallies.failing
    head = note(
        f"{failing:,} of {tallies.conversations:,} logged conversations have a failing turn"
        + (f"; the {min(worst, failing):,} that fail earliest are shown." if failing else ".")
    )
    if not failing:
        return head
    shown = tallies.firsts.head(worst)
    rows = [
        [
            r.conversation_id,
            r.item,
            int(r.turn),
            r.check,
            r.reason,
            f"{int(r.failing)} / {int(r.scored)}",
        ]
        for r in shown.itertuples()
    ]
    html = head + table(
        ["conversation", "item", "first failing turn", "check", "reason", "failing / scored turns"],
        rows,
    )
    return html + _turn_texts(data, shown, worst, with_text)


def _turn_texts(data, shown: pd.DataFrame, worst: int, with_text: bool):
    """Each failing turn of the shown conversations, in their order, with its texts (their
    rows read again from turns.csv, a chunk at a time)."""
    ids = set(shown["conversation_id"])
    keep = pd.concat(
        [t[t["failed"] & t["conversation_id"].isin(ids)] for t in logged_chunks(data)],
        ignore_index=True,
    )
    order = {c: i for i, c in enumerate(shown["conversation_id"])}
    keep = keep.assign(rank=keep["conversation_id"].map(order)).sort_values(
        ["rank", "turn"], kind="stable"
    )
    failing = [
        (
            conv,
            int(turn),
            "; ".join(
                f"{c}: {r}" if r else c for c, r in zip(g["check"], g["reason"], strict=True)
            ),
        )
        for (conv, turn), g in keep.groupby(["conversation_id", "turn"], sort=False)
    ]
    limit = 3 * worst
    intro = "<h3>Failing turns</h3>" + note(
        f"{min(limit, len(failing)):,} of the {len(failing):,} failing turns of the conversations "
        "above, each with the user message it answers and the logged reply."
        if with_text
        else f"{min(limit, len(failing)):,} of the {len(failing):,} failing turns of the "
        "conversations above; their texts are left out (--no-text)."
    )
    if not with_text:
        return intro + table(["conversation", "turn", "failed checks"], failing[:limit])
    replay = data.generations is not None and any(
        g.get("history") in ("reference", "own") for g in data.generations
    )
    if replay:
        texts = _run_texts(data)
        rows = [
            [conv, turn, why, _cut(texts.get((conv, turn), {}).get("user"))]
            + [_cut(texts.get((conv, turn), {}).get(h)) for h in ("logged", "reference", "own")]
            for conv, turn, why in failing[:limit]
        ]
        headers = ["conversation", "turn", "failed checks", "user message", "logged reply",
                   "reference history reply", "own history reply"]  # fmt: skip
        return intro + table(headers, rows, cls="data logs")
    texts = _log_texts(data, shown)
    missing = (
        ""
        if texts
        else note(
            "The log named in logged_conversations.csv is not readable from here, so the texts "
            "are left out."
        )
    )
    rows = [
        [conv, turn, why, *(_cut(t) for t in texts.get((conv, turn), (None, None)))]
        for conv, turn, why in failing[:limit]
    ]
    headers = ["conversation", "turn", "failed checks", "user message", "logged reply"]
    return intro + missing + table(headers, rows, cls="data logs")


def _by_turn_and_check(tallies: TurnTallies) -> str:
    if not tallies.by_turn:
        return note("No check could decide on any logged reply.")
    checks = sorted({check for _, check in tallies.by_turn})
    cells = {
        key: f"{fmt_num(passed / size)} (n = {size:,})"
        for key, (passed, size) in tallies.by_turn.items()
    }
    ks = sorted({turn for turn, _ in tallies.by_turn})
    rows = [[int(k), *(cells.get((k, c), "–") for c in checks)] for k in ks[:TURNS_SHOWN]]
    cut = (
        note(f"Turns 1-{ks[TURNS_SHOWN - 1]} of {len(ks)} shown.") if len(ks) > TURNS_SHOWN else ""
    )
    a_by_turn = (
        "<h3>a(k) by turn and check</h3>"
        + note(
            "Share of the logged replies to user turn k that the check passed, among those it "
            "decided (n)."
        )
        + table(["turn", *checks], rows)
        + cut
    )
    rows = [
        [check, decided, failed, f"{100 * failed / decided:.1f} %",
         tallies.undecided.get(check, 0)]
        for check, (decided, failed) in sorted(tallies.by_check.items())
    ]  # fmt: skip
    return (
        a_by_turn
        + "<h3>Share of turns each check failed</h3>"
        + table(["check", "turns decided", "failed", "share failed", "undecided"], rows)
    )


def _metadata_part(data: RunData) -> str | None:
    """Conversations and the share with a failing turn per value of each metadata key (and
    per tag); None when no conversation has metadata or tags."""
    values: dict[str, dict[str, list[int]]] = {}
    for meta, tags, failed in (
        row
        for conversations in data.chunks("logged_conversations.csv")
        for row in zip(
            conversations["metadata"], conversations["tags"], conversations["failed_turns"],
            strict=True,
        )
    ):  # fmt: skip
        pairs = [
            (k, v) for k, v in json.loads(meta or "{}").items() if not isinstance(v, dict | list)
        ]
        pairs += [("tag", tag) for tag in json.loads(tags or "[]")]
        for key, value in pairs:
            count = values.setdefault(key, {}).setdefault(str(value), [0, 0])
            count[0] += 1
            count[1] += int(failed) > 0
    if not values:
        return None
    html = []
    for key in sorted(values)[:METADATA_KEYS]:
        counts = sorted(values[key].items(), key=lambda kv: -kv[1][0])
        rows = [[v, n, failing, f"{100 * failing / n:.1f} %"] for v, (n, failing) in counts]
        more = len(rows) - METADATA_VALUES
        html.append(
            f"<h3>{esc(key)}</h3>"
            + table([key, "conversations", "failing", "share failing"], rows[:METADATA_VALUES])
        )
        if more > 0:
            html.append(note(f"{more} more values of {key} not shown."))
    return note(
        "The conversations' own metadata (and tags): how many have a failing turn per value."
    ) + "".join(html)


def _counts_line(data: RunData) -> str:
    """What the log held and what of it was not scored (manifest.json's counts)."""
    manifest = data.manifest or {}
    c = manifest.get("counts") or {}
    if not c:
        return ""
    said = (
        f"{c.get('conversations', 0):,} conversations, {c.get('turns', 0):,} turns, "
        f"{c.get('scored_turns', 0):,} replies scored, {c.get('failed_turns', 0):,} failing. "
        f"Kept in the history as text, not scored: {c.get('tool_calls', 0):,} tool calls and "
        f"{c.get('tool_results', 0):,} tool results; {c.get('tool_only_messages', 0):,} "
        f"assistant messages with tool calls only; {c.get('skipped_parts', 0):,} content "
        "parts that are not text were skipped."
    )
    return note(said) + "".join(note(line) for line in manifest.get("matching") or [])


def logs_part(data: RunData) -> tuple[str, dict] | None:
    """The run report's section for a replayed log: failing conversations and turns, logged
    reply beside the replayed ones; None when the run has no logged replies."""
    tallies = tally_turns(logged_chunks(data), data.worst)
    if tallies is None:
        return None
    return _failing_part(data, tallies, data.worst, data.with_text), {}


def log_sections(data: RunData, figures: tuple[str, dict]) -> tuple[list[str], dict, list[str]]:
    """Every section of a scored log's page, the figures, the anchors; a section with nothing
    to show (no metadata) is absent."""
    tallies = tally_turns(logged_chunks(data), data.worst)
    if tallies is None:
        raise UserError(f"{data.run_dir}: turns.csv has no logged replies to report")
    figure_html, figs = figures
    parts = {
        # the verdicts `harness score --gates` exits on (a section only where gates ran)
        "gates": gates_section(data)[0] if data.frame("gates.csv") is not None else None,
        "failing": _counts_line(data) + _failing_part(data, tallies, data.worst, data.with_text),
        "turns": figure_html + _by_turn_and_check(tallies),
        "metadata": _metadata_part(data),
    }
    html = [section(a, LOG_TITLES[a], body) for a, body in parts.items() if body is not None]
    anchors = [a for a, body in parts.items() if body is not None]
    return html, figs, anchors
