"""Probe stage: each generated sample's prompt vs a baseline prompt over the sample's own
continuation ids (reminders included), per layer and position; the untrained twin too.

One unit = one (model, sample) pair, stored as .npz curves. divergence.csv keeps the rows at
t = 1..16 and at the fit positions (the full curves stay in the cache); nexttoken.csv keeps
every t.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from harness.config import RunConfig
from harness.models import ResolvedModel
from harness.records import GenerationRecord
from harness.stages.score import record_key
from harness.store import RunStore, content_key, get_arrays, put_arrays

STAGE = "probe"
METRICS = ("l2", "rel_l2", "cos_dist")


def baseline_ids(config: RunConfig, tokenizer, record: GenerationRecord) -> list[int]:
    from harness.probes.pairs import DEFAULT_SYSTEM, NO_SYSTEM, encode_text, render_chat

    probe = config.probe
    system = {"none": NO_SYSTEM, "default": DEFAULT_SYSTEM}.get(probe.baseline, probe.baseline_text)
    user = next(m["content"] for m in record.prompt_messages if m["role"] == "user")
    return encode_text(tokenizer, render_chat(tokenizer, system or NO_SYSTEM, user))


def probed_records(config: RunConfig, records: list[GenerationRecord]) -> list[GenerationRecord]:
    limit = config.probe.samples
    return [r for r in records if limit is None or r.sample < limit]


def probe_stage(
    store: RunStore,
    config: RunConfig,
    models: list[ResolvedModel],
    records: list[GenerationRecord],
    progress: Callable[[], None] | None = None,
) -> dict[tuple[str, str], dict]:
    """Curves per (model name, record key) for every probed record and probe model."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from harness.probes.divergence import pair_divergence

    layers = None if config.probe.layers == "all" else list(config.probe.layers)
    chosen = probed_records(config, records)
    curves: dict[tuple[str, str], dict] = {}
    for model in models:
        tokenizer = AutoTokenizer.from_pretrained(model.path)
        keys = {}
        for record in chosen:
            base = baseline_ids(config, tokenizer, record)
            keys[record_key(record)] = (
                record,
                base,
                content_key(STAGE, model.content_key, record_key(record), base, layers),
            )
        loaded = None
        for rkey, (record, base, key) in keys.items():
            arrays = get_arrays(store, STAGE, key)
            if arrays is None:
                if loaded is None:
                    loaded = AutoModelForCausalLM.from_pretrained(
                        model.path, dtype=torch.float32
                    ).eval()
                result = pair_divergence(
                    loaded, record.prompt_ids, base, record.continuation_ids, layers
                )
                arrays = {
                    "layers": np.asarray(result.layers),
                    **{m: getattr(result, m).astype(np.float32) for m in METRICS},
                    "delta_logp": result.delta_logp,
                    "kl": result.kl,
                    "prompt_lens": np.asarray(result.prompt_lens),
                }
                put_arrays(store, STAGE, key, arrays)
            curves[(model.name, rkey)] = arrays
            if progress:
                progress()
        del loaded
    return curves


def grid_positions(total: int, t_min: int) -> np.ndarray:
    from harness.analysis.powerlaw import fit_positions

    head = np.arange(1, min(16, total) + 1)
    tail = fit_positions(t_min, total) if total >= t_min else np.array([], dtype=int)
    return np.unique(np.concatenate([head, tail])).astype(int)


def divergence_rows(model: str, record: GenerationRecord, arrays: dict, t_min: int) -> list[dict]:
    total = arrays["kl"].shape[0]
    t = grid_positions(total, t_min)
    ident = _ident(model, record)
    rows = []
    for row, layer in enumerate(arrays["layers"].tolist()):
        values = {m: arrays[m][row, t - 1] for m in METRICS}
        for i, pos in enumerate(t.tolist()):
            rows.append(
                {**ident, "layer": layer, "t": pos, **{m: float(values[m][i]) for m in METRICS}}
            )
    return rows


def nexttoken_rows(model: str, record: GenerationRecord, arrays: dict) -> list[dict]:
    ident = _ident(model, record)
    return [
        {**ident, "t": i + 1, "delta_logp": float(d), "kl": float(k)}
        for i, (d, k) in enumerate(zip(arrays["delta_logp"], arrays["kl"], strict=True))
    ]


def _ident(model: str, record: GenerationRecord) -> dict:
    return {
        "model": model,
        "item": record.item,
        "policy": record.policy,
        "sample": record.sample,
        "pair": f"{record.item}/{record.policy}/{record.sample}",
    }
