"""The generation record: written to generations.jsonl by the generation stage, read back by
scoring, probing and the report, and built from user transcripts by `harness score`.

Continuation positions count every token after the initial prompt (injected reminders and
restatements included); `segments` say which spans the model generated.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

RECORD_VERSION = 1

# Fields a transcript may leave out, and the values it then gets (harness records carry all).
_TRANSCRIPT_DEFAULTS: dict[str, Any] = {
    "model": "",
    "policy": "none",
    "seed": 0,
    "prompt_ids": [],
    "text": "",
    "finish_reason": "",
    "engine": "",
}


def _unset(value: Any) -> bool:
    return value is None


FinishReason = Literal["stop", "length", "content_filter", "context"]


class Segment(BaseModel):
    """A span of the continuation, [start, end) in continuation token positions (0-based).

    Kinds: `generated` (the model's tokens: the assistant turns), `injected` (reminders,
    `Continue.` turns), `restatement`, and in conversations `user` (a scripted, simulated or
    logged user message), `markup` (the chat template's tokens between turns) and `logged` (a
    logged assistant reply: the history a replay continues, source `log`). `turn` is the
    conversation turn a span belongs to (1-based; unset, and left out of dumps and keys, in
    single replies).
    """

    model_config = ConfigDict(frozen=True)

    kind: Literal["generated", "injected", "restatement", "user", "markup", "logged"]
    start: int = Field(ge=0)
    end: int = Field(ge=0)  # exclusive
    source: Literal[
        "model", "reminder", "continue", "restatement", "user", "simulator", "chat", "log"
    ] = "model"
    text: str = ""
    turn: int | None = Field(None, ge=1, exclude_if=_unset)
    # On a conversation's reply's last generated span: why the reply ended (`stop`: EOS or a
    # stop string, `length`: the token limit, `content_filter`: the provider withheld the rest,
    # `context`: the context window). Unset, and left out of dumps and keys, elsewhere.
    finish: FinishReason | None = Field(None, exclude_if=_unset)

    @model_validator(mode="after")
    def _ordered(self) -> Segment:
        if self.end < self.start:
            raise ValueError(f"segment end {self.end} < start {self.start}")
        return self


class TokenCounts(BaseModel):
    prompt: int = 0
    generated: int = 0
    injected: int = 0
    restated: int = 0
    processed: int = 0  # every token the engine ran through (prompts of every round + outputs)
    processed_uncached: int | None = None  # minus prefix-cache hits, where the engine says
    # conversations only (left out of single replies' dumps): user messages, chat markup
    user: int | None = Field(None, exclude_if=_unset)
    markup: int | None = Field(None, exclude_if=_unset)
    logged: int | None = Field(None, exclude_if=_unset)  # replays: logged assistant replies
    # engine chat: the endpoint's own count of the tokens sent (cached ones among them) and
    # received for this sample, which it bills; left out of dumps elsewhere
    api_input: int | None = Field(None, exclude_if=_unset)
    api_cached_input: int | None = Field(None, exclude_if=_unset)
    api_output: int | None = Field(None, exclude_if=_unset)


class GenerationRecord(BaseModel):
    """One sample: its prompt, its continuation and the segments of the continuation.

    The fields, their order and their names are the generations.jsonl format; anything added
    here is written to every run's generations.jsonl and changes it.
    """

    version: int = RECORD_VERSION
    run_id: str = ""
    model: str
    task: str = ""  # suite name
    item: str = ""
    policy: str
    seed: int
    sample: int = 0
    prompt_messages: list[dict[str, str]] = Field(default_factory=list)
    prompt_ids: list[int]
    continuation_ids: list[int]
    segments: list[Segment]
    text: str
    finish_reason: str
    engine: str
    seconds: float = 0.0
    rounds: int = 0
    tokens: TokenCounts = Field(default_factory=TokenCounts)
    # A logged conversation's (`harness score` on a chat log, replays): the log's conversation
    # id and whose history the replies follow (turns.csv `history`). Unset, and left out of
    # dumps, in a run's own records; not in the record key.
    conversation_id: str | None = Field(None, exclude_if=_unset)
    history: Literal["logged", "reference", "own"] | None = Field(None, exclude_if=_unset)
    # Perplexity of the generated tokens under the unsteered model (`harness.engines.
    # perplexity`): written by the hf engine, the one that can score its own replies (unset,
    # and left out of dumps, elsewhere). quality.csv reads it.
    perplexity: float | None = Field(None, exclude_if=_unset)

    @model_validator(mode="after")
    def _segments_fit(self) -> GenerationRecord:
        for seg in self.segments:
            if seg.end > len(self.continuation_ids):
                raise ValueError(
                    f"segment [{seg.start}, {seg.end}) runs past the continuation "
                    f"({len(self.continuation_ids)} tokens)"
                )
        return self

    @classmethod
    def from_transcript(cls, data: dict[str, Any]) -> GenerationRecord:
        """A record from a transcript row: `item` and `continuation_ids` are needed; missing
        fields get defaults (policy `none`), unknown keys are ignored, and no `segments` (or
        null) means every continuation token was generated.

        Raises ValueError (pydantic's ValidationError for a field of the wrong type).
        """
        if "item" not in data:
            raise ValueError("field 'item' missing")
        segments = data.get("segments")
        record = cls.model_validate(
            {**_TRANSCRIPT_DEFAULTS, **data, "segments": [] if segments is None else segments}
        )
        if segments is None:
            n = len(record.continuation_ids)
            record.segments = [Segment(kind="generated", start=0, end=n)] if n else []
        return record

    @property
    def key(self) -> str:
        """Identity of the record's content: who generated what (not when, nor how long it
        took). Stage caches are keyed on it: the hashed body must never change."""
        body = json.dumps(
            [
                self.model,
                self.item,
                self.policy,
                self.seed,
                self.sample,
                self.prompt_ids,
                self.continuation_ids,
                [s.model_dump(exclude={"text", "finish"}) for s in self.segments],
            ],
            separators=(",", ":"),
        )
        return hashlib.sha256(body.encode()).hexdigest()[:32]

    @property
    def is_conversation(self) -> bool:
        return any(seg.turn is not None for seg in self.segments)

    def turn_positions(self, kind: str = "generated") -> dict[int, list[int]]:
        """0-based offsets of the generated tokens per assistant turn (turn 1 only, for a
        single reply), in order; `kind="logged"`: the logged replies' instead."""
        turns: dict[int, list[int]] = {}
        ordered: dict[int, bool] = {}  # the turn's segments so far ascending, none overlapping
        for seg in self.segments:
            if seg.kind == kind:
                turn = seg.turn or 1
                pos = turns.setdefault(turn, [])
                ordered[turn] = ordered.get(turn, True) and (not pos or seg.start > pos[-1])
                pos.extend(range(seg.start, seg.end))
        return {
            turn: pos if ordered[turn] else sorted(set(pos)) for turn, pos in sorted(turns.items())
        }

    def reply_finishes(self, kind: str = "generated") -> dict[int, str]:
        """Why each reply ended, by turn (a single reply: turn 1, the record's finish reason):
        the `finish` of its spans, else the record's for the last turn, else "" (records
        written before replies carried one, logged replies)."""
        turns = self.turn_positions(kind)
        if not self.is_conversation:
            return dict.fromkeys(turns, self.finish_reason)
        found = {seg.turn: seg.finish for seg in self.segments if seg.kind == kind and seg.finish}
        last = max(turns, default=0)
        return {
            turn: found.get(turn) or (self.finish_reason if turn == last else "") for turn in turns
        }

    def position_roles(self) -> list[tuple[int, str]]:
        """(turn, role) per continuation offset: role `assistant` (generated), `user`,
        `markup`, `reminder` (injected), `restatement` or `logged` (a logged reply in a
        replay's history); turn 1 throughout a single reply."""
        roles = {"generated": "assistant", "injected": "reminder"}
        out = [(1, "assistant")] * len(self.continuation_ids)
        for seg in self.segments:
            role = roles.get(seg.kind, seg.kind)
            out[seg.start : seg.end] = [(seg.turn or 1, role)] * (seg.end - seg.start)
        return out

    def turn_starts(self) -> list[int]:
        """1-based positions t of the first token of each assistant turn after the first
        (conversations; empty for a single reply)."""
        if not self.is_conversation:
            return []
        return [pos[0] + 1 for turn, pos in self.turn_positions().items() if turn > 1 and pos]

    def generated_positions(self) -> list[int]:
        """0-based continuation offsets of the generated tokens, in order."""
        positions: list[int] = []
        ordered = True  # segments ascending and apart: their ranges joined are sorted, unique
        for seg in self.segments:
            if seg.kind == "generated" and seg.end > seg.start:
                ordered = ordered and (not positions or seg.start > positions[-1])
                positions.extend(range(seg.start, seg.end))
        return positions if ordered else sorted(set(positions))
