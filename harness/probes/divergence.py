"""Paired-prompt divergence: hidden-state distances per layer and next-token log-prob gaps.

Both sequences ids(A)+c and ids(B)+c run in one batch of two rows (left padding, position ids
from 0 at each row's first real token). The prompts are prefilled once into a `DynamicCache`;
the shared continuation c then goes through in chunks, so peak memory is one chunk's activations
plus the KV cache. Forward hooks reduce each hidden state to three numbers per position the
moment it is produced (l2, rel_l2, cos_dist), so results are O(L*T) floats; no (L, T, d) tensor is
ever kept. The output head runs on HEAD_SLICE positions at a time and each slice's logits are
reduced to delta_logp and KL at once, so no chunk-sized (2, q, V) logits tensor exists either;
on CPU each slice's logits are computed VOCAB_SLICE vocabulary columns per matmul.

Hidden-state index l follows transformers' `output_hidden_states`: l = 0 is the input of the first
decoder layer (the embeddings), l = 1..L-1 the output of decoder layer l-1, l = L the final norm.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from harness.engines.attention_bias import attention_bias
from harness.engines.device import input_device
from harness.errors import UserError
from harness.probes.arrays import ATTENTION_KEYS
from harness.probes.attention import ShareRecorder, share_recording
from harness.probes.precision import FLOOR_KEYS

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


HIDDEN_METRICS = ("l2", "rel_l2", "cos_dist")  # per hidden-state index and position
KL_BOUNDS = ("kl_low", "kl_high")  # (T,) each, only where the KL is not exact


@dataclass
class PairDivergence:
    """Per-pair curves; position index i holds continuation position t = i + 1."""

    layers: list[int]  # hidden-state indices kept, rows of the (n_layers, T) arrays
    l2: np.ndarray  # (n_layers, T)
    rel_l2: np.ndarray  # (n_layers, T)
    cos_dist: np.ndarray  # (n_layers, T)
    delta_logp: np.ndarray  # (T,)
    kl: np.ndarray  # (T,)
    prompt_lens: tuple[int, int]
    identical_prompts: bool
    attention: dict[str, np.ndarray] = field(default_factory=dict)  # ATTENTION_KEYS; {}: none
    # the KL's bracket where it is not exact (the openai backend's top-k lists, probes/topk.py)
    kl_low: np.ndarray | None = None
    kl_high: np.ndarray | None = None
    # below float32: the model's dtype and its measured rounding floor (probes/floor.py)
    dtype: str = "float32"
    floor: dict[str, np.ndarray] = field(default_factory=dict)

    def to_arrays(self, hidden_dtype: Any = np.float64) -> dict[str, np.ndarray]:
        """The curves as named arrays for an .npz unit; hidden_dtype float32 halves a stored
        unit where exact re-assembly is not needed."""
        return {
            "layers": np.asarray(self.layers),
            **{m: getattr(self, m).astype(hidden_dtype) for m in HIDDEN_METRICS},
            "delta_logp": self.delta_logp,
            "kl": self.kl,
            "prompt_lens": np.asarray(self.prompt_lens),
            "identical": np.asarray(self.identical_prompts),
            **self.attention,
            **{m: getattr(self, m) for m in KL_BOUNDS if getattr(self, m) is not None},
            **({"dtype": np.asarray(self.dtype)} if self.dtype != "float32" else {}),
            **self.floor,
        }

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> PairDivergence:
        return cls(
            layers=arrays["layers"].tolist(),
            **{m: arrays[m] for m in (*HIDDEN_METRICS, "delta_logp", "kl")},
            prompt_lens=tuple(arrays["prompt_lens"].tolist()),
            identical_prompts=bool(arrays["identical"]),
            attention={k: arrays[k] for k in ATTENTION_KEYS if k in arrays},
            **{m: arrays[m] for m in KL_BOUNDS if m in arrays},
            dtype=str(arrays["dtype"]) if "dtype" in arrays else "float32",
            floor={k: arrays[k] for k in FLOOR_KEYS if k in arrays},
        )


def decoder_parts(model: Any) -> tuple[torch.nn.ModuleList, torch.nn.Module]:
    """(decoder layers, final norm) of a llama-style causal LM (llama, qwen2, mistral, ...)."""
    base = getattr(model, "model", None)
    layers = getattr(base, "layers", None)
    norm = getattr(base, "norm", None)
    if layers is None or norm is None:
        raise UserError(
            f"{type(model).__name__}: the probe needs a llama-style model "
            "(model.layers, model.norm)"
        )
    return layers, norm


def n_hidden_states(model: Any) -> int:
    """L + 1: the number of hidden-state indices (0 = embeddings ... L = final norm)."""
    return len(decoder_parts(model)[0]) + 1


def resolve_layers(spec: str | Sequence[int] | None, n_states: int) -> list[int]:
    """'all' / None -> 0..L; a list or comma string of indices, each checked against 0..L."""
    if spec is None or (isinstance(spec, str) and spec.strip() == "all"):
        return list(range(n_states))
    if isinstance(spec, str):
        try:
            spec = [int(part) for part in spec.split(",") if part.strip()]
        except ValueError:
            msg = f"--layers must be 'all' or comma-separated integers, got '{spec}'"
            raise UserError(msg) from None
    layers = sorted(set(spec))
    bad = [i for i in layers if not 0 <= i < n_states]
    if bad or not layers:
        raise UserError(f"layer index {bad or spec} out of range: this model has 0..{n_states - 1}")
    return layers


class StateReducer:
    """Holds the (n_layers, T) result arrays; the hooks write the continuation part of each span.

    `start` is the sequence position of the current forward's first token; positions before
    `width` (the padded prompt) are skipped, position p >= width lands at index p - width.
    """

    def __init__(self, layers: list[int], width: int, total: int) -> None:
        self.row = {layer: i for i, layer in enumerate(layers)}
        self.width = width
        self.start = 0
        self.l2 = torch.zeros(len(layers), total, dtype=torch.float64)
        self.rel_l2 = torch.zeros_like(self.l2)
        self.cos_dist = torch.zeros_like(self.l2)

    @torch.no_grad()
    def reduce(self, layer: int, hidden: torch.Tensor) -> None:
        row = self.row.get(layer)
        skip = max(0, self.width - self.start)
        if row is None or skip >= hidden.shape[1]:
            return
        # float32 is enough: the states are float32, a - b is exact for close values, and the
        # squared unit-vector gap keeps cos_dist accurate far below float32's epsilon
        a, b = hidden[0, skip:].float(), hidden[1, skip:].float()  # (q, d) each: rows A and B
        na, nb = a.norm(dim=-1), b.norm(dim=-1)  # (q,)
        l2 = (a - b).norm(dim=-1)  # (q,)
        tiny = torch.finfo(torch.float32).tiny
        # 1 - cos = ||a/|a| - b/|b|||^2 / 2: no cancellation when the states nearly agree
        unit_gap = a / na.clamp_min(tiny).unsqueeze(-1) - b / nb.clamp_min(tiny).unsqueeze(-1)
        first = self.start + skip - self.width
        window = slice(first, first + a.shape[0])
        # .cpu(): under device_map="auto" a layer's states may sit on any GPU
        self.l2[row, window] = l2.cpu()
        self.rel_l2[row, window] = (l2 / ((na + nb) / 2).clamp_min(tiny)).cpu()
        self.cos_dist[row, window] = (unit_gap.pow(2).sum(-1) / 2).cpu()


@contextmanager
def reduction_hooks(model: Any, reducer: StateReducer) -> Iterator[None]:
    """Hooks that feed every hidden state to `reducer`; removed in `finally`."""
    layers, norm = decoder_parts(model)
    handles = []

    def first_input(_module, args, kwargs):  # hidden state 0 = what layer 0 receives
        reducer.reduce(0, args[0] if args else kwargs["hidden_states"])

    def output_of(index: int):
        def hook(_module, _args, output):
            reducer.reduce(index, output[0] if isinstance(output, tuple) else output)

        return hook

    try:
        handles.append(layers[0].register_forward_pre_hook(first_input, with_kwargs=True))
        # decoder layer i gives state i+1, except the last one: state L is after the final norm
        for i, layer in enumerate(layers[:-1]):
            handles.append(layer.register_forward_hook(output_of(i + 1)))
        handles.append(norm.register_forward_hook(output_of(len(layers))))
        yield
    finally:
        for handle in handles:
            handle.remove()


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


def check_inputs(
    ids_a: list[int],
    ids_b: list[int],
    cont: list[int],
    context: int | None,
    vocab: int | None = None,
) -> None:
    if not ids_a or not ids_b:
        raise UserError("prompt A and prompt B must each have at least one token (empty prompt)")
    if not cont:
        raise UserError("the continuation is empty")
    if vocab is not None:
        for name, ids in (("prompt A", ids_a), ("prompt B", ids_b), ("the continuation", cont)):
            bad = [i for i in ids if not 0 <= i < vocab]
            if bad:
                raise UserError(f"{name} has token id {bad[0]}, outside this model's vocabulary "
                                f"of {vocab}")  # fmt: skip
    total = max(len(ids_a), len(ids_b)) + len(cont)
    if context is not None and total > context:
        raise UserError(
            f"prompt ({max(len(ids_a), len(ids_b))} tokens) + continuation ({len(cont)}) = "
            f"{total} tokens exceeds the model's context of {context}"
        )


def padded_pair(
    ids_a: Sequence[int], ids_b: Sequence[int], continuation: Sequence[int], device: Any = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(2, width + T) left-padded ids(A)+c and ids(B)+c, their attention mask, and position ids
    from 0 at each row's first real token. The pad id is irrelevant: padded keys are masked."""
    width = max(len(ids_a), len(ids_b))
    seq = torch.zeros(2, width + len(continuation), dtype=torch.long, device=device)
    mask = torch.zeros_like(seq)
    for row, ids in enumerate((ids_a, ids_b)):
        seq[row, width - len(ids) :] = torch.tensor(list(ids) + list(continuation), device=device)
        mask[row, width - len(ids) :] = 1
    return seq, mask, (mask.cumsum(-1) - 1).clamp_min(0)


def forward_spans(width: int, total: int, chunk: int | None) -> list[tuple[int, int]]:
    """(start, stop) sequence positions of each forward: the prompts go in with the first chunk
    (a forward from an empty cache with equal-length prompts needs no mask and takes SDPA's
    causal kernel, markedly faster on CPU than masked attention against a cache); chunk None
    is one whole-sequence forward."""
    step = chunk or total
    bounds = [0, *range(width + min(step, total), width + total, step), width + total]
    return list(zip(bounds[:-1], bounds[1:], strict=True))


@torch.no_grad()
def pair_divergence(
    model: Any,
    ids_a: list[int],
    ids_b: list[int],
    continuation: list[int],
    layers: Sequence[int] | None = None,
    chunk: int | None = None,
    lam: float | None = None,
    bias_layers: Sequence[int] | None = None,
) -> PairDivergence:
    """Divergence curves of one pair over the shared continuation (T = len(continuation)).

    chunk: continuation tokens per forward after the first (which also takes the prompts);
    None runs the whole sequence in one forward without a KV cache.
    lam: run under the attention bias of `attention_bias.py` (None = plain model).
    """
    from transformers import DynamicCache

    context = getattr(model.config, "max_position_embeddings", None)
    vocab = model.get_input_embeddings().num_embeddings
    check_inputs(ids_a, ids_b, continuation, context, vocab)
    n_states = n_hidden_states(model)
    kept = resolve_layers(layers, n_states)
    device = input_device(model)  # under a device map: the first GPU's
    lens = (len(ids_a), len(ids_b))
    width = max(lens)
    total = len(continuation)

    seq, mask, positions = padded_pair(ids_a, ids_b, continuation, device)  # (2, width + T)
    cont = seq[0, width:]  # (T,)
    padded = lens[0] != lens[1]

    reducer = StateReducer(kept, width, total)
    shares = ShareRecorder(kept, lens[0], width, total)  # row A's attention on its prompt
    delta = torch.zeros(total, dtype=torch.float64)
    kl = torch.zeros(total, dtype=torch.float64)
    cache = DynamicCache(config=model.config) if chunk else None
    decoder, head = model.get_decoder(), output_head(model)
    bias = attention_bias(model, list(lens), lam, bias_layers) if lam is not None else nullcontext()
    with bias, share_recording(model, shares), reduction_hooks(model, reducer):
        for start, stop in forward_spans(width, total, chunk):
            reducer.start = start
            out = decoder(
                input_ids=seq[:, start:stop],
                attention_mask=mask[:, :stop] if padded else None,
                position_ids=positions[:, start:stop],
                past_key_values=cache,
                use_cache=cache is not None,
            )
            # sequence position p predicts c at index p + 1 - width (the last prompt token, c_1)
            first, last = max(start, width - 1), min(stop, width + total - 1)
            if last > first:
                hidden = out.last_hidden_state[:, first - start : last - start]
                targets = cont[first + 1 - width : last + 1 - width]
                window = slice(first + 1 - width, last + 1 - width)
                delta[window], kl[window] = head_gaps(head, hidden, targets)
            del out
    return PairDivergence(
        layers=kept,
        l2=reducer.l2.numpy(),
        rel_l2=reducer.rel_l2.numpy(),
        cos_dist=reducer.cos_dist.numpy(),
        delta_logp=delta.numpy(),
        kl=kl.numpy(),
        prompt_lens=lens,
        identical_prompts=list(ids_a) == list(ids_b),
        attention=shares.arrays() if shares.layers else {},
    )
