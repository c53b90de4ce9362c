"""The output head, run by the probe itself, and the next-token gaps of the pair's two rows.

The head runs on HEAD_SLICE positions at a time and each slice's logits are reduced to
delta_logp and KL at once, so no chunk-sized (2, q, V) logits tensor exists; on CPU (and below
float32) each slice's logits are computed VOCAB_SLICE vocabulary columns per matmul.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from harness.errors import UserError

# logits exist HEAD_SLICE positions at a time, so one whole-sequence forward (chunk None, the
# default) holds one layer's activations at a time and no KV cache: the fastest and, on CPU up to
# the embedded model's 8192 context, the leanest choice (bench/probe.py). Chunks over a KV cache
# cap activations for very long contexts at the price of a cache that grows with T.
HEAD_SLICE = 256
GAP_SLICE = 64
# On CPU the head runs VOCAB_SLICE rows of its weight at a time, each product written straight
# into its columns of the logits: a slice's output stays in cache while BLAS writes it, where the
# whole (2s, V) product streams through memory. The 576 x 49,152 head of the embedded model went
# from 93 to 128 GFLOP/s at 512 rows, with bit-identical logits; the whole probe is 2-5 % faster
# (bench/probe.py, "probe, whole head" beside it).
VOCAB_SLICE = 1024


def output_head(model: Any) -> Any:
    """hidden (2, s, d) after the final norm -> logits (2, s, V), as the model's own forward.

    The probe runs the decoder (`model.model`) and applies the head itself, a slice of positions
    at a time: a chunk's full (2, q, V) logits never exist, which is what lets chunks be long.
    """
    head = model.get_output_embeddings()
    cap = getattr(model.config, "final_logit_softcapping", None)
    if head is None or getattr(model.config, "logit_scale", None) is not None:
        raise UserError(f"{type(model).__name__}: the probe needs a plain lm_head output layer")
    if isinstance(head, torch.nn.Linear):
        head = vocab_sliced(head)
    if not cap:
        return head
    return lambda hidden: torch.tanh(head(hidden) / cap) * cap


def vocab_sliced(linear: torch.nn.Linear) -> Callable[[torch.Tensor], torch.Tensor]:
    """`linear` as a function (..., d) -> (..., V) float32 that, on CPU or below float32,
    computes VOCAB_SLICE output columns per matmul into one logits tensor; a float32 model on
    a GPU runs `linear` itself. Below float32 each slice of the weight is upcast, so the logits
    of a bf16 model are its states' exact float32 products (bf16 logits would round the
    log-prob gaps at ~4e-3). The weight is read at each call, so the function follows weights
    loaded after it was made."""

    def logits(hidden: torch.Tensor) -> torch.Tensor:
        weight, bias = linear.weight, linear.bias
        reduced = weight.dtype != torch.float32
        if weight.device.type != "cpu" and not reduced:
            return linear(hidden.to(weight.device))
        x = hidden.reshape(-1, hidden.shape[-1]).to(weight.device, torch.float32)
        out = torch.empty(x.shape[0], weight.shape[0], dtype=x.dtype, device=x.device)
        for lo in range(0, weight.shape[0], VOCAB_SLICE):
            cols = slice(lo, lo + VOCAB_SLICE)
            w = weight[cols].float() if reduced else weight[cols]
            if bias is None:
                torch.mm(x, w.t(), out=out[:, cols])
            else:
                torch.addmm(bias[cols].float(), x, w.t(), out=out[:, cols])
        return out.view(*hidden.shape[:-1], weight.shape[0])

    return logits


def next_token_gaps(logits: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """logits (2, s, V) of rows A, B predicting targets (s,) -> delta_logp (s,), kl (s,).

    float32, written so that nothing cancels when the two distributions nearly agree (late t,
    where KL sits orders of magnitude below float32's epsilon relative to the log-probs): with
    d = z_A - z_B centred so that E_pB[d] = 0, u = log p_A - log p_B = d - log E_pB[exp d] is
    exact to float32 relative precision, and KL(p_A || p_B) = E_pB[e^u u]. Two row-wise
    log-softmaxes subtracted would leave a ~1e-6 floor under every KL and delta_logp.
    """
    # Sums are torch's pairwise .sum (a BLAS dot product loses ~1e-5 relative here) and every
    # expectation is divided by sum(p_B), which float32 log-softmax leaves ~1e-5 away from 1.
    # Two scratch (s, V) buffers are reused in place: on CPU a fresh multi-MB temporary per
    # step costs more than the arithmetic.
    za, zb = logits[0].float(), logits[1].float()
    pb = torch.log_softmax(zb, dim=-1).exp_()  # (s, V); cheaper than softmax on CPU
    mass = pb.sum(-1, keepdim=True)  # (s, 1), ~1

    def expect(buf: torch.Tensor) -> torch.Tensor:  # E_pB[buf] with buf already times p_B
        return buf.sum(-1, keepdim=True) / mass

    d = torch.sub(za, zb)
    scratch = torch.mul(pb, d)
    d -= expect(scratch)
    log_ratio = torch.log1p(expect(torch.expm1(d, out=scratch).mul_(pb)))  # lse_A - lse_B
    u = d.sub_(log_ratio)  # log p_A - log p_B
    kl = expect(torch.exp(u, out=scratch).mul_(pb).mul_(u)).view(-1).clamp_min(0.0)
    delta = u.gather(-1, targets.view(-1, 1).to(u.device)).squeeze(-1)
    return delta.double().cpu(), kl.double().cpu()


def head_gaps(head: Any, hidden: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """hidden (2, q, d), q >= len(targets): next-token gaps of every target position.

    The head runs HEAD_SLICE positions per matmul (smaller ones cost BLAS efficiency) and the
    gaps GAP_SLICE at a time (their (s, V) scratch buffers then stay in cache-friendly sizes).
    """
    delta, kl = [], []
    n = targets.shape[0]
    for start in range(0, n, HEAD_SLICE):
        stop = min(start + HEAD_SLICE, n)
        logits = head(hidden[:, start:stop])  # (2, s, V)
        for sub in range(0, stop - start, GAP_SLICE):
            part = slice(sub, min(sub + GAP_SLICE, stop - start))
            gaps = next_token_gaps(logits[:, part], targets[start:stop][part])
            delta.append(gaps[0])
            kl.append(gaps[1])
        del logits
    return torch.cat(delta), torch.cat(kl)
