"""Probe cost on the embedded model: speed against a bare forward, and peak memory by T.

    .venv/bin/python bench/probe.py [--model NAME] [--ratio-tokens 1024]
                                    [--rss-tokens 1024,2048,4096,8192] [--chunk 256]

1. tokens/s of `pair_divergence` (all L+1 hidden states reduced in hooks, delta_logp, KL) vs
   (a) one plain forward of the same two sequences (batch of 2, logits for every position) and
   (b) the same chunked KV-cache forward without hooks or reductions; one run each, ratios
   printed (target overhead <= 10 % against the plain forward).
2. peak RSS of a probe at each T, each in a fresh subprocess (ru_maxrss is a process-lifetime
   peak), next to what a KV cache and what stored (L+1, T, d) states of both rows would take.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

import torch

PROMPT_A = (
    "<|im_start|>system\nAlways answer in French.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
)
PROMPT_B = (
    "<|im_start|>system\nAlways answer in German.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
)


def _setup(model_name: str, tokens: int):
    from harness.probes.experiment import load_hf
    from harness.probes.pairs import encode_text

    model, tokenizer = load_hf(model_name)
    a, b = encode_text(tokenizer, PROMPT_A), encode_text(tokenizer, PROMPT_B)
    g = torch.Generator().manual_seed(0)
    cont = torch.randint(100, 40000, (tokens,), generator=g).tolist()
    return model, a, b, cont


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


@torch.no_grad()
def _plain_forward(model, a, b, cont) -> None:
    width = max(len(a), len(b))
    ids = torch.zeros(2, width + len(cont), dtype=torch.long)
    mask = torch.zeros_like(ids)
    for row, p in enumerate((a, b)):
        ids[row, width - len(p) :] = torch.tensor(p + cont)
        mask[row, width - len(p) :] = 1
    positions = (mask.cumsum(-1) - 1).clamp_min(0)
    model(ids, attention_mask=mask, position_ids=positions, use_cache=False)


@torch.no_grad()
def _chunked_forward(model, a, b, cont, chunk: int) -> None:
    from transformers import DynamicCache

    width = max(len(a), len(b))
    ids = torch.zeros(2, width, dtype=torch.long)
    mask = torch.zeros(2, width + len(cont), dtype=torch.long)
    for row, p in enumerate((a, b)):
        ids[row, width - len(p) :] = torch.tensor(p)
        mask[row, width - len(p) :] = 1
    p_len = torch.tensor([len(a), len(b)]).view(2, 1)
    cache = DynamicCache(config=model.config)
    positions = (torch.arange(width).view(1, -1) - (width - p_len)).clamp_min(0)
    model(ids, attention_mask=mask[:, :width], position_ids=positions, past_key_values=cache)
    c = torch.tensor(cont)
    for start in range(0, len(cont), chunk):
        stop = min(start + chunk, len(cont))
        model(
            c[start:stop].expand(2, -1),
            attention_mask=mask[:, : width + stop],
            position_ids=p_len + torch.arange(start, stop).view(1, -1),
            past_key_values=cache,
        )


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def speed(model_name: str, tokens: int, chunk: int) -> None:
    from harness.probes.divergence import pair_divergence

    model, a, b, cont = _setup(model_name, tokens)
    _plain_forward(model, a, b, cont[:32])  # warm-up: first-call allocations and dispatch
    plain = _timed(lambda: _plain_forward(model, a, b, cont))
    chunked = _timed(lambda: _chunked_forward(model, a, b, cont, chunk))
    probe = _timed(lambda: pair_divergence(model, a, b, cont, chunk=chunk))
    rate = 2 * tokens  # continuation tokens of both rows
    print(f"speed, {model_name}, T = {tokens}, chunk {chunk} (one run each)")
    print(f"  plain forward     {plain:7.2f} s  {rate / plain:8.1f} tok/s")
    print(f"  chunked, no hooks {chunked:7.2f} s  {rate / chunked:8.1f} tok/s")
    print(f"  probe             {probe:7.2f} s  {rate / probe:8.1f} tok/s")
    print(f"  probe / plain = {probe / plain:.3f}   probe / chunked = {probe / chunked:.3f}")


def rss_child(model_name: str, tokens: int, chunk: int) -> None:
    from harness.probes.divergence import pair_divergence

    model, a, b, cont = _setup(model_name, tokens)
    # T = 8192 means "up to the context": the prompt takes its share of the window
    room = model.config.max_position_embeddings - max(len(a), len(b))
    cont, tokens = cont[:room], min(tokens, room)
    # a short probe first: the first forward allocates T-independent buffers (packed weights,
    # allocator pools) that would otherwise be charged to the long run
    pair_divergence(model, a, b, cont[:32], chunk=chunk)
    loaded = _rss_mib()
    start = time.perf_counter()
    pair_divergence(model, a, b, cont, chunk=chunk)
    cfg = model.config
    kv_heads = cfg.num_key_value_heads
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    n = max(len(a), len(b)) + tokens
    kv = cfg.num_hidden_layers * 2 * 2 * kv_heads * head_dim * n * 4 / 2**20  # k,v x 2 rows
    states = (cfg.num_hidden_layers + 1) * tokens * cfg.hidden_size * 2 * 4 / 2**20
    print(json.dumps({"T": tokens, "loaded": loaded, "peak": _rss_mib(), "kv": kv,
                      "states": states, "seconds": time.perf_counter() - start}))  # fmt: skip


def rss_table(model_name: str, token_list: list[int], chunk: int) -> None:
    print(f"peak RSS, {model_name}, chunk {chunk} (fresh process per T)")
    print(f"{'T':>6} {'warmed up':>11} {'peak':>9} {'peak-warm':>10} {'KV cache':>9} "
          f"{'(L+1)Td x2':>11} {'seconds':>8}")  # fmt: skip
    for tokens in token_list:
        proc = subprocess.run(
            [
                sys.executable,
                __file__,
                "--rss-child",
                str(tokens),
                "--model",
                model_name,
                "--chunk",
                str(chunk),
            ],  # fmt: skip
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            print(f"{tokens:>6} failed: {proc.stderr.strip().splitlines()[-1:]}")
            continue
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        print(f"{r['T']:>6} {r['loaded']:>8.0f} MiB {r['peak']:>5.0f} MiB "
              f"{r['peak'] - r['loaded']:>6.0f} MiB {r['kv']:>5.0f} MiB {r['states']:>7.0f} MiB "
              f"{r['seconds']:>8.1f}", flush=True)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--ratio-tokens", type=int, default=1024)
    parser.add_argument("--rss-tokens", default="1024,2048,4096,8192")
    parser.add_argument("--chunk", type=int, default=256)
    parser.add_argument("--rss-child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rss_child:
        rss_child(args.model, args.rss_child, args.chunk)
        return
    if args.ratio_tokens > 0:
        speed(args.model, args.ratio_tokens, args.chunk)
    tokens = [int(t) for t in args.rss_tokens.split(",") if t.strip()]
    if tokens:
        rss_table(args.model, tokens, args.chunk)


if __name__ == "__main__":
    main()
