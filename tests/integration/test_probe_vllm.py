"""The vllm probe backend against the hf backend on the embedded model (float32, CPU).

Slow: shares the session's one probing engine (`vllm_probe`, ~40-60 s to start) and runs the
hf probe of a 1024-token pair (~10-40 s on 2 cores).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]

MODEL = "smollm2-135m-instruct"
DOCS = Path(__file__).parents[2] / "docs" / "architecture.md"


def _rel_diff(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """|got - want| / |want|, 0 where both are exactly 0 (layer 0: equal embeddings)."""
    both_zero = (got == 0) & (want == 0)
    return np.where(both_zero, 0.0, np.abs(got - want) / np.maximum(np.abs(want), 1e-300))


def _alphas(curves: np.ndarray) -> np.ndarray:
    from harness.analysis.powerlaw import fit_alpha

    t = np.arange(1, curves.shape[-1] + 1)
    return np.array([fit_alpha(t, row, n_boot=10).alpha for row in np.atleast_2d(curves)])


@pytest.fixture(scope="module")
def pair(hf_embedded_model):
    """A chat pair (French system prompt vs none) and 1024 tokens of natural English text."""
    from harness.probes.pairs import encode_text
    from harness.text.chat import ChatFormat

    _, tokenizer = hf_embedded_model
    chat = ChatFormat(tokenizer)
    user = "Tell me how this evaluation harness works."
    cont = encode_text(tokenizer, DOCS.read_text())
    assert len(cont) >= 1024
    return chat.prompt_ids("Always answer in French.", user), chat.prompt_ids(None, user), cont


def test_vllm_backend_agrees_with_hf_on_a_1024_token_pair(hf_embedded_model, vllm_probe, pair):
    from harness.probes.divergence import pair_divergence

    model, _ = hf_embedded_model
    a, b, cont = pair[0], pair[1], pair[2][:1024]
    hf = pair_divergence(model, a, b, cont)
    vl = vllm_probe.pair_divergence(a, b, cont)
    assert vl.layers == hf.layers == list(range(31)) and vl.rel_l2.shape == (31, 1024)
    assert not vl.rel_l2[0].any() and not hf.rel_l2[0].any()  # l = 0: equal embeddings
    # rel_l2 within 1e-3 relative, plus float32's floor: two correct float32 forwards (vLLM's
    # CPU kernels vs transformers') put ~1e-6 of the state norm into each state, and rel_l2
    # is in units of that norm. It matters only at layer 1 late in c, where rel_l2 ~ 3e-4:
    # there vLLM vs hf differ by up to 2.8e-3 relative, and hf itself moves by 4.6e-4 between
    # a whole and a chunked forward of the same pair (measured on this pair).
    gap = np.abs(vl.rel_l2 - hf.rel_l2) - 1e-3 * np.abs(hf.rel_l2)
    worst = np.unravel_index(gap.argmax(), gap.shape)
    assert gap.max() <= 2e-6, f"rel_l2 off by {gap.max():.2e} beyond 1e-3 at (l, t-1) {worst}"
    # layers >= 2, where rel_l2 stays far above that floor: the relative bound alone, with a 2x
    # margin for the CPU. The worst cell measured 0.80e-3 here and 1.01e-3 on the CI machine
    # (another vector width reorders float32 sums), so 1e-3 alone was the noise, not a bound.
    rel = _rel_diff(vl.rel_l2, hf.rel_l2)[2:]
    assert rel.max() <= 2e-3, f"layers >= 2: rel_l2 off by {rel.max():.2e} relative"
    assert np.median(rel) <= 1e-4  # the typical state agrees far closer (median 8.5e-6 here)
    for metric in ("rel_l2", "l2", "cos_dist"):
        gap = np.abs(_alphas(getattr(vl, metric)[1:]) - _alphas(getattr(hf, metric)[1:]))
        assert gap.max() <= 0.005, f"{metric}: alpha differs by {gap.max():.2e}"
    kl = _rel_diff(vl.kl, hf.kl)
    assert kl.max() <= 0.01, f"KL: rel diff {kl.max():.2e} at t = {kl.argmax() + 1}"
    # |delta log p| within 1 % where it is above float32's noise: logits of ~20 carry ~1e-5
    dlogp = np.abs(np.abs(vl.delta_logp) - np.abs(hf.delta_logp))
    bound = np.maximum(0.01 * np.abs(hf.delta_logp), 1e-4)
    assert (dlogp <= bound).all(), f"|delta_logp|: off by {dlogp.max():.2e} at {dlogp.argmax()}"
    means = [np.abs(x.delta_logp).mean() for x in (vl, hf)]
    assert abs(means[0] - means[1]) <= 0.01 * means[1]
    both = np.abs(_alphas(np.vstack([np.abs(vl.delta_logp), vl.kl])))
    assert np.abs(both - np.abs(_alphas(np.vstack([np.abs(hf.delta_logp), hf.kl])))).max() <= 5e-3
    assert list(vllm_probe.states_dir.iterdir()) == []  # every states file deleted


def test_probe_stage_on_vllm_keys_its_units_apart_and_matches_hf(
    hf_embedded_model, vllm_probe, pair, tmp_path
):
    from harness.config.run import RunConfig
    from harness.models import resolve_model
    from harness.stages.probe import baseline_ids, probe_key, probe_stage
    from harness.store import RunStore, get_arrays
    from harness.text.records import GenerationRecord, Segment

    _, tokenizer = hf_embedded_model
    cont = pair[2][:200]
    user = "Tell me how this evaluation harness works."
    record = GenerationRecord(
        model=MODEL, item="x", policy="none", seed=0, prompt_ids=pair[0],
        prompt_messages=[{"role": "system", "content": "Always answer in French."},
                         {"role": "user", "content": user}],
        continuation_ids=cont, segments=[Segment(kind="generated", start=0, end=len(cont))],
        text="", finish_reason="length", engine="vllm",
    )  # fmt: skip
    config = RunConfig.model_validate(
        {"name": "t", "models": [MODEL], "suites": ["s.yaml"], "policies": ["none"],
         "probe": {"layers": [0, 1, 15, 30]}, "generation": {"max_tokens": 64}}
    )  # fmt: skip
    model = resolve_model(MODEL)
    base = baseline_ids(config, tokenizer, record)
    with RunStore(tmp_path / "run") as store:
        on = {name: probe_stage(store, config, [model], [record], backends={MODEL: name})
              for name in ("vllm", "hf")}  # fmt: skip
        keys = {name: probe_key(model, record, base, [0, 1, 15, 30], name) for name in on}
        assert keys["vllm"] != keys["hf"]
        assert all(get_arrays(store, "probe", k) is not None for k in keys.values())
    vl, hf = (on[name][(MODEL, record.key)] for name in ("vllm", "hf"))
    assert vl["layers"].tolist() == hf["layers"].tolist() == [0, 1, 15, 30]
    assert (np.abs(vl["rel_l2"] - hf["rel_l2"]) <= 1e-3 * np.abs(hf["rel_l2"]) + 2e-6).all()
    np.testing.assert_allclose(vl["kl"], hf["kl"], rtol=1e-2)
    assert vllm_probe.is_running()  # the stage reused the session's engine and left it running


def test_probe_command_on_vllm_writes_the_hf_backends_columns(vllm_probe, tmp_path, run_cli):
    text = tmp_path / "cont.txt"
    text.write_text(DOCS.read_text()[:4000])
    tables = {}
    for backend in ("vllm", "hf"):
        out = tmp_path / backend
        code, _, err = run_cli([
            "probe", "--model", MODEL, "--system-a", "Always answer in French.",
            "--system-b", ":none", "--user", "Hi", "--continuation", f"@{text}",
            "--tokens", "96", "--backend", backend, "--out", str(out), "--n-boot", "20",
        ])  # fmt: skip
        assert code == 0, err
        tables[backend] = [pd.read_csv(out / f) for f in ("divergence.csv", "nexttoken.csv")]
    for got, want in zip(tables["vllm"], tables["hf"], strict=True):
        assert list(got.columns) == list(want.columns) and len(got) == len(want)
    div = tables["vllm"][0]
    assert sorted(div.layer.unique()) == list(range(31))
    assert tables["vllm"][1].kl.notna().all()
    np.testing.assert_allclose(div.rel_l2, tables["hf"][0].rel_l2, rtol=1e-3, atol=2e-6)
    assert vllm_probe.is_running()
