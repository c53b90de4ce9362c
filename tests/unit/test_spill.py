"""A chat log's files written a chunk at a time (harness.scoring.spill) and its analysis files
from the chunks' digests (WindowDigest, TurnDigest): the same bytes as the whole frames give."""

from __future__ import annotations

import io
import random

import pandas as pd

from harness.analysis.conversations import (
    conversation_summary,
    merge_turn_digests,
    turn_curves,
    turn_digest,
)
from harness.results import LoggedRow, TurnRow, WindowRow, result_frame
from harness.scoring.digest import (
    chunk_digest,
    gather_chunk_digests,
    merge_chunk_digests,
    window_digest,
)
from harness.scoring.io import adherence_frames
from harness.scoring.spill import TURN_KEYS, WINDOW_KEYS, SpilledCsv, in_key_order
from harness.store import write_csv

REASONS = ["", "a, b", 'said "non"', "two\nlines", "é ü"]


def _windows(conversations: int, items=("fr", "en"), seed: int = 0) -> pd.DataFrame:
    """windows.csv rows of logged conversations in file order: items interleaved, each with
    its own samples 0, 1, ...; per reply window rows of two checks (some undecided) and a
    response-scope row."""
    rng = random.Random(seed)
    rows, samples = [], dict.fromkeys(items, 0)
    for c in range(conversations):
        item = items[c % len(items)] if c % 5 else items[-1]
        sample, samples[item] = samples[item], samples[item] + 1
        t = 1
        for window in range(rng.randint(1, 6)):
            width = rng.randint(5, 70)
            base = dict(run_id="r", model="m", task="t", item=item, policy="logged", seed=0,
                        sample=sample, window=window, t_start=t, t_end=t + width - 1,
                        t_gen_start=t)  # fmt: skip
            for check in ("language:fr", "ifeval:no_comma"):
                passed = rng.choice([True, False, None])
                value = float("nan") if passed is None else rng.random() / 3
                rows.append({**base, "check": check, "scope": "window", "value": value,
                             "passed": passed, "reason": rng.choice(REASONS)})  # fmt: skip
            t += width + rng.randint(0, 9)
        rows.append({**base, "window": -1, "check": "whole", "scope": "response",
                     "value": 1.0, "passed": rng.random() < 0.7, "reason": ""})  # fmt: skip
    return result_frame(WindowRow, rows)


def _turns(conversations: int, items=("fr", "en"), seed: int = 1) -> pd.DataFrame:
    """turns.csv rows of logged conversations in file order, items interleaved."""
    rng = random.Random(seed)
    rows, samples = [], dict.fromkeys(items, 0)
    for c in range(conversations):
        item = items[c % len(items)]
        sample, samples[item] = samples[item], samples[item] + 1
        for turn in range(1, rng.randint(2, 7)):
            for check in ("language:fr", "ifeval:no_comma"):
                passed = rng.choice([True, True, False, None])
                rows.append(dict(run_id="r", model="m", task="t", item=item, policy="logged",
                                 history="logged", seed=0, sample=sample,
                                 conversation_id=f"conv-{c}", turn=turn, pressure=turn == 3,
                                 t_start=turn * 10, t_end=turn * 10 + 5, tokens=6, check=check,
                                 value=float("nan") if passed is None else float(passed),
                                 passed=passed, reason=rng.choice(REASONS)))  # fmt: skip
    return result_frame(TurnRow, rows)


def _chunks(frame: pd.DataFrame, size: int, keys=("item", "sample")) -> list[pd.DataFrame]:
    """The frame's conversations `size` at a time, in file order (a conversation's rows
    together, as `score_logged`'s chunks)."""
    ids = frame[list(keys)].apply(tuple, axis=1)
    order = list(dict.fromkeys(ids))
    chunk_of = {key: index // size for index, key in enumerate(order)}
    labels = ids.map(chunk_of)
    return [frame[labels == c].reset_index(drop=True) for c in sorted(set(labels))]


def _csv(frame: pd.DataFrame) -> bytes:
    handle = io.StringIO()
    frame.to_csv(handle, index=False, float_format="%.9g")
    return handle.getvalue().encode()


def _spilled(tmp_path, row, keys, chunks) -> bytes:
    spill = SpilledCsv(tmp_path / "parts", row, keys)
    for chunk in chunks:
        spill.add(chunk)
    out = spill.finish(tmp_path / f"joined-{row.file}")
    assert not list((tmp_path / "parts").glob("*"))  # the parts are removed
    return out.read_bytes()


def test_interleaved_items_merge_to_the_sorted_frame_s_bytes(tmp_path):
    windows = _windows(90)
    expected = tmp_path / "expected.csv"
    write_csv(in_key_order(windows, WINDOW_KEYS), expected)
    chunks = _chunks(windows, 7)
    spill = SpilledCsv(tmp_path / "parts", WindowRow, WINDOW_KEYS)
    for chunk in chunks:
        spill.add(chunk)
    assert not spill.in_order  # the merge, not the concatenation, joins these
    assert spill.finish(tmp_path / "joined.csv").read_bytes() == expected.read_bytes()
    turns = _turns(40)
    write_csv(in_key_order(turns, TURN_KEYS), expected)
    got = _spilled(tmp_path, TurnRow, TURN_KEYS, _chunks(turns, 3))
    assert got == expected.read_bytes()
    assert b'"two\nlines"' in got and b'"said ""non"""' in got  # quoted as pandas quotes


def test_one_item_s_chunks_are_concatenated_and_no_rows_is_the_header(tmp_path):
    windows = _windows(30, items=("fr",))
    expected = tmp_path / "expected.csv"
    write_csv(in_key_order(windows, WINDOW_KEYS), expected)  # each sample's -1 row first
    spill = SpilledCsv(tmp_path / "parts", WindowRow, WINDOW_KEYS)
    for chunk in _chunks(windows, 4):
        spill.add(chunk)
    assert spill.in_order
    assert spill.finish(tmp_path / "joined.csv").read_bytes() == expected.read_bytes()
    write_csv(result_frame(WindowRow, []), expected)
    empty = result_frame(WindowRow, [])
    assert _spilled(tmp_path, WindowRow, WINDOW_KEYS, [empty, empty]) == expected.read_bytes()


def test_file_order_rows_stay_in_file_order(tmp_path):
    rows = [dict(conversation_id=f"c{i}", where=f"log:{i}", model="m", task="t",
                 item="b" * (i % 2 + 1), matched_by="system", sample=i // 2, turns=3,
                 scored_turns=3, failed_turns=i % 3,
                 first_failed_turn=None if i % 3 == 0 else 1, first_failed_check="",
                 first_failed_reason="", tool_calls=0, tool_results=0, tool_only_messages=0,
                 skipped_parts=0, metadata="{}", tags="[]") for i in range(9)]  # fmt: skip
    frame = result_frame(LoggedRow, rows)
    expected = tmp_path / "expected.csv"
    write_csv(frame, expected)
    chunks = [result_frame(LoggedRow, rows[i : i + 4]) for i in range(0, 9, 4)]
    assert _spilled(tmp_path, LoggedRow, (), chunks) == expected.read_bytes()


def test_window_digests_of_chunks_give_the_whole_frame_s_adherence_files(tmp_path):
    windows = _windows(120, seed=3)
    whole = adherence_frames(windows)
    chunks = _chunks(windows, 11)
    merged = merge_chunk_digests([chunk_digest(c, tmp_path, str(i)) for i, c in enumerate(chunks)])
    assert not list(tmp_path.iterdir())  # the spilled passes are read and removed
    digests = [chunk_digest(c, tmp_path, str(i)) for i, c in enumerate(chunks)]
    folded = merge_chunk_digests([gather_chunk_digests(digests[:4]), *digests[4:]])
    for name, frame in adherence_frames(folded).items():  # gathered as they come: the same
        assert _csv(frame) == _csv(whole[name]), name
    parts = adherence_frames(merged)
    assert list(parts) == ["adherence.csv", "adherence_curve.csv", "survival.csv"]
    for name, frame in whole.items():
        assert len(frame) > 1
        assert _csv(parts[name]) == _csv(frame), name
    assert merged.abstain["undecided"].sum() > 0  # some windows no check decided


def test_turn_digests_of_chunks_give_the_whole_frame_s_turn_files():
    turns = _turns(150, seed=5)
    tokens = pd.DataFrame(
        [dict(model="m", item=i, policy="logged", history="logged", generated=600, injected=0,
              restated=0) for i in ("fr", "en")]
    )  # fmt: skip
    digests = [turn_digest(c) for c in _chunks(turns, 13)]
    merged = merge_turn_digests(digests)
    assert _csv(turn_curves(merged)) == _csv(turn_curves(turns))
    folded = merge_turn_digests([merge_turn_digests(digests[:3]), *digests[3:]])
    assert _csv(turn_curves(folded)) == _csv(turn_curves(turns))
    whole = conversation_summary(turns, tokens)
    assert len(whole) == 3  # two items and their pooled row
    assert _csv(conversation_summary(merged, tokens)) == _csv(whole)


def test_a_t_counted_a_few_samples_at_a_time_is_the_whole_matrix_s(monkeypatch):
    from harness.scoring import passes

    windows = _windows(200, seed=7)
    whole = adherence_frames(windows)["adherence_curve.csv"]
    monkeypatch.setattr(passes, "_SAMPLES", 7)
    assert _csv(adherence_frames(windows)["adherence_curve.csv"]) == _csv(whole)


def test_kaplan_meier_and_failed_bounds_count_as_the_pairwise_comparisons():
    import numpy as np

    from harness.scoring.survival import failed_bounds, kaplan_meier

    rng = np.random.default_rng(0)
    for trial in range(100):
        d = rng.integers(1, 40, rng.integers(1, 200)).astype(float)
        e = rng.random(len(d)) < 0.6
        if trial % 10 == 0:
            d[0] = np.nan  # never compares: neither at risk nor failed
        times = np.unique(d[e])
        at_risk = (d[None, :] >= times[:, None]).sum(axis=1)
        died = ((d[None, :] == times[:, None]) & e[None, :]).sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            expected = np.cumprod(1 - died / at_risk)
            got_times, got = kaplan_meier(d, e)
        np.testing.assert_array_equal(got_times, times)
        np.testing.assert_array_equal(got, expected)
        grid = np.unique(d)
        by_t = d[None, :] <= grid[:, None]
        low, high = failed_bounds(d, e, grid)
        np.testing.assert_array_equal(low, (by_t & e[None, :]).sum(axis=1))
        np.testing.assert_array_equal(high, by_t.sum(axis=1))


def test_first_failures_of_rows_in_key_order_are_the_groupby_s(monkeypatch):
    from harness.scoring import survival

    passes = window_digest(_windows(80, seed=9)).passes  # in key order: runs of rows
    assert survival.sorted_runs(passes, survival.TASK_CONDITION + survival.RUN_SAMPLE) is not None
    fast = survival.first_failures(passes)
    monkeypatch.setattr(survival, "sorted_runs", lambda *_: None)
    pd.testing.assert_frame_equal(fast, survival.first_failures(passes))
    assert fast["event"].any() and not fast["event"].all()
