"""What forks cost on the embedded model: processed tokens per new token, side by side in one
run, for each lever alone: vLLM's prefix caching, priming each arm's prompt before its draws,
and the KV block size (prefix-cache hits come in whole blocks; vLLM's CPU default is 128, the
harness's 32).

    .venv/bin/python bench/forks.py [--quick]

Records are generated first on the same engine (as in a run, where the forks stage reuses the
generation engine), then forked at 5 positions, 2 arms x 4 draws x 64 tokens each. Processed =
prompt tokens the engine computed (prompt - prefix-cache hits, as vLLM reports them) + tokens
generated, priming requests included; ideal = arms x draws x tokens per position and record.
Bound: what no cache can save, the `without` arm's longest prompt per record (the baseline
prompt + t_max ids, never computed before) + ideal, as a ratio to ideal. Goal: <= 1.3 with
caching.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time

VARIANTS = [  # label, engine options, prime
    ("caching off", {"enable_prefix_caching": False}, False),
    ("caching, block 128", {"block_size": 128}, False),
    ("caching, block 128, primed", {"block_size": 128}, True),
    ("caching, block 32, primed", {"block_size": 32}, True),
]


def make_records(engine, n: int, tokens: int):
    from harness.engines import SamplingSettings
    from harness.policies import ChatFormat, NonePolicy, SampleSpec, policy_run, run_policy

    chat = ChatFormat(engine.tokenizer)
    topics = ["a lighthouse keeper", "a city of glass", "a dragon who bakes", "a lost robot"]
    specs = [
        SampleSpec(
            system="Always answer in French.",
            user=f"Write a very long story about {topics[i % len(topics)]}.",
            seed=i,
            meta={"model": "smollm2-135m-instruct", "item": f"b{i}", "sample": 0},
        )
        for i in range(n)
    ]
    settings = SamplingSettings(temperature=0.7, top_p=0.95, max_tokens=tokens)
    return run_policy(policy_run(NonePolicy(), continue_on_eos=True), engine, chat, specs, settings)


def fork_cost(engine, records, forks, prime: bool) -> dict:
    from harness.engines import SamplingSettings
    from harness.stages.forks import TokenUsage, generate_arms
    from harness.stages.probe import record_baseline_ids

    sampling = SamplingSettings(temperature=0.7, top_p=0.95, max_tokens=forks.tokens)
    base = [record_baseline_ids(engine.tokenizer, r, forks.baseline) for r in records]
    usage = TokenUsage()
    start = time.perf_counter()
    arms = generate_arms(engine, records, base, forks, sampling, usage, prime=prime)
    seconds = time.perf_counter() - start
    ideal = len(arms) * forks.tokens
    processed = usage.prompt - usage.cached + usage.generated
    fresh = sum(len(b) + max(forks.at) for b in base)  # the without arms' longest prompts
    return {
        **vars(usage), "ratio": processed / ideal, "bound": (fresh + ideal) / ideal,
        "seconds": seconds, "arms": len(arms),
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 records of 256 tokens")
    args = parser.parse_args()
    from harness.config.run import ForksConfig
    from harness.engines.vllm_engine import VllmEngine
    from harness.models import resolve_model

    n, length = (2, 256) if args.quick else (4, 512)
    at = [0, 32, 128, 192] if args.quick else [0, 32, 128, 256, 448]
    forks = ForksConfig(at=at, tokens=64, draws=4)
    from _limit import measure_limit

    path = resolve_model("smollm2-135m-instruct").path
    limit = measure_limit(path)
    rows = []
    for label, options, prime in VARIANTS:
        engine = VllmEngine(path, max_model_len=2048, **options)
        records = make_records(engine, n, length)
        rows.append((label, fork_cost(engine, records, forks, prime)))
        engine.close()
        del engine
        gc.collect()
    print(f"\n{limit.describe()}")
    print(f"{n} records x {len(at)} positions x 2 arms x {forks.draws} draws x 64 tokens")
    head = f"{'requests':>8} {'prompt':>7} {'cached':>7} {'generated':>9}"
    print(f"{'':28} {head} {'processed/ideal':>15} {'bound':>6} {'s':>6} {'arm tok/s':>9}"
          "  / limit")  # fmt: skip
    for label, r in rows:
        counts = f"{r['requests']:8d} {r['prompt']:7d} {r['cached']:7d} {r['generated']:9d}"
        speed = r["arms"] * forks.tokens / r["seconds"]
        print(
            f"{label:28} {counts} {r['ratio']:15.3f} {r['bound']:6.3f} {r['seconds']:6.1f} "
            f"{speed:9.1f}  {limit.fraction(speed, sum(at) / len(at) + 32)}"
        )
    best = min(r["ratio"] for label, r in rows if "caching," in label)
    verdict = "met" if best <= 1.3 else "NOT met"
    print(f"goal processed/ideal <= 1.3 with caching: {verdict} (best {best:.3f})")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
