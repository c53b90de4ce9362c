"""Score logged conversations (a chat log, `harness.text.chatlogs`) turn by turn, streaming.

Each conversation is matched to a suite item (`harness.scoring.matching`) and becomes a
GenerationRecord (policy `logged`, history `logged`, one sample per conversation in file order
per item) rendered by the model's chat template as a run renders its own conversations: the
first user message in the prompt, then per turn the logged reply as the generated tokens and
the next user message with its template markup. The records go through the run's scoring
(`score_records` for windows cut per reply, `score_turns` for every reply), a chunk at a time:
each chunk's rows are written to disk (`harness.scoring.spill`) and only their digests kept,
so memory stays flat however long the log.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc
import itertools
import json
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from harness.config.run import ScoringConfig, TaskSuite
from harness.interop import read_conversations
from harness.results import LoggedRow, TurnRow, WindowRow, cells_are, result_frame
from harness.scoring.digest import (
    WindowDigest,
    chunk_digest,
    gather_chunk_digests,
    merge_chunk_digests,
)
from harness.scoring.matching import ItemMatcher
from harness.scoring.score import score_records
from harness.scoring.spill import TURN_KEYS, WINDOW_KEYS, SpilledCsv
from harness.scoring.turns import score_turns
from harness.text.chat import ChatFormat
from harness.text.chatlogs import LogCounts, LoggedConversation, validate_chat_logs
from harness.text.records import GenerationRecord, TokenCounts

POLICY = "logged"  # the policy label of a logged conversation's records and rows
CHUNK = 250  # conversations scored per batch: every check sees their texts at once (500: a
# ~30 MiB higher peak, no less CPU at 10,000 conversations)
FOLD = 16  # chunks' digests gathered into one as they come: each digest's frames and arrays
# cost some KiB over its numbers, ~30 MiB over the 400 chunks of 100,000 conversations


def logged_record(
    conversation: LoggedConversation,
    item: str,
    task: str,
    sample: int,
    fmt: ChatFormat,
    model: str,
    run_id: str,
    encoded: list[list[int]],
) -> GenerationRecord:
    """The conversation as a run's conversation record: the logged replies are its generated
    segments (turn k), each later user message a `user` segment inside template `markup`.
    `encoded`: the ids of its replies (`replies_of`), encoded with its group's."""
    exchanges = [(k, u, r) for k, u, r in conversation.scored_turns() if r is not None]
    ids: list[int] = []
    segments: list[dict] = []  # validated as Segments with the record, in one call
    counts = {"generated": 0, "user": 0, "markup": 0}
    for index, ((turn, user, reply), reply_ids) in enumerate(zip(exchanges, encoded, strict=True)):
        if index:
            pieces = fmt.user_turn_pieces(user, last_token=ids[-1] if ids else None)
            for kind, _source, piece, text in pieces:
                _append(ids, segments, kind, piece, text, turn)
                counts[kind] += len(piece)
        _append(ids, segments, "generated", reply_ids, reply, turn)
        counts["generated"] += len(reply_ids)
    system, first = conversation.system, exchanges[0][1]
    prompt = fmt.prompt_ids(system, first)
    messages = ([{"role": "system", "content": system}] if system is not None else []) + [
        {"role": "user", "content": first}
    ]
    return GenerationRecord(
        run_id=run_id, model=model, task=task, item=item, policy=POLICY,
        seed=0, sample=sample, prompt_messages=messages, prompt_ids=prompt,
        continuation_ids=ids, segments=segments, text="\n\n".join(r for _, _, r in exchanges),
        finish_reason="stop", engine="logged",
        tokens=TokenCounts(prompt=len(prompt), **counts),
        conversation_id=conversation.id, history="logged",
    )  # fmt: skip


def replies_of(conversation: LoggedConversation) -> list[str]:
    """The replies `logged_record` encodes, in its order."""
    return [reply for _, _, reply in conversation.scored_turns() if reply is not None]


def _append(ids: list[int], segments: list[dict], kind, piece, text: str, turn: int) -> None:
    if not piece:  # an empty reply has no tokens, hence no rows
        return
    source = {"generated": "model", "user": "user", "markup": "chat"}[kind]
    segments.append(
        {"kind": kind, "start": len(ids), "end": len(ids) + len(piece), "source": source,
         "text": text, "turn": turn}
    )  # fmt: skip
    ids.extend(piece)


@dataclass(frozen=True)
class TurnDigests:
    """How a chunk's turns.csv rows are digested (`of`) and the chunks' digests joined
    (`merge`) for turn_adherence.csv and conversations.csv: the analysis layer's
    (`harness.analysis.conversations.turn_digest`), handed in by the stage, since scoring does
    not import the analysis (the module graph's layers)."""

    of: Callable[[pd.DataFrame], Any]
    merge: Callable[[list], Any]


@dataclass
class LoggedScores:
    """What scoring a log leaves: its three CSVs, written a chunk at a time (`SpilledCsv`),
    and the chunks' digests that the analysis files are computed from, never the rows."""

    windows: Path  # windows.csv, its chunks joined in key order
    turns: Path  # turns.csv
    logged: Path  # logged_conversations.csv
    window_digest: WindowDigest  # of windows.csv (the adherence files)
    turn_digest: Any  # of turns.csv (turn_adherence.csv, conversations.csv): TurnDigests'
    tokens: pd.DataFrame  # token counts summed per model, item, policy, history
    conversations: int
    totals: dict[str, int]  # `log_totals` of logged_conversations.csv


def check_logs(path: Path, matcher: ItemMatcher, log_format: str = "auto") -> int:
    """Every line parsed and matched (UserError naming file:line), nothing kept or written.
    `log_format`: a chat log, an Inspect eval log or OTel spans (`harness.interop.FORMATS`)."""
    try:
        return validate_chat_logs(path, matcher.validate, read_conversations(path, log_format))
    finally:
        # ids are unique within the log checked: no need to hold every one of them (~10 MiB
        # per 100,000 conversations) through the scoring that follows
        matcher.seen_ids.clear()


def logged_records(
    path: Path,
    matcher: ItemMatcher,
    fmt: ChatFormat,
    model: str,
    rows: list[dict] | None = None,
    log_format: str = "auto",
    run_id: str = "",
) -> Iterator[GenerationRecord]:
    """The log's conversations as records, one at a time (the file is read as they are);
    `rows` gets each conversation's logged_conversations.csv row (its failures still empty);
    `run_id`: the score's (`scoring.inputs.score_run_id`)."""
    per_item: dict[str, int] = {}
    conversations = read_conversations(path, log_format)
    # a group's replies encoded in one call: the backend's batch encode, not one per reply
    while group := list(itertools.islice(conversations, CHUNK)):
        replies = [replies_of(conversation) for conversation in group]
        flat = fmt.encode_many([reply for texts in replies for reply in texts])
        start = 0
        for conversation, texts in zip(group, replies, strict=True):
            encoded, start = flat[start : start + len(texts)], start + len(texts)
            item, how = matcher.match(conversation)
            sample = per_item.get(item, 0)
            per_item[item] = sample + 1
            task = matcher.index[item][0]
            if rows is not None:
                rows.append(_conversation_row(conversation, model, task, item, how, sample))
            yield logged_record(conversation, item, task, sample, fmt, model, run_id, encoded)


def _conversation_row(conversation: LoggedConversation, model, task, item, how, sample) -> dict:
    return {
        "conversation_id": sys.intern(conversation.id), "where": conversation.where,
        "model": model, "task": task, "item": item, "matched_by": how, "sample": sample,
        **conversation.counts().model_dump(),
        "metadata": json.dumps(conversation.metadata, sort_keys=True, ensure_ascii=False,
                               separators=(",", ":"), default=str),
        "tags": json.dumps(list(conversation.tags), ensure_ascii=False),
    }  # fmt: skip


def with_failures(rows: list[dict], turns: pd.DataFrame) -> pd.DataFrame:
    """logged_conversations.csv: each conversation's row with its failing turns from turns.csv
    (a turn fails when one of its checks failed; the first failing check in check order)."""
    failed = turns[cells_are(turns["passed"], False)]
    failed = failed.sort_values(["item", "sample", "turn"], kind="stable")
    firsts = failed.drop_duplicates(["item", "sample"])
    counts = failed.drop_duplicates(["item", "sample", "turn"]).groupby(["item", "sample"]).size()
    # plain dicts by (item, sample): one lookup per conversation, where a frame's `.loc`
    # built a row Series each time (~0.3 ms a conversation)
    count_of = dict(zip(counts.index, counts.tolist(), strict=True))
    columns = [firsts[c].tolist() for c in ("item", "sample", "turn", "check", "reason")]
    first_of = {(item, sample): rest for item, sample, *rest in zip(*columns, strict=True)}
    for row in rows:
        key = (row["item"], row["sample"])
        first = first_of.get(key)
        row["failed_turns"] = int(count_of.get(key, 0))
        row["first_failed_turn"] = None if first is None else int(first[0])
        row["first_failed_check"] = "" if first is None else str(first[1])
        reason = "" if first is None else first[2]
        row["first_failed_reason"] = reason if isinstance(reason, str) else ""
    return result_frame(LoggedRow, rows)


def log_totals(conversations: Iterable[pd.DataFrame]) -> dict[str, int]:
    """The manifest's counts: conversations, then every count column summed, over the rows
    of logged_conversations.csv (a frame, or its chunks)."""
    if isinstance(conversations, pd.DataFrame):
        conversations = [conversations]
    columns = ("turns", "scored_turns", "failed_turns", *LogCounts.model_fields.keys())
    totals = {"conversations": 0, **dict.fromkeys(columns, 0)}
    for frame in conversations:
        totals["conversations"] += len(frame)
        for column in dict.fromkeys(columns):
            totals[column] += int(frame[column].sum())
    return totals


def _collector_frozen(score: Callable) -> Callable:
    """`score` run with what lived before it (~180,000 objects: modules, the tokenizer, the
    checks) out of the cyclic collector's sight: each full collection walked all of it again
    (~0.1 s each, ~12 per 2,500 conversations). It is collected as before once `score` ends."""

    @functools.wraps(score)
    def frozen(*args, **kwargs):
        gc.freeze()
        try:
            return score(*args, **kwargs)
        finally:
            gc.unfreeze()

    return frozen


@_collector_frozen
def score_logged(
    path: Path,
    suites: Sequence[TaskSuite],
    matcher: ItemMatcher,
    tokenizer,
    model: str,
    config: ScoringConfig,
    spill: Path,
    out: Path,
    turn_digests: TurnDigests,
    judges=None,
    chunk: int = CHUNK,
    log_format: str = "auto",
    run_id: str = "",
) -> LoggedScores:
    """windows.csv, turns.csv and logged_conversations.csv of every logged conversation
    (already checked with `check_logs`), scored `chunk` conversations at a time through the
    run's scoring; each chunk's rows go to part files under `spill` and leave only their
    digests, so memory does not grow with the log. The joined files are hidden ones in `out`
    (`.windows.csv.scored`, ...), for `write_output` to move into place. `turn_digests`: how
    a chunk's turns are digested (the analysis layer's, given by the stage)."""
    fmt = ChatFormat(tokenizer)
    files = {
        "windows": SpilledCsv(spill, WindowRow, WINDOW_KEYS),
        "turns": SpilledCsv(spill, TurnRow, TURN_KEYS),
        "logged": SpilledCsv(spill, LoggedRow),  # in file order, as the rows come
    }
    window_digests, turn_parts, tokens, logged = [], [], [], []
    batch: list[GenerationRecord] = []
    rows: list[dict] = []
    count = 0

    def flush() -> None:
        memo: dict = {}  # a reply that fits in one window is scored once, for both files
        # rows as dicts: framed at once, result_frame checks every column (`as_dicts`)
        scored = score_records(batch, suites, tokenizer, config, judges, memo, as_dicts=True)
        windows = result_frame(WindowRow, scored)
        del scored
        files["windows"].add(windows)
        window_digests.append(chunk_digest(windows, spill, str(count)))
        _fold(window_digests, gather_chunk_digests)
        del windows
        scored = score_turns(batch, suites, tokenizer, config, judges, memo, as_dicts=True)
        turns = result_frame(TurnRow, scored)
        del scored
        files["turns"].add(turns)
        turn_parts.append(turn_digests.of(turns))
        _fold(turn_parts, turn_digests.merge)
        # a conversation's rows and turns are all in its chunk: its failures are too
        conversations = with_failures(rows, turns)
        del turns
        files["logged"].add(conversations)
        logged.append(log_totals(conversations))
        tokens.append(_token_sums(batch))
        _fold(tokens, _summed)
        batch.clear()
        rows.clear()
        _release()

    for record in logged_records(path, matcher, fmt, model, rows, log_format, run_id):
        batch.append(record)
        count += 1
        if len(batch) >= chunk:
            flush()
    if batch:
        flush()
    joined = [f.finish(out / f".{f.row.file}.scored") for f in files.values()]
    windows = merge_chunk_digests(window_digests)  # reads the chunks' spilled passes
    window_digests.clear()  # the merged digest is the only copy kept
    turns = turn_digests.merge(turn_parts)
    turn_parts.clear()
    totals = {key: sum(t[key] for t in logged) for key in log_totals([])}
    return LoggedScores(*joined, windows, turns, _summed(tokens), count, totals)


def _fold(digests: list, merge: Callable[[list], Any]) -> None:
    """Every `FOLD` digests merged into one, in place (each merge is closed: the digest of
    the chunks together, whatever the grouping)."""
    if len(digests) >= FOLD:
        digests[:] = [merge(digests)]


TOKEN_KEYS = ["model", "item", "policy", "history"]  # what conversations.csv sums tokens by


def _token_sums(records: list[GenerationRecord]) -> pd.DataFrame:
    """The records' generated tokens summed per model, item, policy and history (nothing is
    injected into a log)."""
    frame = pd.DataFrame(
        [
            {**{k: getattr(r, k) for k in TOKEN_KEYS}, "generated": r.tokens.generated,
             "injected": 0, "restated": 0}
            for r in records
        ]
    )  # fmt: skip
    return _summed([frame])


def _summed(frames: list[pd.DataFrame]) -> pd.DataFrame:
    frames = [f for f in frames if not f.empty]
    if not frames:
        return pd.DataFrame(columns=[*TOKEN_KEYS, "generated", "injected", "restated"])
    return pd.concat(frames).groupby(TOKEN_KEYS, as_index=False, sort=True).sum()


def _release() -> None:
    """Hand a scored chunk's memory back: its frames and rows are garbage now, and glibc keeps
    freed heap pages unless asked to trim. No `gc.collect()`: a full collection costs ~0.1 s
    of CPU (40 chunks per 10,000 conversations) and left the peak where it was (cyclic
    garbage is collected by Python's own thresholds, the next trim returns its pages)."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


def _libc():
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:  # not glibc (macOS, musl): nothing to trim
        return None


_LIBC = _libc() if sys.platform.startswith("linux") else None
