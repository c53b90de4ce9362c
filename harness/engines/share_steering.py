"""Split-softmax and SpotLight: steering set per head and query from the prompt's current share
of the attention (docs/remedies.md).

The steered key set of a row is its system turn after the first key: the first key is the
attention sink, which trained models attend to whatever the context holds (its mass does not
dilute with t, so raising it would steer nothing; `probes/attention.py` splits it off for the
same reason). For the query at continuation position t >= 1, with pi the softmax mass the
plain logits put on that set:
- split-softmax (Li et al. 2024, arXiv 2402.10962): the set's mass becomes pi^k (0 < k <= 1)
  and the other keys' 1 - pi^k, each set keeping its own proportions;
- SpotLight (arXiv 2505.12025): where pi < target a, the set's mass becomes exactly a; where
  pi >= a nothing changes.
Both are one logit b added to every key of the set: a softmax whose set mass is pi becomes one
whose set mass is s when the set's logits rise by logit(s) - logit(pi), and shifting one set's
logits keeps the proportions inside each set. So both ride on the attention function of
`attention_bias.py` as per-head additive logits, and the share the probe records under them is
the steered one. SpotLight's paper adds log(a / p), which lands at a / (a + 1 - p) < a; the
exact logit reaches the target, which is the closed loop's point.
"""

from __future__ import annotations

from typing import Any

import torch


def key_geometry(
    q_positions: torch.Tensor, kv_length: int, prompt_len: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(k_positions (B, kv), p (B, 1), t (B, q)): each cache slot's position in its row (left
    padding negative), the row's P, and each query's continuation position (0 in the prompt).

    q_positions: (B, q) absolute positions of the queries (0 = first prompt token); the last
    query of each row sits in cache slot kv_length - 1.
    """
    batch = q_positions.shape[0]
    p = prompt_len.to(q_positions.device).reshape(-1, 1).expand(batch, 1)  # (B, 1)
    pad = (kv_length - 1) - q_positions[:, -1:]  # (B, 1) left-padding width per row
    k_positions = torch.arange(kv_length, device=q_positions.device).view(1, -1) - pad  # (B, kv)
    t = (q_positions - p + 1).clamp_min(0)  # (B, q); 0 inside the prompt
    return k_positions, p, t


def steered_set(k_positions: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
    """(B, kv) bool: the row's system-turn keys after its first (the sink)."""
    return (k_positions >= 1) & (k_positions < p)


def split_softmax_bias(log_pi: torch.Tensor, k: float) -> torch.Tensor:
    """logit(pi^k) - logit(pi) from log pi (any shape); 0 where pi is 0 or 1 (nothing to
    move: no set mass, or no mass outside the set)."""
    log_s = k * log_pi
    b = (k - 1) * log_pi + torch.log1p(-torch.exp(log_pi)) - torch.log1p(-torch.exp(log_s))
    movable = torch.isfinite(b) & (log_pi < 0) & torch.isfinite(log_pi)
    return torch.where(movable, b, torch.zeros_like(b))


def spotlight_bias(log_pi: torch.Tensor, target: float) -> torch.Tensor:
    """logit(target) - logit(pi) where 0 < pi < target, else 0."""
    pi = torch.exp(log_pi)
    goal = torch.logit(torch.tensor(target, dtype=log_pi.dtype, device=log_pi.device))
    b = goal - (log_pi - torch.log1p(-pi))
    below = torch.isfinite(log_pi) & (pi < target)
    return torch.where(below & torch.isfinite(b), b, torch.zeros_like(b))


def share_bias(scores: torch.Tensor, q_positions: torch.Tensor, spec: Any) -> torch.Tensor:
    """(B, H, q, kv) additive logits of split-softmax (spec.kind split_softmax, spec.strength
    = k) or SpotLight (spotlight, strength = the target share) over the plain `scores`
    (B, H, q, kv, mask included); queries inside the prompt and rows with P <= 1 get none."""
    kv_len = scores.shape[-1]
    k_positions, p, t = key_geometry(q_positions, kv_len, spec.prompt_len)
    in_set = steered_set(k_positions, p)[:, None, None, :]  # (B, 1, 1, kv)
    floor = torch.finfo(scores.dtype).min
    log_total = torch.logsumexp(scores, dim=-1)  # (B, H, q)
    log_set = torch.logsumexp(torch.where(in_set, scores, floor), dim=-1)
    # an empty set's logsumexp over the floor is ~floor + log kv: no mass at all
    log_pi = torch.where(in_set.any(-1), (log_set - log_total).clamp_max(0), -torch.inf)
    if spec.kind == "split_softmax":
        b = split_softmax_bias(log_pi, spec.strength)
    elif spec.kind == "spotlight":
        b = spotlight_bias(log_pi, spec.strength)
    else:
        raise ValueError(f"unknown share steering {spec.kind!r}")
    b = torch.where((t > 0)[:, None, :], b, torch.zeros_like(b))  # (B, H, q)
    return b.unsqueeze(-1) * in_set  # (B, H, q, kv)
