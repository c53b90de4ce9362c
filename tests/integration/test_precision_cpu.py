"""A reduced dtype on the CPU runs the GPU's code path (the dtype is the point): the hf engine
and the probe's hf backend in bfloat16 on the tiny random model, the floor measured against
float32, the units of the two precisions kept apart."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from harness.engines.base import GenerationRequest, SamplingSettings
from harness.engines.hf_engine import HfEngine
from harness.probes.backend import HfBackend
from harness.probes.floor import FLOOR_SPAN
from harness.probes.precision import hidden_below_floor

pytestmark = pytest.mark.integration


def _pair(total: int = 320):
    g = torch.Generator().manual_seed(3)
    a = torch.randint(10, 5000, (30,), generator=g).tolist()
    b = torch.randint(10, 5000, (18,), generator=g).tolist()
    c = torch.randint(10, 5000, (total,), generator=g).tolist()
    return a, b, c


def test_a_bf16_probe_carries_its_measured_floor_and_float32_none(tiny_model_path):
    a, b, c = _pair()
    f32 = HfBackend(tiny_model_path, dtype="float32").curves(a, b, c)
    low_backend = HfBackend(tiny_model_path, dtype="bfloat16")
    low = low_backend.curves(a, b, c)
    assert low_backend.model().dtype == torch.bfloat16
    assert f32.dtype == "float32" and f32.floor == {}
    assert low.dtype == "bfloat16" and low.floor["floor_rel_l2"].shape == (len(low.layers),)
    floor = low.floor["floor_rel_l2"][1:]  # layer 0: equal embeddings, exactly 0 in any dtype
    # bf16 rounds at 2^-8 = 3.9e-3 per value: the floor of a relative distance sits near it
    assert (floor > 1e-4).all() and (floor < 5e-2).all(), floor
    # it bounds the error the dtype puts into the curve (the triangle inequality: |rel(dtype)
    # - rel(float32)| <= (err_A + err_B) / norm), here on the full run's own first positions
    span = slice(0, FLOOR_SPAN)
    error = np.abs(low.rel_l2[1:, span] - f32.rel_l2[1:, span])
    assert (np.quantile(error, 0.9, axis=-1) <= 1.5 * floor).all()
    assert low.floor["floor_kl"] > 0 and low.floor["floor_delta_logp"] > 0
    arrays = low.to_arrays()
    assert str(arrays["dtype"]) == "bfloat16"
    below = hidden_below_floor(arrays)
    assert below.shape == low.rel_l2.shape


def test_hf_engine_generates_in_bf16_on_the_model_device(tiny_model_path):
    engine = HfEngine(tiny_model_path, dtype="bfloat16")
    assert engine.model.dtype == torch.bfloat16 and engine.device.type == "cpu"
    settings = SamplingSettings(temperature=0.0, max_tokens=12, min_tokens=12, seed=0)
    requests = [GenerationRequest(prompt_ids=[1, 2, 3, 4], sampling=settings),
                GenerationRequest(prompt_ids=[5, 6], sampling=settings)]  # fmt: skip
    results = engine.generate(requests)
    assert [len(r.token_ids) for r in results] == [12, 12]
    engine.close()
