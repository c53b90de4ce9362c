"""Probe stage: each generated sample's prompt vs a baseline prompt over the sample's own
continuation ids (reminders included), per layer and position; the untrained twin too.

One unit = one (model, sample) pair, stored as .npz curves. divergence.csv keeps the rows at
t = 1..16 and at the fit positions (the full curves stay in the cache); nexttoken.csv keeps
every t; attention.csv (hf backend: the prompt's attention share, measured in the same
forward) the divergence rows' positions, and attention_turns.csv (conversations) each reply's
means.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import numpy as np

from harness.analysis.attention import attention_rows, reply_share_rows
from harness.analysis.powerlaw import fit_positions
from harness.config.run import RunConfig
from harness.models import ResolvedModel
from harness.probes.backend import (
    LOCAL_BACKENDS,
    Backend,
    BackendName,
    backend_dtype,
    cached_curves,
    map_pairs,
    open_backend,
)
from harness.probes.endpoint import endpoint_settings
from harness.probes.precision import hidden_below_floor, key_params
from harness.results import (
    AttentionRow,
    AttentionTurnRow,
    DivergenceRow,
    NextTokenRow,
    TurnInfluenceRow,
    pair_id,
    result_frame,
)
from harness.stages.base import Curves, Records, artifact_name
from harness.stages.context import RunContext
from harness.store import RunStore, unit_key
from harness.text.chat import TEMPLATE_DEFAULT, ChatFormat
from harness.text.records import GenerationRecord

STAGE = "probe"
METRICS = ("l2", "rel_l2", "cos_dist")


def baseline_ids(config: RunConfig, tokenizer: Any, record: GenerationRecord) -> list[int]:
    """The record's chat with the probe's baseline system prompt."""
    return record_baseline_ids(tokenizer, record, config.probe.baseline, config.probe.baseline_text)


def record_baseline_ids(
    tokenizer: Any, record: GenerationRecord, baseline: str, text: str | None = None
) -> list[int]:
    """The record's chat with a baseline system prompt (`none`: no system turn, `default`: the
    template's default, `text`: `text`), rendered as generation renders it."""

    system = {"none": None, "default": TEMPLATE_DEFAULT}.get(baseline, text)
    user = next(m["content"] for m in record.prompt_messages if m["role"] == "user")
    return ChatFormat(tokenizer).prompt_ids(system, user)


def probed_records(config: RunConfig, records: list[GenerationRecord]) -> list[GenerationRecord]:
    """The first `probe.samples` samples of each condition; in a sequential run without it,
    the first `min`, so every condition is probed on as many pairs however long it sampled."""
    limit = config.probe.samples or (config.first_samples if config.sequential else None)
    return [r for r in records if limit is None or r.sample < limit]


def probe_key(
    model: ResolvedModel,
    record: GenerationRecord,
    base: list[int],
    layers: list[int] | None,
    backend: str,
    top_k: int | None = None,
    dtype: str = "float32",
) -> str:
    """A probe unit's key: the record against its baseline prompt, on one backend (the vllm
    backend's numbers differ from hf's in the last float32 digits; the openai backend's KL
    bracket depends on its top_k) in one precision (the hf backend's resolved dtype)."""
    params = {"layers": layers, "backend": backend, **key_params(dtype)}
    if backend == "openai":
        params["top_k"] = top_k
    return unit_key(STAGE, model=model.content_key, inputs=[record.key, base], params=params)


def record_curves(
    store: RunStore,
    stage: str,
    key: str,
    backend: Backend,
    record: GenerationRecord,
    base: list[int],
    layers: list[int] | None,
    lam: float | None = None,
) -> dict[str, Any]:
    """The record's curves (its prompt vs the baseline, over its own continuation ids) from
    the store, or computed by `backend` and stored as one .npz unit (hidden-state metrics in
    float32: the stages read them as stored)."""

    def compute() -> Any:  # the backend's arrays
        return backend.curves(record.prompt_ids, base, record.continuation_ids, layers, lam)

    return cached_curves(store, stage, key, compute, hidden_dtype=np.float32)


def probe_stage(
    store: RunStore,
    config: RunConfig,
    models: list[ResolvedModel],
    records: list[GenerationRecord],
    progress: Callable[[], None] | None = None,
    backends: dict[str, str] | None = None,
) -> dict[tuple[str, str], dict[str, Any]]:
    """Curves per (model name, record key) for every probed record and probe model, on each
    model's backend (`backends`, resolved by the plan; hf when not given)."""
    from transformers import AutoTokenizer

    layers = None if config.probe.layers == "all" else list(config.probe.layers)
    curves: dict[tuple[str, str], dict[str, Any]] = {}
    for model in models:
        backend = cast("BackendName", (backends or {}).get(model.name, "hf"))
        tokenizer = AutoTokenizer.from_pretrained(model.path)
        pairs = [(r, baseline_ids(config, tokenizer, r)) for r in probed_records(config, records)]
        longest = max((max(len(r.prompt_ids), len(b)) + len(r.continuation_ids)
                       for r, b in pairs), default=0)  # fmt: skip
        gen = config.generation
        dtype = backend_dtype(backend, config.probe.dtype, model.path)
        source = open_backend(
            backend, model.path, longest,
            tensor_parallel_size=gen.tensor_parallel_size,
            pipeline_parallel_size=gen.pipeline_parallel_size,
            endpoint=endpoint_settings(config), dtype=dtype,
        )  # fmt: skip

        def one(
            pair: tuple[GenerationRecord, list[int]], model: ResolvedModel = model,
            backend: str = backend, source: Backend = source, dtype: str = dtype,
        ) -> dict[str, Any]:  # fmt: skip
            record, base = pair
            key = probe_key(model, record, base, layers, backend, config.probe.top_k, dtype)
            arrays = record_curves(store, STAGE, key, source, record, base, layers)
            if progress:
                progress()
            return arrays

        try:
            for (record, _), arrays in zip(pairs, map_pairs(source, one, pairs), strict=True):
                curves[(model.name, record.key)] = arrays
        finally:
            source.close()
    return curves


def grid_positions(total: int, t_min: int) -> np.ndarray:
    head = np.arange(1, min(16, total) + 1)
    tail = fit_positions(t_min, total) if total >= t_min else np.array([], dtype=int)
    return np.unique(np.concatenate([head, tail])).astype(int)


def row_positions(record: GenerationRecord, total: int, t_min: int) -> np.ndarray:
    """The grid positions, plus (conversations) each assistant turn's first token and the
    token before it, so the distance where a user turn hands back can be read off."""
    starts = [t for t in record.turn_starts() if t <= total]
    extra = np.array([p for t in starts for p in (t - 1, t)], dtype=int)
    return np.unique(np.concatenate([grid_positions(total, t_min), extra])).astype(int)


def divergence_rows(
    model: str, record: GenerationRecord, arrays: dict[str, Any], t_min: int
) -> list[dict[str, Any]]:
    """divergence.csv rows at `row_positions`."""
    t = row_positions(record, arrays["kl"].shape[0], t_min)
    roles = record.position_roles()
    ident = _ident(model, record)
    below = hidden_below_floor(arrays)
    rows = []
    for row, layer in enumerate(arrays["layers"].tolist()):
        values = {m: arrays[m][row, t - 1] for m in METRICS}
        for i, pos in enumerate(t.tolist()):
            turn, role = roles[pos - 1] if pos <= len(roles) else (1, "assistant")
            rows.append(
                {**ident, "layer": layer, "t": pos, "turn": turn, "role": role}
                | {m: float(values[m][i]) for m in METRICS}
                | {"below_floor": bool(below[row, pos - 1])}
            )
    return rows


def share_rows(
    model: str, record: GenerationRecord, arrays: dict[str, Any], t_min: int
) -> list[dict[str, Any]]:
    """attention.csv rows at divergence.csv's positions (none without measured shares)."""
    t = row_positions(record, arrays["kl"].shape[0], t_min)
    return attention_rows(_ident(model, record), arrays, t, record.position_roles())


def share_turn_rows(
    model: str, record: GenerationRecord, arrays: dict[str, Any]
) -> list[dict[str, Any]]:
    """attention_turns.csv rows of a conversation record (none for a single reply)."""
    if not record.is_conversation:
        return []
    return reply_share_rows(_ident(model, record), arrays, record.turn_positions())


def kl_bracket(arrays: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """(kl_low, kl_high): the openai backend's bracket, the exact KL twice elsewhere."""
    return arrays.get("kl_low", arrays["kl"]), arrays.get("kl_high", arrays["kl"])


def nexttoken_rows(
    model: str, record: GenerationRecord, arrays: dict[str, Any], backend: str = "hf"
) -> list[dict[str, Any]]:
    ident = _ident(model, record)
    low, high = kl_bracket(arrays)
    columns = zip(arrays["delta_logp"], arrays["kl"], low, high, strict=True)
    return [
        {**ident, "t": i + 1, "delta_logp": float(d), "kl": float(k), "kl_low": float(lo),
         "kl_high": float(hi), "backend": backend}
        for i, (d, k, lo, hi) in enumerate(columns)
    ]  # fmt: skip


def turn_influence_rows(
    model: str, record: GenerationRecord, arrays: dict[str, Any], backend: str = "hf"
) -> list[dict[str, Any]]:
    """A conversation's next-token influence at each reply's first token (turn 1's too: the
    distribution that predicts it follows the last prompt token): KL, its bracket and
    delta_logp at that t. Empty for a single reply."""
    if not record.is_conversation:
        return []
    low, high = kl_bracket(arrays)
    total = arrays["kl"].shape[0]
    rows = []
    for turn, positions in record.turn_positions().items():
        if not positions or positions[0] >= total:
            continue
        i = positions[0]
        rows.append(
            {**_ident(model, record), "turn": turn, "t": i + 1, "kl": float(arrays["kl"][i]),
             "kl_low": float(low[i]), "kl_high": float(high[i]),
             "delta_logp": float(arrays["delta_logp"][i]), "backend": backend}
        )  # fmt: skip
    return rows


def _ident(model: str, record: GenerationRecord) -> dict[str, Any]:
    return {
        "model": model,
        "item": record.item,
        "policy": record.policy,
        "sample": record.sample,
        "pair": pair_id(record.item, record.policy, record.sample),
    }


# the columns of the rows the stage builds: all but the last, t_unit (its default, the model's
# tokens, is the probe's unit)
DIVERGENCE_COLUMNS = DivergenceRow.columns()[:-1]
NEXTTOKEN_COLUMNS = NextTokenRow.columns()[:-1]
TURN_INFLUENCE_COLUMNS = TurnInfluenceRow.columns()[:-1]


class ProbeStage:
    """Each probed record's prompt vs the baseline prompt, trained model and twin ->
    the curves (`Curves`), divergence.csv, nexttoken.csv, attention.csv and (with conversations)
    attention_turns.csv."""

    name = "probe"
    reads = (Records,)
    writes = (Curves, DivergenceRow, NextTokenRow, AttentionRow, TurnInfluenceRow, AttentionTurnRow)

    def run(self, ctx: RunContext) -> dict[str, object]:
        import pandas as pd

        records = ctx.records()
        all_curves: dict[tuple[str, str], dict[str, Any]] = {}
        if ctx.config.probe.enabled:  # disabled: the two files keep their header only
            probed = probed_records(ctx.config, records)
            bar = ctx.progress.bar("probe", len(probed) * len(ctx.probe_models))
            for model in ctx.models:
                group = [model] + ([ctx.twins[model.name]] if model.name in ctx.twins else [])
                mine = ctx.records_of(model.name)
                curves = probe_stage(
                    ctx.cache, ctx.config, group, mine, bar.advance, ctx.probe_backends
                )
                all_curves.update(curves)
        by_key = {r.key: r for r in records}
        div_rows, next_rows, turn_rows, share, replies = [], [], [], [], []
        t_min = ctx.config.probe.t_min
        for (model_name, rkey), arrays in sorted(all_curves.items()):
            record = by_key[rkey]
            backend = (ctx.probe_backends or {}).get(model_name, "hf")
            if backend in LOCAL_BACKENDS:  # an endpoint hands out no hidden states
                div_rows += divergence_rows(model_name, record, arrays, t_min)
            next_rows += nexttoken_rows(model_name, record, arrays, backend)
            turn_rows += turn_influence_rows(model_name, record, arrays, backend)
            share += share_rows(model_name, record, arrays, t_min)  # hf pairs only
            replies += share_turn_rows(model_name, record, arrays)
        return {
            artifact_name(Curves): all_curves,
            "divergence.csv": result_frame(
                DivergenceRow, pd.DataFrame(div_rows, columns=DIVERGENCE_COLUMNS)
            ),
            "nexttoken.csv": result_frame(
                NextTokenRow, pd.DataFrame(next_rows, columns=NEXTTOKEN_COLUMNS)
            ),
            # every column but the last, t_unit (its default: the probe counts model tokens)
            "attention.csv": result_frame(
                AttentionRow, pd.DataFrame(share, columns=AttentionRow.columns()[:-1])
            ),
        } | self._turn_file(ctx, turn_rows, replies)

    @staticmethod
    def _turn_file(
        ctx: RunContext, rows: list[dict[str, Any]], replies: list[dict[str, Any]]
    ) -> dict[str, object]:
        """turn_influence.csv and attention_turns.csv in runs with conversations (header-only
        when none was probed, or none on the hf backend)."""
        import pandas as pd

        if not any(r.is_conversation for r in ctx.records()):
            return {}
        frame = pd.DataFrame(rows, columns=TURN_INFLUENCE_COLUMNS)
        shares = pd.DataFrame(replies, columns=AttentionTurnRow.columns()[:-1])
        return {
            "turn_influence.csv": result_frame(TurnInfluenceRow, frame),
            "attention_turns.csv": result_frame(AttentionTurnRow, shares),
        }
