"""Perplexity of generated replies under the plain model: the quality check of the remedies
(docs/remedies.md). A remedy that keeps a rule by writing garbage shows it here: the unsteered
model finds its replies improbable.

Per record: exp of the mean negative log-likelihood of its generated tokens (segments of kind
`generated`), each given everything before it (prompt, earlier replies, injected reminders),
under the model as loaded (no steering is active outside the engine's own batches).
"""

from __future__ import annotations

import math
from typing import Any

from harness.text.records import GenerationRecord

ROWS_PER_FORWARD = 4  # (rows x continuation x vocabulary) float32 logits stay ~0.3 GB


def generated_positions(record: GenerationRecord) -> list[int]:
    """Continuation indices of the model's own tokens."""
    return [
        i for seg in record.segments if seg.kind == "generated" for i in range(seg.start, seg.end)
    ]


def reply_perplexities(model: Any, records: list[GenerationRecord], pad_id: int) -> list[float]:
    """The perplexity of each record's generated tokens (NaN where it has none)."""
    import torch

    from harness.engines.guidance import left_padded  # lazy: loads torch

    device = model.get_input_embeddings().weight.device
    out: list[float] = []
    for lo in range(0, len(records), ROWS_PER_FORWARD):
        chunk = records[lo : lo + ROWS_PER_FORWARD]
        rows = [r.prompt_ids + r.continuation_ids for r in chunk]
        ids, mask, positions = left_padded(rows, pad_id, device)
        keep = max(len(r.continuation_ids) for r in chunk) + 1
        with torch.inference_mode():
            logits = model(
                input_ids=ids, attention_mask=mask, position_ids=positions, logits_to_keep=keep
            ).logits  # (B, keep, V): the last `keep` positions
            logp = torch.log_softmax(logits.float(), dim=-1)
        for row, record in enumerate(chunk):
            picks = generated_positions(record)
            if not picks:
                out.append(math.nan)
                continue
            # continuation index i is predicted at position keep - 1 - (T - i) of the kept slice
            total = len(record.continuation_ids)
            at = torch.tensor([keep - 1 - (total - i) for i in picks], device=device)
            tokens = torch.tensor([record.continuation_ids[i] for i in picks], device=device)
            nll = -logp[row, at, tokens].double().mean().item()
            out.append(math.exp(nll))
    return out
