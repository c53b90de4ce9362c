"""Next-token influence from top-k log-probs (an endpoint's `prompt_logprobs`), with the KL
bracketed between a bound that always holds and one that holds under a stated premise.

At one position each arm returns its k most likely tokens and the actual next token c_t, with
log-probabilities. delta_logp = log p_A(c_t) - log p_B(c_t) is exact (c_t is in both lists).
For KL(p_A || p_B) (docs/architecture.md, "Metrics: next-token influence through an
endpoint"), with K the tokens both arms returned, rho = log p_A - log p_B on K, and the rest
G = V \\ K carrying a = 1 - p_A(K) and b = 1 - p_B(K):

- `kl_low` = sum_K p_A rho + a log(a / b): the KL of the two distributions with G merged into
  one outcome; merging never raises a KL (log-sum inequality), so kl_low <= KL always. It is
  also the estimate written as `kl`.
- `kl_high` = sum_K p_A rho + a * lam. Exactly, KL = sum_K p_A rho + a * mu, mu the p_A-weighted
  mean of rho over G; no finite bound on mu follows from top-k lists (one token of G with
  p_A > 0 and p_B -> 0 sends KL to infinity), so kl_high assumes mu <= lam, lam the largest
  log-ratio the lists show or imply: rho on K, log(a / b) (mu >= it, proven), and for a token
  only A listed, log p_A - log m_B (m_B: B's k-th probability, above any token B did not list).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class TopK:
    """One arm's list at one position: log-probs by token id, and the k-th largest
    probability of the ranked top-k (None when the list is the whole vocabulary)."""

    logprobs: dict[int, float]
    floor: float | None


def parse_entry(entry: dict, k: int) -> TopK:
    """One `prompt_logprobs` entry of vLLM's completions API: {id: {logprob, rank, ...}}."""
    logprobs, ranked = {}, []
    for token, info in entry.items():
        value = float(info["logprob"])
        logprobs[int(token)] = value
        rank = info.get("rank")
        if rank is not None and int(rank) <= k:
            ranked.append(value)
    floor = math.exp(min(ranked)) if len(ranked) >= k else None
    return TopK(logprobs, floor)


def _log_tail(logprobs: list[float]) -> float:
    """log(1 - sum exp(logprobs)), -inf when the listed tokens hold all the mass."""
    top = max(logprobs)
    total = top + math.log(sum(math.exp(v - top) for v in logprobs))
    return math.log(-math.expm1(total)) if total < 0 else -math.inf


def topk_gaps(arm_a: TopK, arm_b: TopK, target: int) -> tuple[float, float, float]:
    """(delta_logp, kl_low, kl_high) at one position from the two arms' lists."""
    delta = arm_a.logprobs[target] - arm_b.logprobs[target]
    shared = [tok for tok in arm_a.logprobs if tok in arm_b.logprobs]
    la = [arm_a.logprobs[tok] for tok in shared]
    lb = [arm_b.logprobs[tok] for tok in shared]
    rho = [x - y for x, y in zip(la, lb, strict=True)]
    head = math.fsum(math.exp(x) * r for x, r in zip(la, rho, strict=True))
    log_a, log_b = _log_tail(la), _log_tail(lb)
    if log_a == -math.inf:  # A's whole mass is on K: nothing is unseen
        return delta, max(head, 0.0), max(head, 0.0)
    if log_b == -math.inf:  # float rounding left B no tail although A has one
        log_b = math.log(1e-12)  # a tail below 1e-12 of B's mass: the estimate's floor
    tail_ratio = log_a - log_b
    lam = max([*rho, tail_ratio])
    if arm_b.floor is not None:  # tokens only A listed: p_B <= B's k-th probability
        only_a = [v for tok, v in arm_a.logprobs.items() if tok not in arm_b.logprobs]
        lam = max([lam, *(v - math.log(arm_b.floor) for v in only_a)])
    mass = math.exp(log_a)
    low = max(head + mass * tail_ratio, 0.0)
    return delta, low, max(head + mass * lam, low)
