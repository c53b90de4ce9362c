"""Classifier-free guidance on the system prompt, batched (docs/remedies.md).

Sanchez et al. 2023 / context-aware decoding (Shi et al. 2023): the next token is drawn from
log_softmax(uncond) + gamma * (log_softmax(cond) - log_softmax(uncond)), where cond is the
model's logits with the system prompt and uncond without it, on the same continuation. gamma = 1
is the plain model; gamma > 1 multiplies the prompt's next-token influence (the delta_logp of
nexttoken.csv) by gamma.

transformers' `generate(guidance_scale=...)` runs the unconditional row as a second forward per
row (`UnbatchedClassifierFreeGuidanceLogitsProcessor`), and its batched processor expects the
MusicGen layout. Here the B cond rows and their B uncond rows are ONE left-padded batch of 2B
rows over one KV cache: one forward per token, the guided scores computed from both halves,
one token drawn per pair and fed to both of its rows.
"""

from __future__ import annotations

from typing import Any

import torch

from harness.engines.base import SamplingSettings


def guided_scores(logits: torch.Tensor, gamma: float) -> torch.Tensor:
    """(B, V) guided log-probs from (2B, V) logits whose first half is cond, second uncond."""
    half = logits.shape[0] // 2
    logp = torch.log_softmax(logits.to(torch.float32), dim=-1)
    cond, uncond = logp[:half], logp[half:]
    return uncond + gamma * (cond - uncond)


def left_padded(rows: list[list[int]], pad_id: int, device: Any) -> tuple[torch.Tensor, ...]:
    """(ids, attention mask, position ids), each (len(rows), width), prompts right-aligned."""
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        ids[i, width - len(row) :] = torch.tensor(row)
        mask[i, width - len(row) :] = 1
    positions = (mask.cumsum(-1) - 1).clamp_min(0)
    return ids.to(device), mask.to(device), positions.to(device)


def _draw(scores: torch.Tensor, settings: SamplingSettings) -> torch.Tensor:
    """(B,) tokens: argmax at temperature 0, else a draw after temperature and top-p."""
    if settings.temperature == 0:
        return scores.argmax(-1)
    scores = scores / settings.temperature
    if settings.top_p < 1:  # keep the smallest top set whose mass reaches top_p
        ordered, order = scores.sort(dim=-1, descending=True)
        mass = ordered.softmax(-1).cumsum(-1)
        drop = (mass - ordered.softmax(-1)) >= settings.top_p  # mass before this token
        ordered = ordered.masked_fill(drop, -torch.inf)
        scores = torch.full_like(scores, -torch.inf).scatter(-1, order, ordered)
    return torch.multinomial(scores.softmax(-1), 1)[:, 0]


@torch.inference_mode()
def guided_generate(
    model: Any,
    cond: list[list[int]],
    uncond: list[list[int]],
    gamma: float,
    settings: SamplingSettings,
    pad_id: int,
    eos_id: int | None,
) -> list[list[int]]:
    """New tokens of each cond row (EOS kept, nothing after it), drawn from the guided scores;
    the caller seeds torch's RNG. Rows run to settings.max_tokens or EOS (not before
    settings.min_tokens)."""
    from transformers import DynamicCache

    device = model.get_input_embeddings().weight.device
    ids, mask, positions = left_padded([*cond, *uncond], pad_id, device)
    cache = DynamicCache(config=model.config)
    half = len(cond)
    done = torch.zeros(half, dtype=torch.bool, device=device)
    out: list[torch.Tensor] = []
    logits = model(
        input_ids=ids, attention_mask=mask, position_ids=positions,
        past_key_values=cache, use_cache=True, logits_to_keep=1,
    ).logits[:, -1]  # fmt: skip
    for step in range(settings.max_tokens):
        scores = guided_scores(logits, gamma)
        if eos_id is not None and step < settings.min_tokens:
            scores[:, eos_id] = -torch.inf
        token = torch.where(
            done, torch.full_like(done, pad_id, dtype=torch.long), _draw(scores, settings)
        )
        out.append(token)
        if eos_id is not None:
            done |= token == eos_id
        if bool(done.all()) or step + 1 == settings.max_tokens:
            break
        mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=1)
        positions = positions[:, -1:] + 1
        logits = model(
            input_ids=torch.cat([token, token])[:, None], attention_mask=mask,
            position_ids=positions, past_key_values=cache, use_cache=True,
        ).logits[:, -1]  # fmt: skip
    tokens = torch.stack(out, dim=1).tolist() if out else [[] for _ in cond]
    result = []
    for row in tokens:
        if eos_id is not None and eos_id in row:
            row = row[: row.index(eos_id) + 1]
        result.append(row)
    return result
