"""Prefix caching over the turns of a conversation, on the embedded model, measured side by
side in one run.

    .venv/bin/python bench/conversation.py [--quick]

A conversation of K turns sends its whole history again at every turn. With prefix caching
turn k should cost about its new tokens only. Prints, for vLLM with prefix caching on (with
vLLM's default KV block, 128 tokens on CPU, and with blocks of 32, the smallest the CPU
attention takes and the harness's CPU default) and off:
tokens the engine processed (each round's uncached prompt tokens + its output, as the engine
reports cache hits) over the ideal (every token of the final conversation processed once:
prompt + continuation), and the wall time. Goal with caching: ratio <= 1.15.

Measured here (2 cores, 8 x 10 turns x <= 64 tokens, other jobs running, so seconds are not
comparable): caching on 1.76 (11 629 / 6 606), block 32 1.19 (7 853 / 6 606), off 5.64
(37 229 / 6 606). A cache hit covers whole blocks, so each turn recomputes its last partial
block; vLLM on CPU refuses blocks smaller than 32.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time

QUESTIONS = [
    "What should I see first?",
    "Where can I eat well and cheaply?",
    "How do I get around the city?",
    "Which museum is a must?",
    "What is a good day trip?",
    "Where should I stay?",
    "What should I pack?",
    "Any local customs to know?",
    "What is the best time of year to go?",
    "Any last tip?",
]


def _specs(n: int, turns: int):
    from harness.policies import SampleSpec

    cities = ["Lisbon", "Kyoto", "Montreal", "Vienna"]
    return [
        SampleSpec(
            system="You are a travel agent. Always answer in French.",
            user=f"Hi! I'd like to plan a trip to {cities[i % len(cities)]}.",
            seed=i,
            turns=[(q, False) for q in QUESTIONS[: turns - 1]],
        )
        for i in range(n)
    ]


def conversation_cost(engine, n: int, turns: int, turn_tokens: int) -> tuple[float, int, int]:
    """(seconds, tokens processed without cache hits, ideal tokens) for n conversations."""
    from harness.engines import SamplingSettings
    from harness.policies import ChatFormat, NonePolicy, policy_run, run_policies

    chat = ChatFormat(engine.tokenizer)
    settings = SamplingSettings(temperature=0.7, max_tokens=turns * turn_tokens)
    start = time.perf_counter()
    [records] = run_policies(
        [(policy_run(NonePolicy()), _specs(n, turns))],
        engine,
        chat,
        settings,
        turn_tokens=turn_tokens,
    )
    seconds = time.perf_counter() - start
    processed = sum(r.tokens.processed_uncached or r.tokens.processed for r in records)
    ideal = sum(len(r.prompt_ids) + len(r.continuation_ids) for r in records)
    return seconds, processed, ideal


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer, shorter conversations")
    parser.add_argument("--skip-uncached", action="store_true", help="leave out caching off")
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)
    from _limit import measure_limit

    from harness.engines.vllm_engine import VllmEngine
    from harness.models import resolve_model

    path = resolve_model("smollm2-135m-instruct").path
    limit = measure_limit(path)
    n, turns, turn_tokens = (4, 10, 32) if args.quick else (8, 10, 64)
    results = {}
    variants = [
        ("on, block 128", True, 128),  # vLLM's default block on CPU
        ("on, block 32", True, 32),  # the harness's CPU default, the smallest vLLM takes
        ("prefix caching off", False, None),
    ]
    for label, caching, block in variants[: 2 if args.skip_uncached else 3]:
        engine = VllmEngine(
            path, max_model_len=4096, enable_prefix_caching=caching, block_size=block
        )
        results[label] = conversation_cost(engine, n, turns, turn_tokens)
        engine.close()
        del engine
        gc.collect()
    print(f"\n{limit.describe()}")
    print(f"{n} conversations x {turns} turns, <= {turn_tokens} tokens per reply")
    print(f"{'':>20} {'seconds':>8} {'processed':>10} {'ideal':>8} {'ratio':>6}  goal     "
          "ideal tok/s / limit")  # fmt: skip
    context = turns * turn_tokens / 2  # mean context over a conversation, roughly
    for label, (seconds, processed, ideal) in results.items():
        goal = "<= 1.15" if "on" in label else "       "
        print(
            f"{label:>20} {seconds:8.1f} {processed:10d} {ideal:8d} "
            f"{processed / ideal:6.3f}  {goal}  {limit.fraction(ideal / seconds, context)}"
        )


if __name__ == "__main__":  # vLLM spawns worker processes that re-import this module
    main()
