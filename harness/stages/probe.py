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
from harness.store import RunStore, content_key, get_arrays, put_arrays

STAGE = "probe"
METRICS = ("l2", "rel_l2", "cos_dist")


def baseline_ids(config: RunConfig, tokenizer, record: GenerationRecord) -> list[int]:
    """The record's chat with the baseline system prompt, rendered as generation renders it."""
    from harness.chat import TEMPLATE_DEFAULT, ChatFormat

    probe = config.probe
    system = {"none": None, "default": TEMPLATE_DEFAULT}.get(probe.baseline, probe.baseline_text)
    user = next(m["content"] for m in record.prompt_messages if m["role"] == "user")
    return ChatFormat(tokenizer).prompt_ids(system, user)


def probed_records(config: RunConfig, records: list[GenerationRecord]) -> list[GenerationRecord]:
    limit = config.probe.samples
    return [r for r in records if limit is None or r.sample < limit]


class ModelOnDemand:
    """A transformers model loaded on first use, so a fully cached stage loads nothing."""

    def __init__(self, model: ResolvedModel) -> None:
        self.model = model
        self._loaded = None

    def get(self):
        if self._loaded is None:
            import torch
            from transformers import AutoModelForCausalLM

            self._loaded = AutoModelForCausalLM.from_pretrained(
                self.model.path, dtype=torch.float32
            ).eval()
        return self._loaded


def cached_pair_curves(
    store: RunStore,
    stage: str,
    key: str,
    model: ModelOnDemand,
    record: GenerationRecord,
    base: list[int],
    layers: list[int] | None,
    lam: float | None = None,
) -> dict:
    """The pair's curves from the store, or computed (record prompt vs baseline, over the
    record's own continuation ids) and stored as one .npz unit."""
    from harness.probes.divergence import pair_divergence

    arrays = get_arrays(store, stage, key)
    if arrays is None:
        result = pair_divergence(
            model.get(), record.prompt_ids, base, record.continuation_ids, layers, lam=lam
        )
        arrays = result.to_arrays(hidden_dtype=np.float32)
        put_arrays(store, stage, key, arrays)
    return arrays


def probe_stage(
    store: RunStore,
    config: RunConfig,
    models: list[ResolvedModel],
    records: list[GenerationRecord],
    progress: Callable[[], None] | None = None,
) -> dict[tuple[str, str], dict]:
    """Curves per (model name, record key) for every probed record and probe model."""
    from transformers import AutoTokenizer

    layers = None if config.probe.layers == "all" else list(config.probe.layers)
    curves: dict[tuple[str, str], dict] = {}
    for model in models:
        tokenizer = AutoTokenizer.from_pretrained(model.path)
        on_demand = ModelOnDemand(model)
        for record in probed_records(config, records):
            rkey = record.key
            base = baseline_ids(config, tokenizer, record)
            key = content_key(STAGE, model.content_key, rkey, base, layers)
            curves[(model.name, rkey)] = cached_pair_curves(
                store, STAGE, key, on_demand, record, base, layers
            )
            if progress:
                progress()
    return curves


def grid_positions(total: int, t_min: int) -> np.ndarray:
    from harness.analysis.powerlaw import fit_positions

    head = np.arange(1, min(16, total) + 1)
    tail = fit_positions(t_min, total) if total >= t_min else np.array([], dtype=int)
    return np.unique(np.concatenate([head, tail])).astype(int)


def divergence_rows(model: str, record: GenerationRecord, arrays: dict, t_min: int) -> list[dict]:
    """Rows at the grid positions, plus (conversations) each assistant turn's first token and
    the token before it, so the distance where a user turn hands back can be read off."""
    total = arrays["kl"].shape[0]
    starts = [t for t in record.turn_starts() if t <= total]
    extra = np.array([p for t in starts for p in (t - 1, t)], dtype=int)
    t = np.unique(np.concatenate([grid_positions(total, t_min), extra])).astype(int)
    roles = record.position_roles()
    ident = _ident(model, record)
    rows = []
    for row, layer in enumerate(arrays["layers"].tolist()):
        values = {m: arrays[m][row, t - 1] for m in METRICS}
        for i, pos in enumerate(t.tolist()):
            turn, role = roles[pos - 1] if pos <= len(roles) else (1, "assistant")
            rows.append(
                {**ident, "layer": layer, "t": pos, "turn": turn, "role": role}
                | {m: float(values[m][i]) for m in METRICS}
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


DIVERGENCE_COLUMNS = [
    "model", "item", "policy", "sample", "pair", "layer", "t", "turn", "role", "l2", "rel_l2",
    "cos_dist",
]  # fmt: skip
NEXTTOKEN_COLUMNS = ["model", "item", "policy", "sample", "pair", "t", "delta_logp", "kl"]


class ProbeStage:
    """Each probed record's prompt vs the baseline prompt, trained model and twin ->
    `ctx.curves`, divergence.csv and nexttoken.csv."""

    name = "probe"

    def run(self, ctx) -> dict:
        import pandas as pd

        if ctx.config.probe.enabled:  # disabled: the two files keep their header only
            probed = probed_records(ctx.config, ctx.records)
            bar = ctx.progress.bar("probe", len(probed) * len(ctx.probe_models))
            for model in ctx.models:
                group = [model] + ([ctx.twins[model.name]] if model.name in ctx.twins else [])
                mine = ctx.records_of(model.name)
                ctx.curves.update(probe_stage(ctx.store, ctx.config, group, mine, bar.advance))
        by_key = {r.key: r for r in ctx.records}
        div_rows, next_rows = [], []
        for (model_name, rkey), arrays in sorted(ctx.curves.items()):
            record = by_key[rkey]
            div_rows += divergence_rows(model_name, record, arrays, ctx.config.probe.t_min)
            next_rows += nexttoken_rows(model_name, record, arrays)
        return {
            "divergence.csv": pd.DataFrame(div_rows, columns=DIVERGENCE_COLUMNS),
            "nexttoken.csv": pd.DataFrame(next_rows, columns=NEXTTOKEN_COLUMNS),
        }
