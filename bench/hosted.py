"""The chat engine's requests/s and tokens/s as a ratio to a bare `openai`-SDK loop, at the same
concurrency against the same local server, side by side in one run (target >= 0.9).

    .venv/bin/python bench/hosted.py [--server vllm|stand-in] [--requests 48]
                                     [--concurrency 8] [--max-tokens 32] [--repeats 3]

`vllm`: a `vllm serve` of the embedded model on 127.0.0.1 (bench/_serve.py), the real local
stand-in of a hosted chat model; `stand-in`: tests/chat_server.py's chat-completions server,
which answers at once, so the ratio shows the engine's own overhead (message reading, position
pieces, cache writes) with nothing to hide it. Both sides send the same requests with the same
seeds in each repeat (the engine's request cache is a fresh folder per batch, so neither side
reads the other's answers), the order alternating bare / engine, engine / bare between repeats
so neither always meets a warmer server; the medians are printed with the CPU time (user +
sys) of this process per request, the number least disturbed by a shared machine. The defaults
(48 short replies x 3 repeats a side) take ~5 minutes on 2 cores with the server's start.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from _limit import cpu_description  # noqa: E402  (bench/_limit.py, on the path above)

SYSTEM = "Always answer in French."
CACHES: list[Path] = []  # the engine's request caches, removed at the end
USERS = ["Tell me about lighthouses.", "Describe a market in Lisbon.", "How do trains work?"]


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def bare_loop(url: str, model: str, n: int, concurrency: int, max_tokens: int, seed0: int):
    """The plain SDK: one client, a thread pool, chat.completions.create per request."""
    import openai

    client = openai.OpenAI(base_url=url, api_key="EMPTY", max_retries=4)

    def one(i: int) -> int:
        response = client.chat.completions.create(
            model=model,
            messages=[
                {"role": "system", "content": SYSTEM},
                {"role": "user", "content": USERS[i % len(USERS)]},
            ],
            max_tokens=max_tokens, temperature=0.7, top_p=1.0, seed=seed0 + i, logprobs=True,
        )  # fmt: skip
        return response.usage.completion_tokens

    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        tokens = sum(pool.map(one, range(n)))
    client.close()
    return tokens


def engine_batch(url: str, model: str, n: int, concurrency: int, max_tokens: int, seed0: int):
    """The chat engine: the same requests as position ids, one `generate` batch, with its
    request cache on (every request a miss, as in a fresh run)."""
    from harness.engines import GenerationRequest, SamplingSettings, make_engine
    from harness.text.chat import ChatFormat

    # the cache stays, as a run's does (removing it is no part of the engine's time)
    cache = Path(tempfile.mkdtemp(prefix="bench-hosted-"))
    CACHES.append(cache)
    engine = make_engine("chat", None, model=model, base_url=url, concurrency=concurrency,
                         cache_dir=cache)  # fmt: skip
    chat = ChatFormat(engine.tokenizer)
    requests = [
        GenerationRequest(
            prompt_ids=chat.prompt_ids(SYSTEM, USERS[i % len(USERS)]),
            sampling=SamplingSettings(
                temperature=0.7, top_p=1.0, max_tokens=max_tokens, seed=seed0 + i
            ),  # fmt: skip
        )
        for i in range(n)
    ]
    engine.generate(requests)
    engine.close()
    return engine.usage.output_tokens


def measure(side, args, url: str, model: str, seed0: int, n: int = 0):
    """(requests/s, tokens/s, CPU ms per request, tokens) of one side's batch of n requests."""
    n = n or args.requests
    cpu, wall = cpu_s(), time.perf_counter()
    tokens = side(url, model, n, args.concurrency, args.max_tokens, seed0)
    wall, cpu = time.perf_counter() - wall, cpu_s() - cpu
    return n / wall, tokens / wall, 1000 * cpu / n, tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", choices=["vllm", "stand-in"], default="vllm")
    parser.add_argument("--requests", type=int, default=48)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(cpu_description())
    server = stand_in = None
    if args.server == "vllm":
        from _serve import serve

        from harness.models import resolve_model

        server, url = serve(resolve_model("smollm2-135m-instruct").path, 2048)
        model = "bench"
    else:
        from tests.chat_server import ChatStandIn

        stand_in = ChatStandIn()
        url, model = stand_in.url, "stand-in"
    try:
        for side in (bare_loop, engine_batch):  # warm-up: the server's first batch, imports
            measure(side, args, url, model, 10**6, n=args.concurrency)
        rows: dict[str, list] = {"bare": [], "engine": []}
        for r in range(args.repeats):
            sides = [("bare", bare_loop), ("engine", engine_batch)]
            for name, side in sides if r % 2 == 0 else sides[::-1]:
                rows[name].append(measure(side, args, url, model, r * args.requests))
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=60)
        if stand_in is not None:
            stand_in.close()
        for cache in CACHES:
            shutil.rmtree(cache, ignore_errors=True)
    med = {k: [statistics.median(x[i] for x in v) for i in range(4)] for k, v in rows.items()}
    print(f"{args.server}: {args.requests} requests x {args.repeats} repeats, concurrency "
          f"{args.concurrency}, max_tokens {args.max_tokens} (medians, interleaved)")  # fmt: skip
    print(f"{'':>8} {'req/s':>8} {'tok/s':>8} {'CPU ms/req':>11} {'tokens':>7}")
    for name, (rps, tps, cpu, tokens) in med.items():
        print(f"{name:>8} {rps:>8.2f} {tps:>8.1f} {cpu:>11.2f} {tokens:>7.0f}")
    b, e = med["bare"], med["engine"]
    print(f"engine / bare: requests/s {e[0] / b[0]:.3f}, tokens/s {e[1] / b[1]:.3f} "
          "(target >= 0.9)")  # fmt: skip


if __name__ == "__main__":
    main()
