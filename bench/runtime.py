"""vLLM's CPU runtime, each lever alone, side by side in one run: what the engine process
preloads (tcmalloc, Intel OpenMP) and how its OpenMP threads are bound.

    .venv/bin/python bench/runtime.py [--quick] [--only LABEL,...]

Every variant runs in a fresh process (LD_PRELOAD is read when a process starts): one engine
start, then greedy decode at 8 x 256 and 64 x 256 tokens, printed as tokens/s, as a ratio to
the baseline and as a share of the machine's limit (bench/_limit.py). The baseline runs first
and again last, so the table shows how far two runs of the same thing drift on this machine.
Also printed: the CPU the harness process itself used per second of decoding (vLLM's output
processing and detokenisation run there, on the cores the engine's threads are bound to).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

from _limit import measure_limit

CORES = f"0-{os.cpu_count() - 1}"
VARIANTS = [  # label, environment
    ("baseline", {"HARNESS_CPU_PRELOAD": "none"}),
    ("tcmalloc", {"HARNESS_CPU_PRELOAD": "tcmalloc"}),
    ("iomp", {"HARNESS_CPU_PRELOAD": "iomp"}),
    ("tcmalloc+iomp", {"HARNESS_CPU_PRELOAD": "tcmalloc,iomp"}),
    ("bind-auto", {"HARNESS_CPU_PRELOAD": "none", "VLLM_CPU_OMP_THREADS_BIND": "auto"}),
    ("nobind", {"HARNESS_CPU_PRELOAD": "none", "VLLM_CPU_OMP_THREADS_BIND": "nobind"}),
    ("baseline-again", {"HARNESS_CPU_PRELOAD": "none"}),
]  # fmt: skip


def child(sizes: list[tuple[int, int]]) -> None:
    from generation import throughput

    from harness.engines import make_engine
    from harness.engines.vllm_engine import RUNTIME
    from harness.models import resolve_model

    path = resolve_model("smollm2-135m-instruct").path
    start = time.perf_counter()
    engine = make_engine("vllm", path, max_model_len=2048)
    out = {"start_s": time.perf_counter() - start, "runtime": dict(RUNTIME), "tok_s": {}}
    for n, tokens in sizes:
        cpu0, wall0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        out["tok_s"][f"{n}x{tokens}"] = throughput(engine, n, tokens)
        cpu1, wall = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter() - wall0
        used = cpu1.ru_utime + cpu1.ru_stime - cpu0.ru_utime - cpu0.ru_stime
        out.setdefault("frontend_cpu", {})[f"{n}x{tokens}"] = used / wall
    engine.close()
    print("RESULT " + json.dumps(out), flush=True)


def run_variant(env_update: dict, quick: bool) -> dict | str:
    env = {**os.environ, **env_update}
    env.setdefault("VLLM_CPU_OMP_THREADS_BIND", CORES)
    args = [sys.executable, __file__, "--child"] + (["--quick"] if quick else [])
    proc = subprocess.run(args, env=env, capture_output=True, text=True)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT ") :])
    return (proc.stderr.strip().splitlines() or ["no output"])[-1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="8 x 64 and 32 x 64, a smoke run")
    parser.add_argument("--only", default="", help="comma-separated variant labels")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    sizes = [(8, 64), (32, 64)] if args.quick else [(8, 256), (64, 256)]
    if args.child:
        return child(sizes)
    sys.stdout.reconfigure(line_buffering=True)
    from harness.models import resolve_model

    limit = measure_limit(resolve_model("smollm2-135m-instruct").path)
    print(limit.describe())
    wanted = {s.strip() for s in args.only.split(",") if s.strip()}
    results = {}
    for label, env in VARIANTS:
        if wanted and label not in wanted:
            continue
        results[label] = run_variant(env, args.quick)
        print(f"{label}: {results[label]}")
    base = results.get(VARIANTS[0][0])
    print("\ngreedy decode, tok/s (ratio to the first baseline; share of the limit at the mean")
    print("context); frontend = CPU the harness process used per second of decoding")
    for label, res in results.items():
        if isinstance(res, str):
            print(f"{label:<32} failed: {res}")
            continue
        cells = []
        for n, tokens in sizes:
            key = f"{n}x{tokens}"
            tps = res["tok_s"][key]
            ratio = tps / base["tok_s"][key] if isinstance(base, dict) else float("nan")
            share = limit.fraction(tps, 40 + tokens / 2)  # ~40 prompt tokens + half the reply
            frontend = res["frontend_cpu"][key]
            cells.append(f"{key} {tps:6.1f} ({ratio:4.2f}x, {share}, fe {frontend:.2f})")
        print(f"{label:<32} start {res['start_s']:5.1f} s  " + "  ".join(cells))


if __name__ == "__main__":  # vLLM spawns worker processes that re-import this module
    main()
