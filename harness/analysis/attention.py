"""The prompt's attention share as rows and curves (docs/architecture.md, "Estimators:
attention share"): attention.csv rows at chosen positions, per-turn means of a conversation,
the curves fits.csv fits, and the dilution reference (P - 1)/(P + t).

The shares themselves are measured by the hf probe (`harness.probes.attention`) and travel in
a pair's curve arrays under `harness.probes.arrays.ATTENTION_KEYS`: `attn_layers`
(hidden-state indices l >= 1, the output of decoder layer l - 1) and one (n_layers, T) array
per metric. Arrays without them (the vllm backend, units cached before the share existed)
give no rows.
"""

from __future__ import annotations

import numpy as np

from harness.probes.arrays import SHARE_METRICS

# fitted into fits.csv beside the hidden-state metrics: the share the dilution argument is
# about (mean over heads); the sink's level is read off attention.csv (a fit per curve costs)
FIT_METRICS = ("share_prompt_mean",)


def has_attention(arrays: dict) -> bool:
    return "attn_layers" in arrays and len(np.asarray(arrays["attn_layers"])) > 0


def uniform_share(prompt_len: int, t) -> np.ndarray:
    """(P - 1) / (P + t): under uniform attention the query at t sees P + t keys, P - 1 of
    them the prompt's tokens after its first."""
    return (prompt_len - 1) / (prompt_len + np.asarray(t, dtype=np.float64))


def prompt_len(arrays: dict) -> int:
    """P of row A (the record's prompt), whose attention the shares are."""
    return int(np.asarray(arrays["prompt_lens"])[0])


def share_curves(arrays: dict) -> dict[tuple[int, str], np.ndarray]:
    """(layer, metric) -> (T,) float64 share curve of FIT_METRICS; {} without shares."""
    if not has_attention(arrays):
        return {}
    return {
        (layer, metric): np.asarray(arrays[metric][row], dtype=np.float64)
        for row, layer in enumerate(np.asarray(arrays["attn_layers"]).tolist())
        for metric in FIT_METRICS
    }


def attention_rows(
    ident: dict, arrays: dict, positions: np.ndarray, roles: list[tuple[int, str]]
) -> list[dict]:
    """attention.csv rows of one pair at 1-based `positions`; roles[t - 1] = (turn, role)."""
    if not has_attention(arrays):
        return []
    p = prompt_len(arrays)
    t = np.asarray(positions, dtype=np.int64)
    uniform = uniform_share(p, t)
    rows = []
    for row, layer in enumerate(np.asarray(arrays["attn_layers"]).tolist()):
        values = {m: np.asarray(arrays[m])[row, t - 1] for m in SHARE_METRICS}
        for i, pos in enumerate(t.tolist()):
            turn, role = roles[pos - 1] if pos <= len(roles) else (1, "assistant")
            rows.append(
                {**ident, "layer": layer, "t": pos, "turn": turn, "role": role, "prompt_len": p}
                | {m: float(values[m][i]) for m in SHARE_METRICS}
                | {"uniform": float(uniform[i])}
            )
    return rows


def reply_share_rows(ident: dict, arrays: dict, turns: dict[int, list[int]]) -> list[dict]:
    """attention_turns.csv rows: per layer and reply, the shares' means over the reply's
    tokens; `turns` maps a turn to its generated 0-based continuation offsets."""
    if not has_attention(arrays):
        return []
    p = prompt_len(arrays)
    total = np.asarray(arrays[SHARE_METRICS[0]]).shape[1]
    rows = []
    for row, layer in enumerate(np.asarray(arrays["attn_layers"]).tolist()):
        for turn, offsets in turns.items():
            idx = np.asarray([o for o in offsets if o < total], dtype=np.int64)
            if not idx.size:
                continue
            means = {m: float(np.mean(np.asarray(arrays[m])[row, idx])) for m in SHARE_METRICS}
            rows.append(
                {**ident, "layer": layer, "turn": turn, "tokens": int(idx.size),
                 "t_start": int(idx[0]) + 1, **means,
                 "uniform": float(np.mean(uniform_share(p, idx + 1)))}
            )  # fmt: skip
    return rows
