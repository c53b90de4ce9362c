"""quality.csv: degeneration counts repeated 4-grams of the generated tokens only; speed and
perplexity are compared with `none` of the same item; pass_rate reads the decided verdicts."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from harness.analysis.quality import degeneration, quality_frame, quality_holds
from harness.results import QualityRow
from harness.text.records import GenerationRecord, Segment, TokenCounts


def _record(policy: str, item: str, generated: list[int], seconds: float, ppl: float | None,
            injected: list[int] = ()) -> GenerationRecord:  # fmt: skip
    ids = [*injected, *generated]
    segments = []
    if injected:
        segments.append(Segment(kind="injected", start=0, end=len(injected), source="reminder"))
    segments.append(Segment(kind="generated", start=len(injected), end=len(ids), source="model"))
    return GenerationRecord(
        model="m", item=item, policy=policy, seed=0, prompt_ids=[1], continuation_ids=ids,
        segments=segments, text="", finish_reason="length", engine="hf", seconds=seconds,
        tokens=TokenCounts(generated=len(generated)), perplexity=ppl,
    )  # fmt: skip


def test_degeneration_is_the_share_of_repeated_ngrams():
    assert degeneration(list(range(20))) == 0
    loop = [1, 2, 3, 4, 5] * 4  # 17 4-grams, 5 distinct
    assert degeneration(loop) == pytest.approx(1 - 5 / 17)
    assert math.isnan(degeneration([1, 2, 3]))


def test_quality_rows_compare_with_none_of_the_same_item():
    records = [
        _record("none", "a", list(range(100)), 1.0, 10.0),
        _record("none", "a", list(range(100, 300)), 2.0, 20.0),
        # injected reminder tokens repeat each other but are not the model's text
        _record("guidance-2", "a", list(range(300, 400)), 1.5, 30.0, injected=[7, 7, 7, 7, 7, 7]),
        _record("guidance-2", "a", [1, 2, 3, 4] * 25, 1.5, 30.0),
    ]
    windows = pd.DataFrame({
        "model": ["m"] * 5, "item": ["a"] * 5,
        "policy": ["none", "none", "guidance-2", "guidance-2", "guidance-2"],
        "passed": [True, False, True, True, None],
    })  # fmt: skip
    written = quality_frame(records, windows)
    assert list(written.columns) == QualityRow.columns()
    frame = written.set_index("policy")
    none, guided = frame.loc["none"], frame.loc["guidance-2"]
    assert none.ms_per_token == pytest.approx(1000 * 3 / 300) and none.time_ratio == 1
    assert guided.time_ratio == pytest.approx((3 / 200) / (3 / 300))
    # token-weighted: exp((100 log 10 + 200 log 20) / 300)
    assert none.perplexity == pytest.approx(
        math.exp((100 * math.log(10) + 200 * math.log(20)) / 300)
    )
    assert guided.perplexity_ratio == pytest.approx(30 / none.perplexity)
    assert none.degeneration == 0
    assert guided.degeneration == pytest.approx((0 + (1 - 4 / 97)) / 2)
    assert none.pass_rate == 0.5 and guided.pass_rate == 1.0


def test_without_none_or_perplexity_the_ratios_are_nan():
    frame = quality_frame(
        [_record("spotlight-0.1", "a", [1, 2, 3, 4, 5], 1.0, None)], pd.DataFrame()
    )
    row = frame.iloc[0]
    assert math.isnan(row.perplexity) and math.isnan(row.time_ratio) and math.isnan(row.pass_rate)


def test_the_quality_rule_reads_perplexity_and_paired_degeneration():
    assert quality_holds(1.4, -0.1) is True
    assert quality_holds(1.6, -0.1) is False  # more than 1.5x as surprising as none's
    assert quality_holds(math.nan, 0.05) is False  # loops shown above none's
    assert quality_holds(math.nan, math.nan) is None


def _paired(policy: str, generated, ppl: float, k: int) -> GenerationRecord:
    return _record(policy, "a", generated, 1.0, ppl).model_copy(update={"sample": k})


def test_a_remedy_that_loops_or_babbles_does_not_hold_its_quality():
    fresh = [list(range(100 * k, 100 * k + 40)) for k in range(8)]
    records = [_paired("none", fresh[k], 10.0, k) for k in range(8)]
    records += [_paired("spotlight-0.3", [1, 2, 3, 4, 5] * 8, 11.0, k) for k in range(8)]
    records += [_paired("guidance-3", fresh[k], 40.0, k) for k in range(8)]
    records += [_paired("guidance-1.5", fresh[k], 12.0, k) for k in range(8)]
    frame = quality_frame(records, pd.DataFrame()).set_index("policy")
    loop = frame.loc["spotlight-0.3"]
    assert loop.degeneration_delta == pytest.approx(1 - 5 / 37)
    assert loop.degeneration_delta_low > 0
    assert frame.loc["guidance-3"].perplexity_ratio == pytest.approx(4.0)
    holds = {p: bool(v) for p, v in frame["quality_holds"].items()}
    assert holds == {"none": True, "spotlight-0.3": False, "guidance-3": False,
                     "guidance-1.5": True}  # fmt: skip


def test_the_report_s_policies_table_shows_each_gain_s_quality():
    from pathlib import Path

    from harness.report.load import RunData
    from harness.report.sections import policies

    rows = [
        dict(model="m", item="a", policy=p, metric="auc", value=v, none_value=0.0, delta=v,
             delta_low=v - 0.2, delta_high=min(v + 0.2, 1.0), n=6, method="clopper-pearson",
             token_overhead=0.0, pareto=True, perplexity_ratio=r, degeneration_delta=0.0,
             quality_holds=h)
        for p, v, r, h in (("none", 0.0, 1.0, True), ("spotlight-0.3", 0.9, 8.24, False))
    ]  # fmt: skip
    html, _ = policies(RunData(run_dir=Path("."), frames={"policies.csv": pd.DataFrame(rows)}))
    assert "perplexity vs none" in html and "quality holds" in html
    assert "<td>8.24x</td><td>no</td>" in html.replace(" ", "")
