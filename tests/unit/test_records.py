"""The generation record: its generations.jsonl form, its cache identity, and transcripts read
through `from_transcript` (missing fields, extra keys, no segments)."""

from __future__ import annotations

import json

import pytest

from harness.text.records import GenerationRecord

ROW = {
    "version": 1,
    "run_id": "r1",
    "model": "smollm2-135m-instruct",
    "task": "languages",
    "item": "lang-fr-story",
    "policy": "periodic-4-user",
    "seed": 17,
    "sample": 1,
    "prompt_messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}],
    "prompt_ids": [1, 2, 3],
    "continuation_ids": [10, 11, 12, 13, 14, 15],
    "segments": [
        {"kind": "generated", "start": 0, "end": 4, "source": "model", "text": "abcd"},
        {"kind": "injected", "start": 4, "end": 5, "source": "reminder", "text": "R"},
        {"kind": "generated", "start": 5, "end": 6, "source": "model", "text": "e"},
    ],
    "text": "abcdRe",
    "finish_reason": "length",
    "engine": "vllm",
    "seconds": 1.5,
    "rounds": 2,
    "tokens": {
        "prompt": 3,
        "generated": 5,
        "injected": 1,
        "restated": 0,
        "processed": 20,
        "processed_uncached": None,
    },
}


def test_a_generations_jsonl_row_round_trips_unchanged():
    for record in (GenerationRecord.model_validate(ROW), GenerationRecord.from_transcript(ROW)):
        assert json.dumps(record.model_dump(mode="json")) == json.dumps(ROW)


def test_key_is_the_cache_identity_of_earlier_runs():
    # the value record_key gave before the record carried it: stage caches stay valid
    assert GenerationRecord.model_validate(ROW).key == "7fdee04730023ebbe5bebd7b7f6767d3"
    timing = {**ROW, "run_id": "r2", "seconds": 9.0, "rounds": 5, "extra": 1}
    assert GenerationRecord.from_transcript(timing).key == "7fdee04730023ebbe5bebd7b7f6767d3"


def test_a_logged_conversation_s_labels_are_dumped_last_and_stay_out_of_the_key():
    logged = GenerationRecord.model_validate({**ROW, "conversation_id": "c-9", "history": "logged"})
    dumped = logged.model_dump(mode="json")
    assert list(dumped)[-2:] == ["conversation_id", "history"]
    assert logged.key == "7fdee04730023ebbe5bebd7b7f6767d3"


def test_transcript_without_segments_is_all_generated_and_extras_are_dropped():
    record = GenerationRecord.from_transcript(
        {"item": "x", "continuation_ids": [5, 6, 7], "user_id": "u-42", "segments": None}
    )
    assert record.generated_positions() == [0, 1, 2]
    assert record.policy == "none" and record.model == "" and record.seed == 0
    dumped = record.model_dump()
    assert "user_id" not in dumped and list(dumped) == list(ROW)


def test_generated_positions_skip_injected_tokens():
    assert GenerationRecord.model_validate(ROW).generated_positions() == [0, 1, 2, 3, 5]


def test_positions_of_segments_out_of_order_or_overlapping_are_sorted_and_unique():
    # segments are usually in order (the fast path); any other layout gives the same answer
    record = GenerationRecord.model_validate(ROW)
    spans = [(5, 6, 2), (0, 3, 1), (2, 4, 1), (4, 4, 2)]  # (start, end, turn)
    segments = [
        record.segments[0].model_copy(update={"start": a, "end": b, "turn": t}) for a, b, t in spans
    ]
    shuffled = record.model_copy(update={"segments": segments})
    assert shuffled.generated_positions() == [0, 1, 2, 3, 5]
    assert shuffled.turn_positions() == {1: [0, 1, 2, 3], 2: [5]}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"continuation_ids": [1]}, "field 'item' missing"),
        ({"item": "x"}, "continuation_ids"),
        (
            {"item": "x", "continuation_ids": [1], "segments": [{"kind": "generated", "end": 3}]},
            "start",
        ),
        (
            {"item": "x", "continuation_ids": [1, 2], "segments": [
                {"kind": "generated", "start": 0, "end": 3}]},
            "runs past the continuation",
        ),
        (
            {"item": "x", "continuation_ids": [1, 2], "segments": [
                {"kind": "generated", "start": 2, "end": 1}]},
            "end 1 < start 2",
        ),
    ],
)  # fmt: skip
def test_bad_transcripts_are_rejected(data, message):
    with pytest.raises(ValueError, match=message):
        GenerationRecord.from_transcript(data)
