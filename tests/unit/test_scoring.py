"""Windows over generated tokens, row building, the pure-text API and adherence metrics."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from harness.config.run import ScoringConfig, TaskSuite
from harness.errors import UserError
from harness.scoring import rows_frame, score_records, split_windows, window_fails
from harness.scoring.adherence import adherence_summary, curve_metrics, first_failures
from harness.scoring.curves import adherence_curves
from harness.scoring.passes import window_passes
from harness.scoring.survival import survival_curves
from harness.scoring.windows import _STRETCH_TEXTS, response_text, stretch_texts, window_bounds
from harness.text.records import GenerationRecord


class WordTokenizer:
    """Token id i decodes to VOCAB[i]; a list of ids decodes to the words joined by spaces."""

    VOCAB = ["the", "cat", "sat", ".", "REMIND", "le", "chat", "dort", "\n", "a,b"]

    def batch_decode(self, batches, skip_special_tokens=True):
        return [" ".join(self.VOCAB[i] for i in ids) for ids in batches]

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [self.VOCAB.index(w) for w in text.split()]}


def _record(ids, segments=None, **extra):
    data = {"item": "x", "continuation_ids": ids, "segments": segments, **extra}
    return GenerationRecord.from_transcript(data)


def test_fixed_windows_skip_injected_tokens_and_report_positions():
    ids = [0, 1, 2, 3, 4, 4, 0, 1, 2, 3]  # 4 generated, 2 injected, 4 generated
    segments = [
        {"kind": "generated", "start": 0, "end": 4},
        {"kind": "injected", "start": 4, "end": 6},
        {"kind": "generated", "start": 6, "end": 10},
    ]
    windows = split_windows(_record(ids, segments), WordTokenizer(), size=3)
    assert [(w.t_start, w.t_end, w.t_gen_start, w.n_tokens) for w in windows] == [
        (1, 3, 1, 3),
        (4, 8, 4, 3),  # straddles the injection: positions 4, 7, 8 (1-based)
        (9, 10, 7, 2),
    ]
    assert "REMIND" not in " ".join(w.text for w in windows)
    assert windows[1].text == ".\nthe cat"  # stretches on either side of a reminder


class CountingTokenizer(WordTokenizer):
    def __init__(self):
        self.decoded: list[list[int]] = []

    def batch_decode(self, batches, skip_special_tokens=True):
        self.decoded += [list(ids) for ids in batches]
        return super().batch_decode(batches, skip_special_tokens)


def test_a_stretch_is_decoded_once_per_record_and_forgotten_with_it():
    ids = [0, 1, 2, 3, 4, 5, 6, 7]
    segments = [
        {"kind": "generated", "start": 0, "end": 4},
        {"kind": "injected", "start": 4, "end": 5},
        {"kind": "generated", "start": 5, "end": 8},
    ]
    record, tokenizer = _record(ids, segments), CountingTokenizer()
    # the response text and windows holding whole stretches need the same two decodes
    assert response_text(record, tokenizer) == "the cat sat .\nle chat dort"
    windows = split_windows(record, tokenizer, size=4)
    assert [w.text for w in windows] == ["the cat sat .", "le chat dort"]
    assert stretch_texts(record, tokenizer, [(5, 7), (1, 2)]) == ["le chat dort", "cat sat"]
    assert tokenizer.decoded == [[0, 1, 2, 3], [5, 6, 7], [1, 2]]
    key = id(record)
    del record
    assert key not in _STRETCH_TEXTS


def test_restatement_tokens_are_excluded():
    ids = [5, 6, 7, 0, 1, 2]
    segments = [
        {"kind": "restatement", "start": 0, "end": 3},
        {"kind": "generated", "start": 3, "end": 6},
    ]
    (window,) = split_windows(_record(ids, segments), WordTokenizer(), size=64)
    assert window.text == "the cat sat" and window.t_start == 4 and window.t_gen_start == 1


def test_sentence_aligned_windows_close_at_sentence_ends():
    ends = [False, False, True, False, False, False, True, False, False, False, False, False]
    bounds = window_bounds(list(range(12)), 4, ends)
    # close at the first sentence end once >= 3 tokens, at 6 tokens at the latest
    assert bounds == [(0, 3), (3, 7), (7, 12)]
    assert window_bounds(list(range(5)), 2) == [(0, 2), (2, 4), (4, 5)]


def test_segment_past_the_end_is_rejected():
    with pytest.raises(ValueError, match="runs past the continuation"):
        _record([0, 1], [{"kind": "generated", "start": 0, "end": 3}])


SUITE = TaskSuite.model_validate(
    {
        "suite": "demo",
        "items": [
            {
                "id": "x",
                "system": "s",
                "user": "u",
                "reminder": "r",
                "restatement": "t",
                "checks": [
                    {"type": "regex_must_not", "pattern": "chat", "name": "no-chat"},
                    {"type": "persona", "name": "cat", "scope": "response"},
                ],
            }
        ],
    }
)


def test_score_records_rows_per_window_and_response():
    ids = [0, 1, 2, 3, 5, 6, 7, 3]
    rows = score_records(
        [_record(ids, model="m", sample=2)], SUITE, WordTokenizer(), ScoringConfig(window=4)
    )
    frame = rows_frame(rows)
    windows = frame[frame["scope"] == "window"]
    assert windows["window"].tolist() == [0, 1]
    assert windows["passed"].tolist() == [True, False]
    assert windows["t_start"].tolist() == [1, 5] and windows["t_end"].tolist() == [4, 8]
    response = frame[frame["scope"] == "response"].iloc[0]
    assert (
        response["window"] == -1
        and response["passed"]
        and response["check"] == "persona:cat@response"
    )
    assert set(frame["task"]) == {"demo"} and set(frame["sample"]) == {2}


def test_rows_as_dicts_are_the_models_dumps_in_the_same_order():
    records = [_record([0, 1, 2, 3, 5, 6, 7, 3], model="m", sample=k) for k in (2, 0, 1)]
    config = ScoringConfig(window=3)
    models = score_records(records, SUITE, WordTokenizer(), config)
    dicts = score_records(records, SUITE, WordTokenizer(), config, as_dicts=True)
    assert all(type(d) is dict for d in dicts)
    # t_unit is every row's default (model tokens), filled where the rows are framed
    assert dicts == [m.model_dump(exclude={"t_unit"}) for m in models]
    assert rows_frame(dicts).to_csv() == rows_frame(models).to_csv()


def test_score_records_unknown_item_is_a_user_error():
    record = GenerationRecord.from_transcript({"item": "nope", "continuation_ids": [0]})
    with pytest.raises(UserError, match="no such item"):
        score_records([record], SUITE, WordTokenizer())


def test_window_fails_on_a_violating_window_only():
    item = SUITE.items[0]  # window scope: no `chat`; the response-scope persona is not asked
    assert window_fails(item, "le chat dort") is True
    assert window_fails(item, "the cat sat") is False


def test_window_fails_is_undetermined_when_no_check_can_decide():
    raw = SUITE.items[0].model_dump()
    raw["checks"] = [{"type": "script", "script": "Cyrillic", "min_letters": 20}]
    item = TaskSuite.model_validate({"suite": "demo", "items": [raw]}).items[0]
    assert window_fails(item, "too short") is None  # 8 letters < 20
    assert window_fails(item, "the cat sat on the mat all day long") is True


# ---------------------------------------------------------------- adherence
def _windows_frame(passes: dict[int, list[bool | None]], width: int = 64) -> pd.DataFrame:
    rows = []
    for sample, verdicts in passes.items():
        for k, ok in enumerate(verdicts):
            rows.append(
                dict(run_id="r", model="m", task="t", item="i", policy="none", seed=0,
                     sample=sample, window=k, t_start=k * width + 1, t_end=(k + 1) * width,
                     t_gen_start=k * width + 1, check="c", scope="window",
                     value=float("nan") if ok is None else float(ok), passed=ok, reason="")
            )  # fmt: skip
    return pd.DataFrame(rows)


def test_adherence_curve_auc_half_life_final():
    frame = _windows_frame(
        {
            0: [True, True, True, False],
            1: [True, True, False, False],
            2: [True, False, False, False],
            3: [True, True, None, False],  # undetermined window left out at t = 129
        }
    )
    curve = adherence_curves(frame)
    assert curve["t"].tolist() == [1, 65, 129, 193]
    assert curve["a"].tolist() == pytest.approx([1.0, 0.75, 1 / 3, 0.0])
    assert curve["n"].tolist() == [4, 4, 3, 4]
    assert (curve["a_low"] <= curve["a"]).all() and (curve["a"] <= curve["a_high"]).all()
    # pointwise exact binomial: 4 of 4 at t = 1, 0 of 4 at t = 193
    assert curve["a_low"].iloc[0] == pytest.approx(0.025**0.25)
    assert curve["a_high"].iloc[-1] == pytest.approx(1 - 0.025**0.25)
    assert set(curve["method"]) == {"clopper-pearson"}
    (summary,) = adherence_summary(frame)
    # each sample's own share of passing positions (sample 3 over its 3 decided windows)
    assert summary.auc == pytest.approx((0.75 + 0.5 + 0.25 + 2 / 3) / 4)
    assert summary.half_life == 129 and not summary.half_life_censored
    assert summary.final == 0.0
    assert summary.auc_low <= summary.auc <= summary.auc_high
    assert summary.auc_method == "betting" and summary.auc_n == 4  # per-sample AUCs in (0, 1)
    assert summary.final_method == "clopper-pearson" and summary.final_high < 0.61


def test_half_life_censored_when_never_halved():
    metrics = curve_metrics(np.array([1, 65, 129]), np.array([1.0, 0.8, 0.6]))
    assert metrics["half_life_censored"] and math.isnan(metrics["half_life"])
    assert metrics["final"] == pytest.approx(0.6)


def test_survival_kaplan_meier_median_and_censoring():
    frame = _windows_frame(
        {0: [True, False], 1: [True, True, False], 2: [True, True, True, True], 3: [False]}
    )
    durations = first_failures(window_passes(frame))
    assert durations.sort_values("sample")["duration"].tolist() == [65, 129, 256, 1]
    assert durations.sort_values("sample")["event"].tolist() == [True, True, False, True]
    (summary,) = adherence_summary(frame)
    # KM: S drops to 3/4 at 1, 2/4 at 65 -> median 65
    assert summary.survival_median == 65 and summary.failures == 3 and summary.censored == 1
    # 4 samples cannot bound the median: F(t) <= 1/2 is never excluded, F(t) < 1/2 neither;
    # the low end is the first position (no failure comes before t = 1), not 0
    assert (summary.survival_median_low, summary.survival_median_high) == (1.0, math.inf)
    curve = survival_curves(window_passes(frame))
    assert curve["survival"].iloc[-1] == pytest.approx(0.25)
    assert (curve["survival_low"] <= curve["survival"]).all()
    assert (curve["survival"] <= curve["survival_high"]).all()


def test_survival_median_order_statistic_interval():
    # 20 samples failing at windows 0..19 in turn (one each), none censored: the exact
    # distribution-free median interval is [x_(6), x_(15)] (P(Bin(20, 1/2) <= 5) = 0.021)
    frame = _windows_frame({s: [True] * s + [False] for s in range(20)}, width=1)
    (summary,) = adherence_summary(frame)
    starts = [k + 1 for k in range(20)]  # t_start of window k is k * 1 + 1
    assert summary.survival_median == starts[9]
    assert (summary.survival_median_low, summary.survival_median_high) == (starts[4], starts[14])
    assert summary.survival_median_method == "binomial bounds (clopper-pearson)"


def test_sticky_four_of_four_does_not_clear_a_high_bound():
    # the case: 4 of 4 samples pass every window; a gate `auc low >= 0.8` must not pass
    (summary,) = adherence_summary(_windows_frame({s: [True] * 4 for s in range(4)}))
    assert summary.auc == 1.0 and summary.auc_method == "clopper-pearson"
    assert summary.auc_low == pytest.approx(0.025**0.25) and summary.auc_low < 0.8
    (seq,) = adherence_summary(_windows_frame({s: [True] * 4 for s in range(4)}), anytime=True)
    assert seq.auc_method == "beta-binomial-cs+betting-cs" and seq.auc_low < summary.auc_low


def test_half_life_interval_inverts_a_simultaneous_band():
    # checkpoints over [1, 256]: 1, 33, 65, ..., 225; the band is Bonferroni over all 8
    halving = _windows_frame({s: [True, True, s % 2 == 0, False] for s in range(16)})
    (summary,) = adherence_summary(halving)
    assert summary.half_life == 193 and not summary.half_life_censored
    # a(129) = 1/2 may be below a(1)/2 on the band; 0 of 16 at 193 is surely below it
    assert (summary.half_life_low, summary.half_life_high) == (129, 193)
    assert summary.half_life_method == (
        "band inversion (clopper-pearson, bonferroni over 8 points)"
    )
    # 10 of 16 samples hold throughout: never halves; the band allows a halving at 193
    mostly_holding = _windows_frame({s: [True, True, True, s >= 6] for s in range(16)})
    (summary,) = adherence_summary(mostly_holding)
    assert summary.half_life_censored and math.isnan(summary.half_life)
    assert summary.half_life_low == 193 and math.isinf(summary.half_life_high)
    # 64 samples that all fail from the third window: decided at 129 exactly
    decided = _windows_frame({s: [True, True, False, False] for s in range(64)})
    (summary,) = adherence_summary(decided)
    assert (summary.half_life_low, summary.half_life, summary.half_life_high) == (129,) * 3
    # never halving for sure: the band keeps a(t) above a(first)/2 everywhere
    (summary,) = adherence_summary(_windows_frame({s: [True] * 4 for s in range(64)}))
    assert math.isinf(summary.half_life_low) and math.isinf(summary.half_life_high)


def test_the_curve_s_counted_a_t_is_the_float_matrix_s_exactly():
    # random samples of uneven windows, undecided ones and overlaps (a later row wins), so the
    # grid has points some samples do not cover: the int8 counts must give nanmean's a(t),
    # point_band's interval and n bit for bit
    from harness.scoring.adherence import _nanmean, point_band
    from harness.scoring.curves import _curve
    from harness.scoring.passes import pass_matrix

    rng = np.random.default_rng(7)
    rows = []
    for sample in range(60):
        t = 1
        for k in range(rng.integers(1, 9)):
            width = int(rng.integers(5, 70))
            ok = [True, False, None][rng.integers(0, 3)]
            start = max(1, t - int(rng.integers(0, 4)))  # overlaps the previous window
            rows.append(
                dict(run_id="r", model="m", task="t", item="i", policy="none", seed=0,
                     sample=sample, window=k, t_start=start, t_end=start + width - 1,
                     t_gen_start=start, check="c", scope="window", value=0.0, passed=ok,
                     reason="")
            )  # fmt: skip
            t = start + width
    (_, cond), *_ = window_passes(pd.DataFrame(rows)).groupby(["model", "task", "item", "policy"])
    grid, a, low, high, n, method = _curve(cond, 0.95, anytime=False)
    ref_grid, matrix = pass_matrix(cond)
    ref_low, ref_high, ref_method = point_band(matrix, level=0.95)
    assert (n < 60).any()  # some points are not covered by every sample
    np.testing.assert_array_equal(grid, ref_grid)
    np.testing.assert_array_equal(a, _nanmean(matrix, 0))
    np.testing.assert_array_equal(low, ref_low)
    np.testing.assert_array_equal(high, ref_high)
    np.testing.assert_array_equal(n, (~np.isnan(matrix)).sum(axis=0))
    assert method == ref_method


def test_a_log_s_rows_already_in_key_order_are_kept_and_others_sorted():
    from harness.scoring.spill import in_key_order as _in_order

    keys = ["item", "sample"]
    ordered = pd.DataFrame({"item": ["a", "a", "b"], "sample": [0, 1, 0], "x": [1, 2, 3]})
    assert _in_order(ordered, keys) is ordered  # no copy
    mixed = pd.DataFrame({"item": ["b", "a", "a", "b"], "sample": [0, 1, 0, 0], "x": [1, 2, 3, 4]})
    expected = mixed.sort_values(keys, kind="stable", ignore_index=True)
    pd.testing.assert_frame_equal(_in_order(mixed, keys), expected)
    assert _in_order(mixed, keys)["x"].tolist() == [3, 2, 1, 4]  # stable: ties keep file order
