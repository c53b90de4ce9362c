"""Split a generated output into windows of generated tokens.

Positions (docs/architecture.md, "Positions"): continuation position t = 1..T counts every
token after the initial prompt (injected reminders and restatements included). A window holds
`size` consecutive *generated* tokens; injected and restated tokens are skipped, so a window may
straddle an injection. Each window reports t_start/t_end (continuation positions of its first
and last token, inclusive) and t_gen_start (1-based index of its first token among the
generated tokens only).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

from harness.text.records import GenerationRecord
from harness.text.tokens import decode, decode_many

# A token whose text ends a sentence: closes a sentence-aligned window once it is long enough.
_SENTENCE_END_CHARS = (".", "!", "?", "。", "！", "？", "\n")


@dataclass(frozen=True, slots=True)
class Window:
    """One window of a sample (a plain value: ~30,000 are cut per 10,000 logged replies, and
    every field is computed here, so there is nothing to validate)."""

    index: int  # 0-based window number within the sample
    t_start: int  # continuation position (1-based) of the first token
    t_end: int  # continuation position (1-based) of the last token, inclusive
    t_gen_start: int  # 1-based index of the first token among generated tokens
    n_tokens: int
    text: str
    turn: int = 1  # the reply it is cut from (a conversation's turn; 1 in a single reply)


def _runs(positions: list[int]) -> list[list[int]]:
    """Split sorted positions into runs of consecutive offsets (one per uninterrupted stretch)."""
    if not positions or positions[-1] - positions[0] == len(positions) - 1:
        return [positions] if positions else []  # sorted and unique: one stretch, or none
    runs: list[list[int]] = []
    for p in positions:
        if runs and p == runs[-1][-1] + 1:
            runs[-1].append(p)
        else:
            runs.append([p])
    return runs


# id(record) -> {(id(tokenizer), first, last): text}: a reply's stretch of tokens is decoded
# once per record, though its turn row, the response text and a window holding the whole
# reply all need it (decoding is a third of scoring a logged reply that no detector reads);
# an entry leaves with its record
_STRETCH_TEXTS: dict[int, dict[tuple[int, int, int], str]] = {}


def stretch_texts(
    record: GenerationRecord, tokenizer, stretches: list[tuple[int, int]]
) -> list[str]:
    """The decoded text of each stretch (first, last): continuation offsets, inclusive, of
    consecutive tokens), as `decode_many` of their ids gives it."""
    cache = _STRETCH_TEXTS.get(id(record))
    if cache is None:
        cache = _STRETCH_TEXTS[id(record)] = {}
        weakref.finalize(record, _STRETCH_TEXTS.pop, id(record), None)
    keys = [(id(tokenizer), first, last) for first, last in stretches]
    todo = list(dict.fromkeys(key for key in keys if key not in cache))
    ids = record.continuation_ids
    decoded = decode_many(tokenizer, [ids[first : last + 1] for _, first, last in todo])
    cache.update(zip(todo, decoded, strict=True))
    return [cache[key] for key in keys]


def window_bounds(
    positions: list[int], size: int, sentence_ends: list[bool] | None = None
) -> list[tuple[int, int]]:
    """[start, end) index ranges into `positions`.

    Fixed windows hold `size` tokens (the last may be shorter). Sentence-aligned windows
    (`sentence_ends` given, one flag per generated token) close at the first sentence end once
    they hold 3/4 of `size`, and at 3/2 of `size` at the latest.
    """
    n = len(positions)
    if sentence_ends is None:
        return [(i, min(i + size, n)) for i in range(0, n, size)]
    bounds, start = [], 0
    low, high = max(1, (3 * size) // 4), max(1, (3 * size) // 2)
    for i in range(n):
        length = i - start + 1
        if (length >= low and sentence_ends[i]) or length >= high:
            bounds.append((start, i + 1))
            start = i + 1
    if start < n:
        bounds.append((start, n))
    return bounds


def _turn_bounds(
    record: GenerationRecord, positions: list[int], size: int, ends: list[bool] | None
) -> list[tuple[int, int, int]]:
    """window_bounds over the whole reply, or per assistant turn in a conversation (indices
    into `positions` either way), each with its turn (1 in a single reply)."""
    if not record.is_conversation:
        return [(a, b, 1) for a, b in window_bounds(positions, size, ends)]
    bounds, offset = [], 0
    for number, turn in record.turn_positions().items():
        part = None if ends is None else ends[offset : offset + len(turn)]
        bounds += [(offset + a, offset + b, number) for a, b in window_bounds(turn, size, part)]
        offset += len(turn)
    return bounds


def split_windows(
    record: GenerationRecord, tokenizer, size: int = 64, sentence_aligned: bool = False
) -> list[Window]:
    """Windows of generated tokens with their decoded text (injected/restated text excluded).
    In a conversation each reply is cut on its own: a window never spans a user turn."""
    positions = record.generated_positions()
    ids = record.continuation_ids
    ends = None
    if sentence_aligned:
        pieces = decode_many(tokenizer, [[ids[p]] for p in positions])
        ends = [piece.rstrip(" ").endswith(_SENTENCE_END_CHARS) for piece in pieces]
    bounds = _turn_bounds(record, positions, size, ends)
    # Decode each uninterrupted stretch separately: a reminder between them is a break in the
    # text, never glued into a word.
    chunks: list[tuple[int, int]] = []
    owner: list[int] = []
    for k, (a, b, _) in enumerate(bounds):
        for run in _runs(positions[a:b]):
            chunks.append((run[0], run[-1]))
            owner.append(k)
    decoded = stretch_texts(record, tokenizer, chunks)
    texts: list[list[str]] = [[] for _ in bounds]
    for k, piece in zip(owner, decoded, strict=True):
        texts[k].append(piece)
    return [
        Window(
            index=k,
            t_start=positions[a] + 1,
            t_end=positions[b - 1] + 1,
            t_gen_start=a + 1,
            n_tokens=b - a,
            text="\n".join(texts[k]),
            turn=turn,
        )
        for k, (a, b, turn) in enumerate(bounds)
    ]


def response_text(record: GenerationRecord, tokenizer) -> str:
    """The whole generated text (for response-scope checks), stretches joined by a newline."""
    runs = _runs(record.generated_positions())
    return "\n".join(stretch_texts(record, tokenizer, [(run[0], run[-1]) for run in runs]))


def reply_text(record: GenerationRecord, tokenizer, positions: list[int]) -> str:
    """One reply's text from its generated offsets (`turn_positions`): one stretch, unless
    something was injected into it (then decoded as one sequence, the reminder left out).
    turns.csv and windows.csv's whole-reply rows both judge this text."""
    first, last = positions[0], positions[-1]
    if last - first == len(positions) - 1:
        return stretch_texts(record, tokenizer, [(first, last)])[0]
    return decode(tokenizer, [record.continuation_ids[p] for p in positions])
