"""Precision as a setting, without a model: dtype resolution, the rounding-floor mask and what
it removes from fits and laws, the dtype in cache keys and stored units, the vocabulary-sliced
head in float32 over reduced-precision weights."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from safetensors.numpy import save_file

from harness.analysis.fits import FitMember, curve_sets, fit_table
from harness.analysis.law_sets import pair_units
from harness.config.run import GenerationConfig, ProbeConfig
from harness.engines.device import PRECISIONS, resolve_dtype
from harness.engines.options import engine_options
from harness.errors import UserError
from harness.probes.divergence import PairDivergence
from harness.probes.head import vocab_sliced
from harness.probes.precision import (
    FLOOR_MULTIPLE,
    hidden_below_floor,
    key_params,
    next_below_floor,
    resolved,
)
from harness.units.probe_plan import ProbeFlags, probe_request


def _checkpoint(tmp_path, parameters: int):
    save_file({"w": np.zeros(parameters, dtype=np.float32)}, str(tmp_path / "model.safetensors"))
    return tmp_path


def test_dtype_settings_accept_the_four_names_and_nothing_else():
    assert PRECISIONS == ("auto", "float32", "bfloat16", "float16")
    assert ProbeConfig().dtype == GenerationConfig().dtype == "auto"
    assert ProbeConfig(dtype="bfloat16").dtype == "bfloat16"
    with pytest.raises(ValueError, match="dtype"):
        ProbeConfig(dtype="fp8")
    with pytest.raises(ValueError, match="is the hf backend's"):
        ProbeConfig(dtype="bfloat16", backend="vllm")
    assert engine_options(GenerationConfig(engine="hf", dtype="float16"))["dtype"] == "float16"


def test_auto_is_float32_on_the_cpu_and_where_float32_fits_the_gpus(tmp_path):
    path = _checkpoint(tmp_path, 1000)  # 4,000 bytes in float32
    assert resolve_dtype("auto", path, free_bytes=0) == "float32"  # no GPU: the CPU
    assert resolve_dtype("auto", path, free_bytes=10_000) == "float32"  # 4 kB <= 0.6 x 10 kB
    # too big for float32 on these "GPUs": reduced (float16 where torch sees no bf16 units)
    reduced = resolve_dtype("auto", path, free_bytes=5_000)
    assert reduced == ("bfloat16" if torch.cuda.is_bf16_supported() else "float16")
    assert resolve_dtype("bfloat16", path, free_bytes=0) == "bfloat16"  # explicit: as given
    with pytest.raises(UserError, match="dtype must be one of auto, float32"):
        resolve_dtype("half", path, free_bytes=0)


def _arrays(rel: np.ndarray, floor: list[float] | None, kl_floor: float = 1e-6) -> dict:
    n_layers, total = rel.shape
    arrays = PairDivergence(
        layers=list(range(1, n_layers + 1)), l2=rel * 10, rel_l2=rel, cos_dist=rel**2 / 2,
        delta_logp=np.full(total, 1e-3), kl=np.geomspace(1e-2, 1e-7, total), prompt_lens=(5, 3),
        identical_prompts=False,
    ).to_arrays()  # fmt: skip
    if floor is not None:
        arrays["dtype"] = np.asarray("bfloat16")
        arrays |= {"floor_rel_l2": np.asarray(floor), "floor_kl": np.asarray(kl_floor),
                   "floor_delta_logp": np.asarray(1e-4)}  # fmt: skip
    return arrays


def test_a_curve_is_cut_where_it_reaches_the_floor_multiple_and_stays_cut():
    t = np.arange(1, 1025)
    rel = np.vstack([0.5 * t**-1.0, 0.3 * t**-0.5])  # layer 1 reaches 3 x 3e-3 at t = 56
    rel[0, 700] = 1.0  # a later excursion above the level stays cut (no cherry-picking)
    arrays = _arrays(rel, [3e-3, 1e-4])
    below = hidden_below_floor(arrays)
    first = int(np.argmax(below[0]))
    assert below[0, first:].all() and not below[0, :first].any()  # one contiguous cut
    crossing = int(np.argmax(rel[0] <= FLOOR_MULTIPLE * 3e-3))  # index 55: t = 56
    assert crossing / 10**0.2 <= first <= crossing  # from the median window's first position
    assert not below[1].any()  # 0.3 / sqrt(1024) = 9e-3 > 3 x 1e-4
    kept = resolved(arrays)
    for metric in ("l2", "rel_l2", "cos_dist"):  # masked together, by rel_l2
        assert np.isnan(kept[metric][0][below[0]]).all()
        assert not np.isnan(kept[metric][1]).any()
    assert np.isnan(kept["kl"]).sum() == next_below_floor(arrays, "kl").sum() > 0
    assert not np.isnan(kept["delta_logp"]).any()  # 1e-3 > 3 x 1e-4
    assert np.array_equal(arrays["rel_l2"], rel)  # the stored curves themselves are kept


def test_without_a_floor_nothing_is_masked():
    rel = np.full((2, 64), 1e-9)
    arrays = _arrays(rel, None)
    assert resolved(arrays) is arrays
    assert not hidden_below_floor(arrays).any()


def test_fits_and_laws_skip_the_positions_below_the_floor():
    """A power law that flattens onto a rounding floor: fitted raw its alpha drops toward 0;
    with the floor measured, the fit keeps the positions above it and finds the true slope."""
    rng = np.random.default_rng(0)
    t = np.arange(1, 4097, dtype=float)
    truth = 0.5 * t**-1.0
    # rounding adds a random vector: the measured distance is ~ sqrt(true^2 + noise^2)
    noisy = np.sqrt(truth**2 + 4e-6 * (1 + rng.standard_normal(t.size) ** 2))
    rel = np.vstack([noisy, noisy])
    raw = fit_table([({"model": "m"}, [FitMember("p", _arrays(rel, None))])], 16, 50, 50)
    floored = fit_table([({"model": "m"}, [FitMember("p", _arrays(rel, [2e-3, 2e-3]))])], 16, 50,
                        50)  # fmt: skip

    def alpha(table):
        row = table[(table["metric"] == "rel_l2") & (table["layer"] == 1)].iloc[0]
        return row["alpha"], row["n"]

    assert alpha(raw)[0] < 0.7  # flattened: biased toward 0
    assert alpha(floored)[0] == pytest.approx(1.0, abs=0.05)
    sets = curve_sets(_arrays(rel, [2e-3, 2e-3]))
    assert np.isnan(sets[(1, "rel_l2")]).sum() > 3500

    class Record:
        item, policy, is_conversation = "i", "p", False

    units = pair_units("m", Record(), _arrays(rel, [2e-3, 2e-3]))
    layer_unit = next(u for u in units if u.curve == "rel_l2")
    assert np.isnan(layer_unit.y).sum() > 3500


def test_dtype_and_floor_survive_a_stored_unit_and_float32_units_are_unchanged():
    rel = np.full((1, 8), 0.1)
    plain = _arrays(rel, None)
    assert "dtype" not in plain and "floor_rel_l2" not in plain  # float32 units as before
    low = PairDivergence.from_arrays(_arrays(rel, [1e-3]))
    assert low.dtype == "bfloat16"
    again = low.to_arrays()
    assert str(again["dtype"]) == "bfloat16"
    assert again["floor_rel_l2"].tolist() == [1e-3]


def test_cache_keys_carry_the_dtype_below_float32_only():
    from types import SimpleNamespace

    from harness.models import ResolvedModel
    from harness.stages.probe import probe_key

    model = ResolvedModel(name="m", path="/m", content_key="k", source="")
    record = SimpleNamespace(key="r")  # only its key enters the probe key
    base = [1, 2]
    f32 = probe_key(model, record, base, None, "hf", dtype="float32")
    assert f32 == probe_key(model, record, base, None, "hf")  # keys written before: unchanged
    assert probe_key(model, record, base, None, "hf", dtype="bfloat16") != f32
    assert key_params("float32") == {} and key_params("float16") == {"dtype": "float16"}


def test_probe_flags_check_the_dtype():
    flags = dict(model="smollm2-135m-instruct", prompt_a="a", prompt_b="b",
                 continuation="x.txt", tokens=64, generator="hf")  # fmt: skip
    with pytest.raises(UserError, match="--dtype must be one of"):
        probe_request(ProbeFlags(**flags, dtype="fp8"))
    with pytest.raises(UserError, match="--dtype bfloat16 needs --backend hf"):
        probe_request(ProbeFlags(**flags, dtype="bfloat16", backend="openai"))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_vocab_sliced_head_gives_float32_products_of_reduced_weights(dtype):
    torch.manual_seed(0)
    linear = torch.nn.Linear(64, 3000, bias=False).to(dtype).requires_grad_(False)
    hidden = torch.randn(2, 5, 64).to(dtype)
    logits = vocab_sliced(linear)(hidden)
    assert logits.dtype == torch.float32
    exact = hidden.double() @ linear.weight.double().t()
    assert torch.allclose(logits.double(), exact, rtol=1e-5, atol=1e-5)
    # the model's own reduced-precision head rounds at ~2^-8 relative: far coarser
    rounded = linear(hidden).double()
    assert (rounded - exact).abs().max() > 10 * (logits.double() - exact).abs().max()


def test_vllm_connector_files_are_read_a_layer_at_a_time_in_either_layout(tmp_path):
    """vLLM's ExampleHiddenStatesConnector writes (prompt tokens, n_ids, d); the harness's
    (n_ids, keep, d): either gives the same (keep, d) rows of one layer."""
    from safetensors.torch import save_file as save_torch

    from harness.probes.vllm_backend import _connector_config, _read_row, _remove

    states = torch.arange(10 * 3 * 4, dtype=torch.float32).reshape(10, 3, 4)  # tokens, ids, d
    vllm_file, harness_file = tmp_path / "v.safetensors", tmp_path / "h.safetensors"
    save_torch({"hidden_states": states, "token_ids": torch.arange(10)}, str(vllm_file))
    save_torch({"states": states[-6:].transpose(0, 1).contiguous()}, str(harness_file))
    for row in range(3):
        expected = states[4:, row]
        assert torch.equal(_read_row(vllm_file, row, 6, vllm_layout=True), expected)
        assert torch.equal(_read_row(harness_file, row, 6), expected)
    (tmp_path / "v.safetensors.lock").write_text("")
    _remove(vllm_file)
    assert not list(tmp_path.glob("v.*"))
    cuda = _connector_config(True, tmp_path, "X")
    assert cuda["kv_connector"] == "ExampleHiddenStatesConnector"
    assert cuda["kv_connector_extra_config"] == {"shared_storage_path": str(tmp_path)}
    assert _connector_config(False, tmp_path, "X")["kv_connector_module_path"].endswith(
        "vllm_connector"
    )


def _rounded(rng, truth: np.ndarray, noise: float) -> np.ndarray:
    """A true divergence measured through rounding: the norm of it plus a random 2-d vector."""
    e = rng.normal(0.0, noise, size=(2, truth.size))
    return np.hypot(truth + e[0], e[1])


def test_a_floor_that_keeps_too_little_gives_no_alpha_and_the_laws_cannot_tell():
    """Layer 1 (0.5 t^-1 under a 5e-3 floor) keeps t < ~26 only: under half a decade past
    t_min = 16, so fits.csv has no alpha there but says why and how many positions were left,
    and laws.csv fits no law there (no verdict, "fewer than 5 usable points"; never `settles`
    from rounding); layer 2 (0.3 t^-0.5, floor 1e-4)
    is cut nowhere and fits as float32 would."""
    from harness.analysis.law_sets import group_sets
    from harness.analysis.law_table import law_rows

    rng = np.random.default_rng(1)
    t = np.arange(1, 1025, dtype=float)
    pairs = [np.vstack([_rounded(rng, 0.5 / t, 1.5e-3), _rounded(rng, 0.3 * t**-0.5, 3e-5)])
             for _ in range(3)]  # fmt: skip
    members = [FitMember(f"p{i}", _arrays(rel, [5e-3, 1e-4])) for i, rel in enumerate(pairs)]
    table = fit_table([({"model": "m"}, members)], 16, 50, 200)
    rel = table[table["metric"] == "rel_l2"]
    for _, row in rel[rel["layer"] == 1].iterrows():  # each pair's row and the pooled one
        assert np.isnan(row["alpha"]) and np.isnan(row["alpha_low"])
        assert row["reason"].startswith("cannot tell: ")
        assert "of 64 fit positions above 3x the rounding floor" in row["reason"]
        assert 0 < row["t_max"] < 26
    layer2 = rel[(rel["layer"] == 2) & (rel["pair"] == "all")].iloc[0]
    assert layer2["alpha"] == pytest.approx(0.5, abs=0.05) and layer2["reason"] == ""
    assert "rounding floor" not in layer2["method"]

    class Record:
        item, policy, is_conversation = "i", "p", False

    units = [u for a in members for u in pair_units("m", Record(), a.arrays, 16)]
    rows = [r for r in law_rows(group_sets(units, 16), draws=50) if r["curve"] == "rel_l2"]
    layer1 = [r for r in rows if r["layer_group"] == "layer 1"]
    assert len(layer1) == 3 and not any(r["chosen"] or r["verdict"] for r in layer1)
    assert all(r["reason"] == "fewer than 5 usable points" for r in layer1)
    layer2 = next(r for r in rows if r["layer_group"] == "layer 2" and r["chosen"])
    assert layer2["verdict"] != "settles" and layer2["law"] == "power-zero"


def test_a_floor_that_keeps_a_wide_span_fits_there_and_says_how_much_it_kept():
    rng = np.random.default_rng(2)
    t = np.arange(1, 1025, dtype=float)
    rel = np.vstack([_rounded(rng, 0.5 / t, 6e-5), _rounded(rng, 0.3 * t**-0.5, 3e-5)])
    row = fit_table([({"model": "m"}, [FitMember("p", _arrays(rel, [2e-4, 1e-4]))])], 16, 50, 50)
    one = row[(row["metric"] == "rel_l2") & (row["layer"] == 1)].iloc[0]
    assert one["alpha"] == pytest.approx(1.0, abs=0.05)  # cut near t = 830: 1.6 decades kept
    assert one["reason"] == "" and 500 < one["t_max"] < 900
    kept = int(one["method"].split("; ")[1].split(" of ")[0])
    assert 40 < kept < 64 and one["method"].endswith("fit positions above 3x the rounding floor")
