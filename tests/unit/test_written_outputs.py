"""A file a stage wrote itself a chunk at a time (`WrittenFile`) and later stages reading a
result CSV from the run folder by chunks (`output_frames`, `RunData.chunks`), as a scored
chat log's windows.csv, turns.csv and logged_conversations.csv are."""

from __future__ import annotations

import pandas as pd
import pytest

from harness.report.load import load_run
from harness.report.log_tallies import logged_chunks, tally_turns
from harness.results import LoggedRow, TurnRow, result_frame
from harness.stages.base import WrittenFile, kept_output, output_frame, output_frames, write_output
from harness.store import write_csv


def _logged(n: int) -> pd.DataFrame:
    rows = [dict(conversation_id=f"c{i}", where=f"log.jsonl:{i + 1}", model="m", task="t",
                 item="01", matched_by="system", sample=i, turns=4, scored_turns=3,
                 failed_turns=i % 3, first_failed_turn=None if i % 3 == 0 else 2,
                 first_failed_check="" if i % 3 == 0 else "language:fr",
                 first_failed_reason="", tool_calls=i, tool_results=0, tool_only_messages=0,
                 skipped_parts=0, metadata='{"team": "a"}', tags="[]")
            for i in range(n)]  # fmt: skip
    return result_frame(LoggedRow, rows)


def test_a_written_file_is_moved_into_place_and_read_back_typed_by_chunks(tmp_path):
    frame = _logged(10)
    hidden = tmp_path / ".logged_conversations.csv.scored"
    write_csv(frame, hidden)
    expected = hidden.read_bytes()
    target = tmp_path / "logged_conversations.csv"
    value = WrittenFile(hidden)
    write_output(target, value)
    assert target.read_bytes() == expected and not hidden.exists()
    kept = kept_output(target, value)
    assert kept == target  # later stages find it in the run folder
    chunks = list(output_frames(LoggedRow, kept, rows=4))
    assert [len(c) for c in chunks] == [4, 4, 2]
    assert chunks[0]["item"].tolist() == ["01"] * 4  # strings stay strings
    assert chunks[0]["first_failed_check"].tolist() == ["", "language:fr", "language:fr", ""]
    whole = output_frame(LoggedRow, kept)
    assert whole["tool_calls"].sum() == 45 and len(whole) == 10
    assert kept_output(target, frame) is frame  # a value held in memory stays the value
    assert output_frame(LoggedRow, None).empty
    header_only = tmp_path / "empty.csv"
    write_csv(result_frame(LoggedRow, []), header_only)
    (empty,) = output_frames(LoggedRow, header_only, rows=4)
    assert empty.empty and list(empty.columns) == LoggedRow.columns()


def test_an_unknown_value_has_no_writer(tmp_path):
    with pytest.raises(TypeError, match="no writer for int"):
        write_output(tmp_path / "x.csv", 3)


def _turns(conversations: int) -> pd.DataFrame:
    rows = []
    for c in range(conversations):
        for turn in range(1, 2 + c % 4):
            for check in ("language:fr", "ifeval:no_comma"):
                passed = [True, False, None][(c + turn + len(check)) % 3]
                rows.append(dict(run_id="r", model="m", task="t", item="01", policy="logged",
                                 history="logged", seed=0, sample=c, conversation_id=f"c{c}",
                                 turn=turn, pressure=False, t_start=1, t_end=2, tokens=2,
                                 check=check, value=0.5, passed=passed,
                                 reason="why, so"))  # fmt: skip
    return result_frame(TurnRow, rows)


def test_a_scored_log_s_turns_read_by_chunks_tally_as_the_whole_file(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    write_csv(_turns(30), run / "turns.csv")
    write_csv(_logged(30), run / "logged_conversations.csv")
    (run / "manifest.json").write_text('{"command": "score"}')
    held, chunked = load_run(run), load_run(run, chunked=True)
    assert "turns.csv" in held.frames and "turns.csv" in chunked.paths
    assert "turns.csv" not in chunked.frames and "turns.csv" in chunked.readable
    whole = tally_turns(logged_chunks(held), worst=5)
    by_rows = tally_turns(_chunks_of(chunked, rows=7), worst=5)
    pd.testing.assert_frame_equal(by_rows.firsts, whole.firsts)
    assert len(whole.firsts) == 5 and whole.firsts["turn"].is_monotonic_increasing
    assert whole.firsts["conversation_id"].tolist()[:2] == ["c0", "c12"]  # ids as text
    for name in ("failing", "conversations", "by_turn", "by_check", "undecided"):
        assert getattr(by_rows, name) == getattr(whole, name), name
    assert whole.conversations == 30


def _chunks_of(data, rows: int):
    """`logged_chunks` reading turns.csv `rows` rows at a time: conversations of 2 to 8 rows
    cross the chunks' edges."""
    import harness.report.load as load

    saved, load.CHUNK_ROWS = load.CHUNK_ROWS, rows
    try:
        chunks = list(logged_chunks(data))
    finally:
        load.CHUNK_ROWS = saved
    assert len(chunks) > 5 and all(c["conversation_id"].nunique() >= 1 for c in chunks)
    ids = [c["conversation_id"] for c in chunks]
    assert sum(len(set(a) & set(b)) for a, b in zip(ids, ids[1:], strict=False)) == 0
    return chunks
