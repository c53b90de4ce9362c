"""The attention share's rows, per-turn means, fits and report sentences from synthetic
curves (no model): attention.csv rows at the chosen positions, the uniform reference, the
share's exponent in fits.csv, and the section's reading when the file is absent."""

from __future__ import annotations

import json
import math
import shutil

import numpy as np
import pandas as pd
import pytest

from harness.analysis.attention import attention_rows, reply_share_rows, share_curves, uniform_share
from harness.analysis.fits import FitMember, fit_table
from harness.report.attention import absent_reason, attention_section, dilution_sentence
from harness.report.load import load_run
from harness.results import AttentionRow, AttentionTurnRow, result_frame

P, T = 30, 200


def _arrays(beta: float = 0.6, identical: bool = False) -> dict:
    t = np.arange(1, T + 1, dtype=np.float64)
    share = 0.5 * t**-beta
    rel = 0.8 * t**-0.4
    return {
        "layers": np.array([0, 1, 2]),
        **{m: np.vstack([np.zeros(T), rel, rel]) for m in ("l2", "rel_l2", "cos_dist")},
        "delta_logp": 0.1 * t**-0.5, "kl": 0.01 * t**-1.0,
        "prompt_lens": np.array([P, 12]), "identical": np.asarray(identical),
        "attn_layers": np.array([1, 2]),
        "share_prompt_mean": np.vstack([share, share]),
        "share_prompt_max_head": np.vstack([2 * share, 2 * share]),
        "share_sink_mean": np.full((2, T), 0.7), "share_sink_max_head": np.full((2, T), 0.9),
    }  # fmt: skip


def test_rows_at_positions_with_the_uniform_reference():
    arrays = _arrays()
    ident = {"model": "m", "item": "i", "policy": "none", "sample": 0, "pair": "i/none/0"}
    roles = [(1, "assistant")] * T
    rows = attention_rows(ident, arrays, np.array([1, 16, 200]), roles)
    frame = result_frame(AttentionRow, pd.DataFrame(rows))
    assert len(frame) == 2 * 3 and set(frame.layer) == {1, 2}
    last = frame[(frame.layer == 2) & (frame.t == 200)].iloc[0]
    assert last.uniform == pytest.approx((P - 1) / (P + 200))
    assert last.share_prompt_mean == pytest.approx(0.5 * 200**-0.6)
    assert last.prompt_len == P and last.share_sink_max_head == 0.9
    # a vllm-probed pair carries no shares: no rows, not an error
    plain = {k: v for k, v in arrays.items() if not k.startswith(("attn", "share"))}
    assert attention_rows(ident, plain, np.array([1]), roles) == []


def test_reply_share_rows_average_each_reply():
    arrays = _arrays()
    ident = {"model": "m", "item": "c", "policy": "none", "sample": 0, "pair": "c/none/0"}
    rows = reply_share_rows(ident, arrays, {1: list(range(0, 10)), 2: [50, 51, 52, 999]})
    frame = result_frame(AttentionTurnRow, pd.DataFrame(rows))
    second = frame[(frame.layer == 1) & (frame.turn == 2)].iloc[0]
    assert second.tokens == 3 and second.t_start == 51  # offset 999 lies past the curve
    t = np.array([51, 52, 53])
    assert second.share_prompt_mean == pytest.approx(np.mean(0.5 * t**-0.6))
    assert second.uniform == pytest.approx(np.mean(uniform_share(P, t)))


def test_fits_hold_the_share_exponent_even_for_identical_prompts():
    assert set(share_curves(_arrays())) == {(layer, "share_prompt_mean") for layer in (1, 2)}
    groups = [({"model": "m"}, [FitMember("a", _arrays(0.6)), FitMember("b", _arrays(0.6, True))])]
    fits = fit_table(groups, t_min=16, n_boot_pair=20, n_boot_pooled=20)
    share = fits[(fits.metric == "share_prompt_mean") & (fits.layer == 1)]
    assert share.set_index("pair").alpha.to_dict() == pytest.approx(
        {"a": 0.6, "b": 0.6, "all": 0.6}
    )
    rel = fits[(fits.metric == "rel_l2") & (fits.layer == 1)].set_index("pair").alpha
    assert math.isnan(rel["b"]) and rel["a"] == pytest.approx(0.4)  # identical: no divergence
    assert "share_sink_mean" not in set(fits.metric)  # its level is read off attention.csv


@pytest.mark.parametrize(
    "share, alpha, verdict",
    [
        (0.62, 0.6, "follows dilution"),
        (0.2, 0.8, "not dilution alone"),
        (1.0, 0.3, "outlives its attention"),
    ],
)
def test_dilution_sentence(share, alpha, verdict):
    rows = pd.DataFrame([{"share_exponent": share, "alpha": alpha, "uniform_exponent": 0.7,
                          "sink_share_end": 0.8}])  # fmt: skip
    text = dilution_sentence("m", rows)
    assert verdict in text and "80 %" in text


def test_groups_that_disagree_are_named():
    rows = pd.DataFrame({"group": ["early (layers 1–10)", "late (layers 11–20)"],
                         "share_exponent": [0.38, 0.63], "alpha": [0.41, 0.27],
                         "uniform_exponent": 0.5, "sink_share_end": [0.04, 0.5]})  # fmt: skip
    text = dilution_sentence("m", rows)
    assert "falls faster than the trace" in text
    assert "early 0.38 vs 0.41 (near), late 0.63 vs 0.27." in text


def test_absent_file_says_why(tmp_path):
    from tests.unit.test_report import load_make_run

    run = load_make_run().build_run(tmp_path / "run")
    body, figs = attention_section(load_run(run))
    assert "fig-attention-share" in figs and "follows dilution" in body
    (run / "attention.csv").unlink()
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["probe_backends"] = {"m": "vllm"}
    (run / "manifest.json").write_text(json.dumps(manifest))
    body, figs = attention_section(load_run(run))
    assert figs == {} and "this run probed with vllm" in body
    manifest["config"]["probe"] = {"enabled": False}
    (run / "manifest.json").write_text(json.dumps(manifest))
    assert "probe was off" in absent_reason(load_run(run))
    shutil.rmtree(run)
