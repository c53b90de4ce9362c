"""The table of scripts/gpu_check.sh: the probe's alpha per layer on this machine's device (in
`auto` and in bfloat16) against the CPU float32 reference, tok/s of the hf engine, peak memory.

    .venv/bin/python bench/gpu_check.py [--device cuda|cpu] [--model NAME] [--tokens N]
                                        [--layers 1,5,15,30]

The pair is bench/precision.py's (fr-vs-none chat prompts over a natural-text continuation of
--tokens tokens). The reference: `pair_divergence` on a float32 copy of the model on the CPU
(the project's reference numerics); the device rows: `HfBackend(dtype=...)`, which on CUDA
loads over the GPUs (device_map auto) and on --device cpu runs the same code path on the CPU.
alpha: rel_l2 at the 64 log-spaced positions from t_min = 16, a reduced dtype over the
positions above 3x its measured floor (none where they span under half a decade: "cannot
tell"), compared with the CPU float32 interval on those same positions. tok/s: `HfEngine`
(dtype auto), 8 greedy requests of 128 new tokens each, after one warm-up batch. Peak memory:
torch.cuda.max_memory_allocated on CUDA, the process's peak RSS on the CPU. The CPU model and
vector flags are printed beside the figures.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).parent))
from _limit import cpu_description  # noqa: E402  (bench/_limit.py, beside this file)
from precision import pair_ids  # noqa: E402  (bench/precision.py, beside this file)

from harness.analysis.powerlaw import fit_alpha, fit_positions  # noqa: E402
from harness.probes.precision import resolved  # noqa: E402


def kept_curves(arrays: dict, layers: list[int], t_min: int = 16) -> dict[int, np.ndarray]:
    """rel_l2 per layer as the fits see it: NaN under a reduced dtype's floor."""
    kept = resolved(arrays, t_min)
    rows = np.asarray(arrays["layers"]).tolist()
    return {layer: np.asarray(kept["rel_l2"][rows.index(layer)]) for layer in layers}


def alpha(curve: np.ndarray, t_min: int = 16):
    return fit_alpha(np.arange(1, curve.shape[0] + 1), curve, t_min=t_min)


def shown(fit) -> str:
    if not np.isfinite(fit.alpha):
        return f"none ({fit.n_points} positions)"
    return f"{fit.alpha:.3f} [{fit.ci_low:.2f}, {fit.ci_high:.2f}]"


def engine_rate(path: Path) -> float:
    from harness.engines.base import GenerationRequest, SamplingSettings
    from harness.engines.hf_engine import HfEngine

    engine = HfEngine(path, dtype="auto")
    settings = SamplingSettings(temperature=0.0, max_tokens=128, min_tokens=128, seed=0)
    requests = [GenerationRequest(prompt_ids=[1, 2, 3, 10 + i], sampling=settings)
                for i in range(8)]  # fmt: skip
    engine.generate(requests[:2])  # warm-up: kernels, allocator
    start = time.perf_counter()
    results = engine.generate(requests)
    seconds = time.perf_counter() - start
    engine.close()
    return sum(len(r.token_ids) for r in results) / seconds


def peak_memory(device: str) -> str:
    if device == "cuda":
        return f"{torch.cuda.max_memory_allocated() / 2**30:.2f} GiB GPU"
    return f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GiB RSS"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--layers", default="1,5,15,30")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("gpu_check: no CUDA device (use --device cpu)")
    if args.device == "cpu":
        torch.cuda.is_available = lambda: False  # the CPU path even where a GPU is present
    else:  # float32 means float32: no TF32 matmuls
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    from transformers import AutoModelForCausalLM

    from harness.models import resolve_model
    from harness.probes.backend import HfBackend
    from harness.probes.divergence import pair_divergence
    from harness.probes.hooks import n_hidden_states

    path = resolve_model(args.model).path
    a, b, cont = pair_ids(path, args.tokens)
    cpu = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    depth = n_hidden_states(cpu) - 1
    layers = [x for x in (int(v) for v in args.layers.split(",")) if x <= depth] or [depth]
    reference = kept_curves(pair_divergence(cpu, a, b, cont).to_arrays(), layers)
    del cpu
    gpu = args.device == "cuda"
    name = torch.cuda.get_device_name(0) if gpu else "CPU"
    print(f"device: {name}; {cpu_description()}; model {args.model}, T = {args.tokens}")
    print(f"| layer | alpha CPU float32 [95% CI] | dtype on {args.device} | alpha [95% CI] | "
          "CPU float32 on the positions kept | in that interval | floor rel_l2 | "
          "fit positions left out |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for dtype in ("auto", "bfloat16"):
        if gpu:
            torch.cuda.reset_peak_memory_stats()
        backend = HfBackend(path, dtype=dtype)
        arrays = backend.curves(a, b, cont).to_arrays()
        backend.close()
        mine = kept_curves(arrays, layers)
        floor = arrays.get("floor_rel_l2")
        grid = fit_positions(16, args.tokens)
        for layer in layers:
            fit, ref = alpha(mine[layer]), alpha(reference[layer])
            # the reference on the positions this dtype keeps (all of them in float32)
            same = alpha(np.where(np.isnan(mine[layer]), np.nan, reference[layer]))
            row = np.asarray(arrays["layers"]).tolist().index(layer)
            if np.isfinite(fit.alpha):
                inside = "yes" if same.ci_low <= fit.alpha <= same.ci_high else "NO"
            else:
                inside = "cannot tell (no alpha)"
            left_out = int(np.isnan(mine[layer][grid - 1]).sum())
            print(f"| {layer} | {shown(ref)} | {str(arrays.get('dtype', 'float32'))} | "
                  f"{shown(fit)} | {shown(same)} | {inside} | "
                  f"{'-' if floor is None else f'{floor[row]:.2e}'} | {left_out} |")  # fmt: skip
        print(f"peak memory ({dtype} probe): {peak_memory(args.device)}")
    print(f"hf engine (dtype auto, 8 x 128 greedy): {engine_rate(path):.1f} tok/s on "
          f"{name}")  # fmt: skip


if __name__ == "__main__":
    main()
