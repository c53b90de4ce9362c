"""Probe pieces that need no model: pair specs, inputs, reductions, bias arithmetic, fit table."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest
import torch

from harness.analysis.fits import REASON_ZERO
from harness.analysis.probe_tables import attention_frame, probe_fits, probe_policy
from harness.config.policy_specs import policy_label
from harness.engines.attention_bias import prompt_bias
from harness.errors import UserError
from harness.policies import AttentionBiasPolicy
from harness.probes.arrays import SHARE_METRICS
from harness.probes.divergence import PairDivergence, check_inputs
from harness.probes.head import next_token_gaps, vocab_sliced
from harness.probes.hooks import StateReducer, resolve_layers
from harness.probes.pairs import PairSpec, file_continuation, load_pairs, read_text_arg
from harness.results import FitRow, result_frame


def test_pair_spec_needs_one_complete_kind():
    assert PairSpec(name="x", prompt_a="a", prompt_b="b").is_chat is False
    assert PairSpec(name="x", system_a="a", system_b=":none", user="u").is_chat is True
    with pytest.raises(ValueError, match="either"):
        PairSpec(name="x", prompt_a="a", prompt_b="b", user="u")
    with pytest.raises(ValueError, match="must all be given"):
        PairSpec(name="x", system_a="a", user="u")


def test_load_pairs_reads_files_relative_to_yaml(tmp_path):
    (tmp_path / "sys.txt").write_text("Answer in French.")
    (tmp_path / "p.yaml").write_text(
        "pairs:\n  - {name: fr, system_a: '@sys.txt', system_b: ':default', user: hi,"
        " continuation: gens.jsonl#1}\n"
    )
    (spec,) = load_pairs(tmp_path / "p.yaml")
    assert spec.system_a == "Answer in French."
    assert spec.system_b == ":default"
    assert spec.continuation == str(tmp_path / "gens.jsonl#1")


@pytest.mark.parametrize(
    "body, message",
    [
        ("pairs: []", "non-empty list"),
        ("pairs:\n  - {name: a, prompt_a: x}", r"pairs\[0\]"),
        ("pairs:\n  - {name: a, prompt_a: x, prompt_b: y}\n  - {name: a, prompt_a: x, "
         "prompt_b: z}", "unique"),
        ("pairs: [", "not valid YAML"),
    ],
)  # fmt: skip
def test_load_pairs_errors_are_one_line(tmp_path, body, message):
    (tmp_path / "p.yaml").write_text(body)
    with pytest.raises(UserError, match=message) as info:
        load_pairs(tmp_path / "p.yaml")
    assert "\n" not in str(info.value)


def test_read_text_arg_and_missing_file(tmp_path):
    assert read_text_arg("plain text") == "plain text"
    (tmp_path / "a.txt").write_text("from file")
    assert read_text_arg(f"@{tmp_path / 'a.txt'}") == "from file"
    with pytest.raises(UserError, match="file not found"):
        read_text_arg(f"@{tmp_path / 'missing.txt'}")


def test_record_continuation_uses_stored_ids(tmp_path):
    rows = [{"continuation_ids": [5, 6, 7]}, {"continuation_ids": [9, 8]}]
    path = tmp_path / "gens.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert file_continuation(None, str(path)) == [
        5,
        6,
        7,
    ]  # no tokenizer needed: never re-tokenised
    assert file_continuation(None, f"@{path}#1") == [9, 8]
    with pytest.raises(UserError, match="row 2 out of range"):
        file_continuation(None, f"{path}#2")


def test_resolve_layers():
    assert resolve_layers("all", 5) == [0, 1, 2, 3, 4]
    assert resolve_layers("4,1,1", 5) == [1, 4]
    with pytest.raises(UserError, match="out of range: this model has 0..4"):
        resolve_layers([5], 5)
    with pytest.raises(UserError, match="comma-separated"):
        resolve_layers("1,x", 5)


def test_check_inputs_errors():
    with pytest.raises(UserError, match="empty prompt"):
        check_inputs([], [1], [1, 2], 100)
    with pytest.raises(UserError, match="exceeds the model's context of 10"):
        check_inputs([1] * 4, [1] * 6, [1] * 5, 10)
    check_inputs([1] * 4, [1] * 6, [1] * 4, 10)


@pytest.mark.parametrize("scale", [3.0, 1e-2, 1e-4])
def test_next_token_gaps_float32_match_float64_down_to_tiny_kl(scale):
    """Late-t pairs differ by a hair: KL ~ scale^2 / 2 must still come out right in float32,
    including a constant logit offset between the rows (it cancels in the softmax)."""
    g = torch.Generator().manual_seed(0)
    zb = torch.randn(16, 49152, generator=g, dtype=torch.float64) * 4
    za = zb + scale * torch.randn(16, 49152, generator=g, dtype=torch.float64) + 7.0
    targets = torch.randint(0, 49152, (16,), generator=g)
    la, lb = torch.log_softmax(za, -1), torch.log_softmax(zb, -1)
    kl_ref = (la.exp() * (la - lb)).sum(-1)
    delta_ref = la[torch.arange(16), targets] - lb[torch.arange(16), targets]
    delta, kl = next_token_gaps(torch.stack([za, zb]).float(), targets)
    # float32 logits carry ~1e-7 relative error, which sets the floor for tiny differences
    np.testing.assert_allclose(kl.numpy(), kl_ref.numpy(), rtol=0.01)
    np.testing.assert_allclose(
        delta.numpy(), delta_ref.numpy(), rtol=1e-5, atol=1e-6 + 1e-5 * scale
    )
    assert (kl > 0).all()


@pytest.mark.parametrize("bias", [False, True])
def test_vocab_sliced_head_gives_the_linear_layers_logits(bias):
    # 2500 outputs: two full slices of 1024 and a ragged last one; rows from a strided view,
    # as the probe passes them (a window of positions of both rows)
    torch.manual_seed(0)
    linear = torch.nn.Linear(64, 2500, bias=bias)
    hidden = torch.randn(2, 40, 64)[:, 3:35]
    head = vocab_sliced(linear)
    with torch.no_grad():
        got = head(hidden)
        assert got.shape == (2, 32, 2500)
        torch.testing.assert_close(got, linear(hidden), rtol=1e-6, atol=1e-6)
        linear.weight.mul_(2)  # the weight is read at each call, not captured at creation
        torch.testing.assert_close(head(hidden), linear(hidden), rtol=1e-6, atol=1e-6)


def test_reducer_matches_direct_metrics():
    torch.manual_seed(0)
    reducer = StateReducer([0, 2], width=3, total=6)  # 3 prompt positions, then t = 1..6
    hidden = torch.randn(2, 4, 8)  # (rows A/B, q, d)
    reducer.reduce(2, hidden[:, :3])  # a span of prompt positions only: nothing recorded
    assert reducer.l2.abs().sum() == 0
    reducer.reduce(2, torch.cat([torch.randn(2, 3, 8), hidden[:, :2]], dim=1))  # prompt + t 1..2
    reducer.start = 3 + 2  # the next span starts at t = 3
    reducer.reduce(2, hidden)
    reducer.reduce(1, hidden)  # layer not kept
    a, b = hidden[0].double(), hidden[1].double()
    l2 = (a - b).norm(dim=-1)
    np.testing.assert_allclose(reducer.l2[1, :2], l2[:2], rtol=1e-6)  # skipped the prompt part
    np.testing.assert_allclose(reducer.l2[1, 2:6], l2, rtol=1e-6)
    np.testing.assert_allclose(
        reducer.rel_l2[1, 2:6], l2 / ((a.norm(dim=-1) + b.norm(dim=-1)) / 2), rtol=1e-6
    )
    cos = torch.nn.functional.cosine_similarity(a, b, dim=-1)
    np.testing.assert_allclose(reducer.cos_dist[1, 2:6], 1 - cos, atol=1e-7)
    assert reducer.l2[0].abs().sum() == 0


def test_prompt_bias_values_with_left_padding():
    # row 0: P = 3, no padding; row 1: P = 2 with one pad slot; kv = 6 slots, queries at the
    # last two slots
    positions = torch.tensor([[4, 5], [3, 4]])  # (B, q)
    bias = prompt_bias(positions, 6, torch.tensor([3, 2]), lam=1.0)  # (B, q, kv)
    # row 0, query position 4 = continuation t = 2: prompt keys are slots 0..2
    assert torch.allclose(bias[0, 0, :3], torch.full((3,), math.log(5 / 3)))
    assert bias[0, 0, 3:].abs().sum() == 0
    # row 1, query position 4 = t = 3: prompt keys are slots 1..2 (slot 0 is padding)
    assert torch.allclose(bias[1, 1, 1:3], torch.full((2,), math.log(5 / 2)))
    assert bias[1, 1, 0] == 0 and bias[1, 1, 3:].abs().sum() == 0
    # queries inside the prompt get nothing; lam scales linearly
    assert prompt_bias(torch.tensor([[1]]), 2, torch.tensor([3]), lam=1.0).abs().sum() == 0
    half = prompt_bias(positions, 6, torch.tensor([3, 2]), lam=0.5)
    assert torch.allclose(half, bias / 2)


def _fake(identical: bool, scale: float, shares: bool = False) -> PairDivergence:
    t = np.arange(1, 257, dtype=np.float64)
    curve = 0.0 * t if identical else scale * t**-0.6
    stack = np.stack([0.0 * t, curve])  # layer 0 is all zero by construction
    share = {m: np.stack([0.5 * t**-0.3]) for m in SHARE_METRICS}  # hidden-state index 1
    return PairDivergence(
        layers=[0, 1], l2=stack, rel_l2=stack, cos_dist=stack, delta_logp=curve, kl=curve,
        prompt_lens=(3, 3), identical_prompts=identical,
        attention={"attn_layers": np.array([1]), **share} if shares else {},
    )  # fmt: skip


def test_fit_table_reasons_and_pooled_row():
    curves = [("m", None, "p1", _fake(False, 1.0)), ("m", None, "p2", _fake(False, 2.0)),
              ("m", None, "same", _fake(True, 0.0))]  # fmt: skip
    fits = result_frame(FitRow, probe_fits(curves, t_min=16, n_boot=50))
    assert list(fits.columns) == FitRow.columns()
    row = fits[(fits.pair == "p1/none/0") & (fits.layer == 1) & (fits.metric == "l2")].iloc[0]
    assert row.alpha == pytest.approx(0.6, abs=1e-9) and row.reason == ""
    assert (row["item"], row["policy"]) == ("p1", "none")  # a pair is a run's record of item = name
    same = fits[(fits.item == "same") & (fits.layer == 1) & (fits.metric == "l2")].iloc[0]
    assert math.isnan(same.alpha) and same.reason == "identical prompts"
    zero = fits[(fits.item == "p1") & (fits.layer == 0) & (fits.metric == "l2")].iloc[0]
    assert math.isnan(zero.alpha) and zero.reason == REASON_ZERO
    # pooled over the pairs as a run pools a whole model: item = policy = pair = all
    pooled = fits[(fits.pair == "all") & (fits.layer == 1) & (fits.metric == "l2")]
    assert list(pooled[["item", "policy"]].iloc[0]) == ["all", "all"] and len(pooled) == 1
    assert pooled.alpha.iloc[0] == pytest.approx(0.6, abs=1e-9)  # the identical pair left out
    assert set(fits[fits.layer == -1].metric) == {"abs_delta_logp", "kl"}


def test_a_lam_sweep_is_a_policy_per_lam_pooled_per_policy():
    """--attention-bias: each lam is the run's attention-bias policy (its label, no `lam`
    column); each policy's pairs are pooled, then the whole model, whose rows come last."""
    curves = [("m", lam, pair, _fake(False, scale)) for lam in (0.0, 1.5)
              for pair, scale in (("p", 1.0), ("q", 2.0))]  # fmt: skip
    fits = result_frame(FitRow, probe_fits(curves, t_min=16, n_boot=20))
    assert probe_policy(None) == "none" and probe_policy(1.5) == "attention_bias-1.5"
    assert probe_policy(1.0) == policy_label(AttentionBiasPolicy(lam=1))  # the run's label
    assert set(fits.policy) == {"attention_bias-0", "attention_bias-1.5", "all"}
    pooled = fits[fits.pair == "all"].drop_duplicates(["item", "policy"])
    assert pooled[["item", "policy"]].values.tolist() == [
        ["all", "attention_bias-0"], ["all", "attention_bias-1.5"], ["all", "all"],
    ]  # fmt: skip
    assert set(fits[fits.item == "p"].pair) == {"p/attention_bias-0/0", "p/attention_bias-1.5/0"}
    with pytest.raises(ValueError, match="undeclared column"):
        result_frame(FitRow, fits.assign(lam=1.0))


def _probe_folder(tmp_path, lams=(0.0, 1.0)):
    """harness probe's last two stages over fake curve sets, written into tmp_path."""
    from harness.pipeline import run_stages
    from harness.stages.context import StageContext
    from harness.stages.probe_cli import PROBE_STAGES, ProbedPairs
    from harness.units.probe_plan import ProbePlan, ProbeRequest

    request = ProbeRequest(
        models=["m"], pairs=[PairSpec(name="p", prompt_a="a", prompt_b="b")],
        continuation="x", tokens=256, n_boot=20, lams=list(lams) if lams else None,
    )  # fmt: skip
    plan = ProbePlan(request, [], tmp_path, ids={}, given={})
    ctx = StageContext(plan, None, tmp_path)
    curves = [(model, lam, pair, _fake(False, scale, shares=True))
              for model in ("m", "untrained:m") for lam in (lams or [None])
              for pair, scale in (("p", 1.0), ("q", 2.0))]  # fmt: skip
    ctx.artifacts.set(ProbedPairs, curves)
    run_stages(ctx, PROBE_STAGES[2:], show_progress=False)
    return ctx


def test_probe_tables_and_fits_stages_write_a_runs_own_files(tmp_path):
    """harness probe's last two stages: every file they write has exactly the columns of the
    run's row model (a pair a record, sample 0, turn 1, role assistant), floats in the
    schema's format."""
    import pandas as pd

    from harness.results import PROBE_FILES, AttentionRow, DivergenceRow, NextTokenRow

    ctx = _probe_folder(tmp_path)
    assert sorted(ctx.artifacts.files()) == sorted(PROBE_FILES)
    want = {"divergence.csv": DivergenceRow, "nexttoken.csv": NextTokenRow,
            "attention.csv": AttentionRow, "fits.csv": FitRow}  # fmt: skip
    assert want == PROBE_FILES
    for name, row in PROBE_FILES.items():
        frame = pd.read_csv(tmp_path / name, keep_default_na=False)
        assert list(frame.columns) == row.columns(), name
        if "sample" in frame:
            assert set(frame["sample"]) == {0}, name
            assert (frame.pair == frame.item + "/" + frame.policy + "/0").all(), name
        if "role" in frame:
            assert set(frame.turn) == {1} and set(frame.role) == {"assistant"}, name
    div = pd.read_csv(tmp_path / "divergence.csv")
    assert len(div) == 2 * 2 * 2 * 2 * 256  # models x lams x pairs x layers x every t
    assert set(div.policy) == {"attention_bias-0", "attention_bias-1"}
    assert len(pd.read_csv(tmp_path / "attention.csv")) == 2 * 2 * 2 * 256
    line = (tmp_path / "divergence.csv").read_text().splitlines()[-1]
    cos_dist = f"{_fake(False, 2.0).cos_dist[1, -1]:.9g}"
    assert line.split(",")[-3:] == [cos_dist, "False", "tokens"]  # the probe counts model tokens
    bare = attention_frame([("m", None, "p", _fake(False, 1.0))])  # no shares: header only
    assert bare.empty and list(bare.columns) == AttentionRow.columns()


def test_the_report_reads_a_probe_folder_as_a_runs(tmp_path):
    """`harness report DIR` on a probe folder: its divergence, alpha and attention sections
    draw from the probe's files (not "not usable"), alpha from the model's pooled rows."""
    from harness.report import render_report

    _probe_folder(tmp_path, lams=None)
    page = render_report(tmp_path).read_text(encoding="utf-8")
    assert "is not usable" not in page
    for figure in ("fig-divergence", "fig-alpha", "fig-attention-share"):
        assert f'id="{figure}"' in page, figure
    assert "decays like t^-α: α = 0.6" in page  # the fakes' exponent, read from fits.csv


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("-1", "finite numbers >= 0"),  # no attention-bias policy has a negative strength
        ("0.1234567,0.1234568", "two values label as one policy (attention_bias-0.123457, "),
    ],
)
def test_lams_the_files_could_not_tell_apart_are_refused(value, message):
    from harness.units.probe_plan import _parse_lams

    assert _parse_lams("1,0,1.0,0.25") == [0.0, 0.25, 1.0]
    with pytest.raises(UserError, match=re.escape(message)):
        _parse_lams(value)
