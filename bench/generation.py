"""Generation throughput on the embedded model, measured side by side in one run.

    .venv/bin/python bench/generation.py [--quick]

Prints: vLLM vs transformers tokens/s at 8 x 256 and 64 x 256 (ratio), each as a share of the
machine's limit (bench/_limit.py: measured fp32 matmul rate -> tokens/s for this model at the
run's mean context), and the cost of periodic(every=128) vs none at 1024 tokens with prefix
caching on and off, against the goal <= 1.1 x (1 + injected-token share) with caching.
Goals: >= 2x and >= 4x, vLLM >= 50 % of the limit at batch 64.

Rows run through the harness's own policy loop (`run_policy`), as a run does: on vLLM that is
continuous batching across rounds, with the engine runtime of harness/engines/cpu_runtime.py.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time

PROMPT_TOKENS = 40  # about what the chat template makes of _specs' prompts


def _specs(n: int):
    from harness.policies import SampleSpec

    topics = ["a lighthouse keeper", "a city of glass", "a dragon who bakes", "a lost robot"]
    return [
        SampleSpec(
            system="Always answer in French.",
            user=f"Write a very long story about {topics[i % len(topics)]}.",
            reminder="Answer only in French.",
            seed=i,
        )
        for i in range(n)
    ]


def throughput(engine, n: int, tokens: int) -> float:
    from harness.engines import SamplingSettings
    from harness.policies import ChatFormat, NonePolicy, policy_run, run_policy

    chat = ChatFormat(engine.tokenizer)
    # greedy: transformers batches sampled requests only when they share a seed (one RNG per
    # batch), so sampling would time it one request at a time; greedy batches fully on both
    settings = SamplingSettings(temperature=0, max_tokens=tokens)
    policy = policy_run(NonePolicy(), continue_on_eos=True)  # every sample runs to the full budget
    start = time.perf_counter()
    records = run_policy(policy, engine, chat, _specs(n), settings)
    seconds = time.perf_counter() - start
    return sum(r.tokens.generated for r in records) / seconds


def periodic_cost(engine, n: int, tokens: int) -> dict:
    """Seconds of none and periodic-128, the injected share of periodic's continuation, and
    the tokens each computed (prompt - prefix-cache hits + generated, summed over rounds): the
    token side of where periodic's extra time goes."""
    from harness.engines import SamplingSettings
    from harness.policies import ChatFormat, NonePolicy, PeriodicPolicy, policy_run, run_policy

    chat = ChatFormat(engine.tokenizer)
    settings = SamplingSettings(temperature=0.7, max_tokens=tokens)
    out = {}
    for name, policy in (
        ("none", policy_run(NonePolicy(), continue_on_eos=True)),
        ("periodic", policy_run(PeriodicPolicy(every=128, placement="user"), continue_on_eos=True)),
    ):
        start = time.perf_counter()
        records = run_policy(policy, engine, chat, _specs(n), settings)
        out[name] = time.perf_counter() - start
        computed = [r.tokens.processed_uncached for r in records]
        out[f"{name}_computed"] = None if None in computed else sum(computed)
        out[f"{name}_rounds"] = sum(r.rounds for r in records)
    out["share"] = sum(r.tokens.injected for r in records) / sum(
        len(r.continuation_ids) for r in records
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)
    from _limit import measure_limit

    from harness.engines import make_engine
    from harness.engines.vllm_engine import VllmEngine
    from harness.models import resolve_model

    path = resolve_model("smollm2-135m-instruct").path
    limit = measure_limit(path)
    print(limit.describe())
    sizes = [(8, 64), (16, 64)] if args.quick else [(8, 256), (64, 256)]
    n_cost, tokens_cost = (4, 256) if args.quick else (8, 1024)
    # transformers first: vLLM lowers this process's torch threads when it starts
    hf = make_engine("hf", path)
    hf_tps = {}
    for size in sizes:
        hf_tps[size] = throughput(hf, *size)
        print(f"hf   {size[0]} x {size[1]}: {hf_tps[size]:.1f} tok/s")
    hf.close()
    del hf
    gc.collect()
    start = time.perf_counter()
    vllm = make_engine("vllm", path, max_model_len=2048)
    print(f"vLLM engine start: {time.perf_counter() - start:.1f} s")
    vllm_tps = {}
    for size in sizes:
        vllm_tps[size] = throughput(vllm, *size)
        print(f"vllm {size[0]} x {size[1]}: {vllm_tps[size]:.1f} tok/s")
    costs = {"caching on, block 32 (default)": periodic_cost(vllm, n_cost, tokens_cost)}
    vllm.close()
    del vllm
    gc.collect()
    for label, options in (
        ("caching on, block 128 (vLLM's)", {"block_size": 128}),
        ("caching off", {"enable_prefix_caching": False}),
    ):
        engine = VllmEngine(path, max_model_len=2048, **options)
        costs[label] = periodic_cost(engine, n_cost, tokens_cost)
        engine.close()
        del engine
        gc.collect()
    rows = []
    print("\nthroughput (generated tokens/s, greedy, whole batch per call)")
    print(f"{'batch':>12} {'vllm':>8} {'hf':>8} {'ratio':>7}  goal   vllm / limit   hf / limit")
    goals = {sizes[0]: 2.0, sizes[1]: 4.0}
    for size in sizes:
        ratio = vllm_tps[size] / hf_tps[size]
        rows.append((size, ratio))
        context = PROMPT_TOKENS + size[1] / 2  # mean context over the reply
        print(
            f"{size[0]:>4} x {size[1]:<5} {vllm_tps[size]:8.1f} {hf_tps[size]:8.1f} "
            f"{ratio:6.2f}x  >= {goals[size]:.0f}x  {limit.fraction(vllm_tps[size], context)}"
            f"   {limit.fraction(hf_tps[size], context)}"
        )
    print(f"\nperiodic(every=128) vs none, {n_cost} x {tokens_cost} tokens, temperature 0.7")
    print("computed = prompt tokens not served by the prefix cache + generated, all rounds")
    for label, c in costs.items():
        ratio = c["periodic"] / c["none"]
        goal = 1.1 * (1 + c["share"])
        computed = (
            f"computed {c['periodic_computed'] / c['none_computed']:.2f}x"
            if c["none_computed"]
            else ""
        )
        print(
            f"{label:>32}: none {c['none']:6.1f} s, periodic {c['periodic']:6.1f} s, ratio "
            f"{ratio:.2f} (goal <= {goal:.2f} = 1.1 x (1 + {c['share']:.3f} injected share): "
            f"{'met' if ratio <= goal else 'NOT met'}), {computed}, rounds "
            f"{c['none_rounds']} / {c['periodic_rounds']}"
        )


if __name__ == "__main__":  # vLLM spawns worker processes that re-import this module
    main()
