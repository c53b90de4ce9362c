"""The machine's own limit, which every bench prints its throughputs against.

`measure_limit(model_path)` times fp32 matmuls of the model's own projection shapes (torch, all
cores this process may use) and turns the best rate into tokens/s: a token costs 2 x
(parameters) FLOPs through the weights (the tied LM head counted once, as it runs once) plus
attention, 4 x layers x context x (heads x head_dim) FLOPs at the run's mean context. A
throughput divided by that limit is the share of the machine a stage uses.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Limit:
    gflops: float  # measured fp32 matmul rate, GFLOP/s
    weight_flops: float  # FLOPs per token through the weights
    attention_flops_per_ctx: float  # FLOPs per token per token of context
    threads: int

    def tokens_per_s(self, context: float) -> float:
        return self.gflops * 1e9 / self.flops_per_token(context)

    def flops_per_token(self, context: float) -> float:
        return self.weight_flops + self.attention_flops_per_ctx * context

    def fraction(self, tok_s: float, context: float) -> str:
        """`tok_s` as a share of the limit at `context`, e.g. '41 % of 560'."""
        limit = self.tokens_per_s(context)
        return f"{100 * tok_s / limit:3.0f} % of {limit:.0f}"

    def describe(self) -> str:
        return (
            f"machine limit: fp32 matmul {self.gflops:.1f} GFLOP/s on {self.threads} threads "
            f"(model projection shapes, best of them) -> {self.tokens_per_s(0):.0f} tok/s at "
            f"context 0, {self.tokens_per_s(512):.0f} at 512, {self.tokens_per_s(2048):.0f} "
            "at 2048 (2 x weights + attention FLOPs per token)"
        )


def model_flops(model_path: Path) -> tuple[float, float, list[tuple[int, int]]]:
    """(FLOPs per token through the weights, attention FLOPs per token per context token,
    the (in, out) shapes of the projections) from the checkpoint's config.json."""
    cfg = json.loads((Path(model_path) / "config.json").read_text())
    d, ff, layers = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    heads = cfg["num_attention_heads"]
    head_dim = cfg.get("head_dim") or d // heads
    kv = cfg.get("num_key_value_heads", heads) * head_dim
    q = heads * head_dim
    per_layer = d * q + 2 * d * kv + q * d + 3 * d * ff  # q, k, v, o, gate + up + down
    weights = layers * per_layer + d * cfg["vocab_size"]  # + LM head
    # scores (q . k) and the weighted sum of values: 2 FLOPs each per context token per dim
    attention = 4 * layers * q
    shapes = [(d, q), (d, kv), (q, d), (d, ff), (ff, d)]
    return 2.0 * weights, float(attention), shapes


def measure_limit(
    model_path: Path, tokens: int = 512, seconds: float = 0.3, rounds: int = 3
) -> Limit:
    """Best fp32 matmul rate over the model's projection shapes at `tokens` rows, over
    `rounds` passes (a shared machine's neighbours only ever slow a pass down)."""
    import torch

    weight_flops, attention, shapes = model_flops(model_path)
    best = 0.0
    with torch.inference_mode():
        for d_in, d_out in shapes * rounds:
            a, b = torch.randn(tokens, d_in), torch.randn(d_in, d_out)
            for _ in range(3):  # warm-up: page in, pick kernels
                a @ b
            reps, start = 0, time.perf_counter()
            while (elapsed := time.perf_counter() - start) < seconds:
                a @ b
                reps += 1
            best = max(best, 2 * tokens * d_in * d_out * reps / elapsed / 1e9)
    return Limit(best, weight_flops, attention, torch.get_num_threads())


def cpu_description() -> str:
    """The CPU model and its vector flags, printed beside every throughput figure."""
    import platform

    info = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").is_file() else ""
    fields = dict(
        line.split(":", 1) for line in info.split("\n\n", 1)[0].splitlines() if ":" in line
    )
    model = fields.get("model name\t", platform.processor()).strip()
    flags = fields.get("flags\t\t", "").split()
    vector = sorted(f for f in flags if f.startswith(("avx", "fma", "amx", "sse4")))
    return f"CPU: {model} ({platform.machine()}), vector flags: {' '.join(vector) or 'unknown'}"
