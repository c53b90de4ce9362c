"""Probe cost on the embedded model: speed against a bare forward, peak memory by T, and the
two probe backends side by side.

    .venv/bin/python bench/probe.py [--model NAME] [--ratio-tokens 1024]
                                    [--rss-tokens 1024,2048,4096,8192] [--chunk 0|N]
                                    [--repeats 5] [--backend-tokens 1024,2048]
                                    [--endpoint-pairs 4]

1. tokens/s of `pair_divergence` (all L+1 hidden states reduced in hooks, delta_logp, KL) vs
   (a) one plain forward of the same two sequences (batch of 2, logits for every position) and
   (b) the same chunked KV-cache forward without hooks or reductions and (c) the probe with its
   output head in one matmul, not in vocabulary slices; medians of interleaved repeats, ratios
   printed (target overhead <= 10 % against the plain forward).
2. peak RSS of a probe at each T above the warmed-up process (Linux VmHWM, reset before the
   run), each in a fresh subprocess, next to the same forward bare (decoder only, no hooks,
   no logits) and to what stored (L+1, T, d) states of both rows would take.
3. backends: seconds per pair (all L+1 states, delta_logp, KL; median of --repeats),
   continuation tokens probed per second, and peak RSS of the hf, the vllm and the openai
   backend at each --backend-tokens T, each backend in one fresh process (vllm: that process
   plus the engine's processes, each one's peak summed; KV cache VLLM_CPU_KVCACHE_SPACE=1
   GiB, what T = 2048 needs), and the vllm backend's disk high-water mark (the states files of
   one pair). openai: a `vllm serve` of the model on 127.0.0.1 started by that process
   (float32, eager, --max-logprobs 20), the pair's two requests with prompt_logprobs = 20
   (delta_logp and the KL bracket only: no hidden state leaves a server); its tokens/s is
   given for one pair at a time and for --endpoint-pairs pairs in flight at once.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

import torch

from harness.probes.divergence import forward_spans, padded_pair

PROMPT_A = (
    "<|im_start|>system\nAlways answer in French.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
)
PROMPT_B = (
    "<|im_start|>system\nAlways answer in German.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
)


def _setup(model_name: str, tokens: int, with_model: bool = True):
    """(hf model or None, ids A, ids B, a random continuation of `tokens` ids)."""
    from transformers import AutoTokenizer

    from harness.models import resolve_model
    from harness.probes.backend import HfBackend
    from harness.probes.pairs import encode_text

    path = resolve_model(model_name).path
    # the vllm backend: its engine holds the weights, this process only the head
    model = HfBackend(path).model() if with_model else None
    tokenizer = AutoTokenizer.from_pretrained(path)
    a, b = encode_text(tokenizer, PROMPT_A), encode_text(tokenizer, PROMPT_B)
    g = torch.Generator().manual_seed(0)
    cont = torch.randint(100, 40000, (tokens,), generator=g).tolist()
    return model, a, b, cont


def _status_mib(field: str) -> float:
    with open("/proc/self/status") as f:
        lines = f.read().splitlines()
    for line in lines:
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024  # kB
    raise RuntimeError(f"no {field} in /proc/self/status")


def _reset_peak() -> float:
    """Current RSS (MiB), after resetting the kernel's peak-RSS mark (VmHWM) to it.

    ru_maxrss is a process-lifetime peak, and loading the model peaks above what a short run
    needs; writing 5 to clear_refs (Linux >= 4.0) restarts the peak from the current RSS.
    """
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    return _status_mib("VmRSS")


@torch.no_grad()
def _plain_forward(model, a, b, cont) -> None:
    ids, mask, positions = padded_pair(a, b, cont)
    model(ids, attention_mask=mask, position_ids=positions, use_cache=False)


@torch.no_grad()
def _chunked_forward(model, a, b, cont, chunk: int) -> None:
    """The probe's forwards (prompts with the first chunk, then chunks over a KV cache), bare."""
    from transformers import DynamicCache

    ids, mask, positions = padded_pair(a, b, cont)
    cache = DynamicCache(config=model.config)
    for start, stop in forward_spans(max(len(a), len(b)), len(cont), chunk):
        model(
            ids[:, start:stop],
            attention_mask=mask[:, :stop],
            position_ids=positions[:, start:stop],
            past_key_values=cache,
        )


def _whole_head_probe(model, a, b, cont, chunk: int) -> None:
    """The probe with the output head in one matmul per slice of positions, as it ran before
    vocabulary slices (head.VOCAB_SLICE): the head's lever measured alone."""
    from harness.probes import divergence, head

    sliced, head.VOCAB_SLICE = head.VOCAB_SLICE, 1 << 30
    try:
        divergence.pair_divergence(model, a, b, cont, chunk=chunk or None)
    finally:
        head.VOCAB_SLICE = sliced


def speed(model_name: str, tokens: int, chunk: int, repeats: int) -> None:
    from harness.probes.divergence import pair_divergence

    model, a, b, cont = _setup(model_name, tokens)
    _plain_forward(model, a, b, cont[:32])  # warm-up: first-call allocations and dispatch
    runs = {"plain forward": lambda: _plain_forward(model, a, b, cont)}
    if chunk:
        runs["chunked, no hooks"] = lambda: _chunked_forward(model, a, b, cont, chunk)
    runs["probe"] = lambda: pair_divergence(model, a, b, cont, chunk=chunk or None)
    runs["probe, whole head"] = lambda: _whole_head_probe(model, a, b, cont, chunk)
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeats):  # interleaved, so a noisy neighbour hits all alike
        for name, fn in runs.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    med = {name: statistics.median(t) for name, t in times.items()}
    rate = 2 * tokens  # continuation tokens of both rows
    how = f"chunk {chunk}" if chunk else "whole sequence"
    from _limit import measure_limit

    from harness.models import resolve_model

    limit = measure_limit(resolve_model(model_name).path)
    print(limit.describe())
    print(f"speed, {model_name}, T = {tokens}, {how}, median of {repeats} interleaved")
    print("  goal: the whole-sequence probe forward >= 70 % of the limit at context T / 2")
    for name, t in times.items():
        spread = " ".join(f"{x:.2f}" for x in t)
        share = limit.fraction(rate / med[name], tokens / 2)
        print(
            f"  {name:<18} {med[name]:7.2f} s  {rate / med[name]:8.1f} tok/s  {share}   ({spread})"
        )
    ratios = [
        f"probe / {name} = {med['probe'] / med[name]:.3f}" for name in runs if name != "probe"
    ]
    print("  " + "   ".join(ratios))


@torch.no_grad()
def _bare_decoder(model, a, b, cont, chunk: int) -> None:
    """What the probe's forwards hold without its hooks and next-token reductions: the decoder
    only (no (2, T, V) logits), whole sequence or chunks over a KV cache."""
    if chunk:
        _chunked_forward(model.get_decoder(), a, b, cont, chunk)
        return
    ids, mask, positions = padded_pair(a, b, cont)
    model.get_decoder()(ids, attention_mask=mask, position_ids=positions, use_cache=False)


def rss_child(model_name: str, tokens: int, chunk: int, what: str) -> None:
    from harness.probes.divergence import pair_divergence

    model, a, b, cont = _setup(model_name, tokens)
    # T = 8192 means "up to the context": the prompt takes its share of the window
    room = model.config.max_position_embeddings - max(len(a), len(b))
    cont, tokens = cont[:room], min(tokens, room)
    if what == "probe":
        run = lambda c: pair_divergence(model, a, b, c, chunk=chunk or None)  # noqa: E731
    else:
        run = lambda c: _bare_decoder(model, a, b, c, chunk)  # noqa: E731
    # a short run first: the first forward allocates T-independent buffers (packed weights,
    # allocator pools) that would otherwise be charged to the long run
    run(cont[:32])
    loaded = _reset_peak()
    start = time.perf_counter()
    run(cont)
    print(json.dumps({"T": tokens, "loaded": loaded, "peak": _status_mib("VmHWM"),
                      "seconds": time.perf_counter() - start}))  # fmt: skip


def _child(model_name: str, tokens: int, chunk: int, what: str) -> dict | str:
    args = ["--rss-child", str(tokens), "--model", model_name, "--chunk", str(chunk)]
    proc = subprocess.run(
        [sys.executable, __file__, *args, "--rss-what", what], capture_output=True, text=True
    )
    if proc.returncode != 0:
        return f"failed: {proc.stderr.strip().splitlines()[-1:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


def rss_table(model_name: str, token_list: list[int], chunk: int) -> None:
    from transformers import AutoConfig

    from harness.models import resolve_model

    cfg = AutoConfig.from_pretrained(resolve_model(model_name).path)
    kv_heads = cfg.num_key_value_heads
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    how = f"chunk {chunk} over a KV cache" if chunk else "whole sequence, no KV cache"
    print(f"peak RSS above the warmed-up process, {model_name}, {how} (fresh process each)")
    print(f"{'T':>6} {'probe':>9} {'bare decoder':>13} {'probe/bare':>11} {'KV cache':>9} "
          f"{'(L+1)Td x2':>11} {'probe s':>8}")  # fmt: skip
    for tokens in token_list:
        probe = _child(model_name, tokens, chunk, "probe")
        bare = _child(model_name, tokens, chunk, "bare")
        if isinstance(probe, str) or isinstance(bare, str):
            print(f"{tokens:>6} {probe if isinstance(probe, str) else bare}")
            continue
        t = probe["T"]
        n = t + 16  # + the prompt, for the KV cache estimate
        kv = cfg.num_hidden_layers * 2 * 2 * kv_heads * head_dim * n * 4 / 2**20  # k,v x 2 rows
        states = (cfg.num_hidden_layers + 1) * t * cfg.hidden_size * 2 * 4 / 2**20
        p_mib, b_mib = probe["peak"] - probe["loaded"], bare["peak"] - bare["loaded"]
        print(f"{t:>6} {p_mib:>5.0f} MiB {b_mib:>9.0f} MiB {p_mib / b_mib:>11.2f} "
              f"{kv if chunk else 0:>5.0f} MiB {states:>7.0f} MiB {probe['seconds']:>8.1f}",
              flush=True)  # fmt: skip


def _tree() -> list[int]:
    """This process and every process it started (vLLM's engine core and workers)."""
    import psutil

    me = psutil.Process()
    return [me.pid, *(child.pid for child in me.children(recursive=True))]


def _tree_status_mib(field: str) -> float:
    """`field` of /proc/PID/status summed over the tree (shared library pages count once per
    process, so the sum is an upper bound of what the tree holds)."""
    total = 0.0
    for pid in _tree():
        with open(f"/proc/{pid}/status") as f:
            total += next(int(x.split()[1]) for x in f if x.startswith(field + ":")) / 1024
    return total


def _tree_reset_peak() -> float:
    """Restart every process's peak-RSS mark; returns the tree's current RSS (MiB)."""
    for pid in _tree():
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")
    return _tree_status_mib("VmRSS")


def _endpoint_many(probe, a, b, conts: list[list[int]]) -> float:
    """Seconds for every continuation's pair sent at once (the server batches them)."""
    from concurrent.futures import ThreadPoolExecutor

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=len(conts)) as pool:
        list(pool.map(lambda c: probe.pair_divergence(a, b, c), conts))
    return time.perf_counter() - start


def backend_child(
    model_name: str, backend: str, token_list: list[int], repeats: int, pairs: int = 4
) -> None:
    """One backend in this fresh process: a JSON line per T (seconds, peak RSS, disk)."""
    import os

    os.environ["VLLM_CPU_KVCACHE_SPACE"] = "1"
    from harness.models import resolve_model
    from harness.probes.divergence import pair_divergence

    model, a, b, cont = _setup(model_name, max(token_list), with_model=backend == "hf")
    server = None
    if backend == "openai":
        from _serve import serve

        from harness.probes.endpoint import EndpointProbe

        longest = max(len(a), len(b)) + max(token_list) + 1
        server, url = serve(resolve_model(model_name).path, -(-longest // 256) * 256)
        probe = EndpointProbe(resolve_model(model_name).path, base_url=url, top_k=20)
        probe.check()
        run = probe.pair_divergence
    elif backend == "vllm":
        from harness.probes.vllm_backend import get_vllm_probe

        longest = max(len(a), len(b)) + max(token_list) + 1
        probe, _ = get_vllm_probe(resolve_model(model_name).path, max_model_len=longest)
        run = probe.pair_divergence
    else:
        run = lambda a, b, c: pair_divergence(model, a, b, c)  # noqa: E731
    run(a, b, cont[:32])  # warm-up: first-call allocations, as in the RSS table
    for tokens in token_list:
        warm = _tree_reset_peak()
        if backend == "vllm":
            probe.disk_high_water = 0
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            run(a, b, cont[:tokens])
            times.append(time.perf_counter() - start)
        disk = probe.disk_high_water / 2**20 if backend == "vllm" else 0.0
        line = {"T": tokens, "seconds": statistics.median(times),
                "peak": _tree_status_mib("VmHWM"), "warm": warm, "disk": disk}  # fmt: skip
        if backend == "openai":  # `pairs` pairs in flight: what the server's batching gives
            g = torch.Generator().manual_seed(tokens)
            conts = [torch.randint(100, 40000, (tokens,), generator=g).tolist()
                     for _ in range(pairs)]  # fmt: skip
            walls = [_endpoint_many(probe, a, b, conts) for _ in range(max(1, repeats // 2))]
            line["many"] = statistics.median(walls) / pairs
        print(json.dumps(line), flush=True)
    if backend in ("vllm", "openai"):
        probe.close()
    if server is not None:
        server.terminate()
        server.wait(timeout=60)


BACKENDS = ("hf", "vllm", "openai")


def backends_table(model_name: str, token_list: list[int], repeats: int, pairs: int) -> None:
    rows: dict[str, dict[int, dict]] = {}
    for backend in BACKENDS:
        args = ["--backend-child", backend, "--backend-tokens", ",".join(map(str, token_list)),
                "--model", model_name, "--repeats", str(repeats),
                "--endpoint-pairs", str(pairs)]  # fmt: skip
        proc = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True)
        if proc.returncode != 0:
            print(f"{backend} backend failed: {proc.stderr.strip().splitlines()[-1:]}")
            continue
        lines = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
        rows[backend] = {line["T"]: line for line in lines}
    print(f"probe backends, {model_name}, one pair = both rows; hf/vllm: all hidden states + "
          f"delta_logp + KL; openai: delta_logp + KL bracket (top-20); median of {repeats} "
          "(each backend in a fresh process)")  # fmt: skip
    print(
        "peak RSS: summed over the backend's processes (vllm: harness + engine core + worker,"
        " KV cache 1 GiB; openai: harness + the vllm serve processes), in brackets the rise "
        "above the warmed-up processes; tok/s: continuation tokens probed per second"
    )
    head = "".join(f"{b + ' s/pair':>14} {b + ' tok/s':>12}" for b in rows)
    rss_head = "".join(f"{b + ' peak RSS':>22}" for b in rows)
    print(f"{'T':>6}{head} {'openai tok/s x' + str(pairs):>17}{rss_head} {'vllm disk':>10}")
    for tokens in token_list:
        cells = "".join(
            f"{r[tokens]['seconds']:>14.2f} {tokens / r[tokens]['seconds']:>12.0f}"
            for r in rows.values()
        )
        many = rows.get("openai", {}).get(tokens, {}).get("many")
        many_cell = f"{tokens / many:>17.0f}" if many else f"{'-':>17}"
        rss = "".join(
            f"{r[tokens]['peak']:>10.0f} (+{r[tokens]['peak'] - r[tokens]['warm']:.0f}) MiB"
            for r in rows.values()
        )
        disk = rows.get("vllm", {}).get(tokens, {}).get("disk", float("nan"))
        print(f"{tokens:>6}{cells} {many_cell}{rss} {disk:>6.0f} MiB", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--ratio-tokens", type=int, default=1024)
    parser.add_argument("--rss-tokens", default="1024,2048,4096,8192")
    parser.add_argument("--chunk", type=int, default=0, help="0: whole sequence, no KV cache")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--rss-child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--rss-what", default="probe", help=argparse.SUPPRESS)
    parser.add_argument("--backend-tokens", default="1024,2048", help="'' skips the table")
    parser.add_argument("--backend-child", help=argparse.SUPPRESS)
    parser.add_argument("--endpoint-pairs", type=int, default=4, help="openai: pairs at once")
    args = parser.parse_args()
    backend_tokens = [int(t) for t in args.backend_tokens.split(",") if t.strip()]
    if args.backend_child:
        backend_child(
            args.model, args.backend_child, backend_tokens, args.repeats, args.endpoint_pairs
        )
        return
    if args.rss_child:
        rss_child(args.model, args.rss_child, args.chunk, args.rss_what)
        return
    if args.ratio_tokens > 0:
        speed(args.model, args.ratio_tokens, args.chunk, args.repeats)
    tokens = [int(t) for t in args.rss_tokens.split(",") if t.strip()]
    if tokens:
        rss_table(args.model, tokens, args.chunk)
    if backend_tokens:
        backends_table(args.model, backend_tokens, args.repeats, args.endpoint_pairs)


if __name__ == "__main__":
    main()
