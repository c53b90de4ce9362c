"""Time to score 1,000 windows of 64 tokens with the language check, and the detector's memory;
then chat logs of 10,000 and 100,000 conversations scored turn by turn: CPU time and peak RSS.

Run by hand: `.venv/bin/python bench/scoring.py [--conversations N [N ...]] [--skip-windows]`.
Windows are cut from the labelled test set (12 languages) with the embedded model's tokenizer.
Prints, from one run: detector build + model load (cold), scoring time for the 1,000 windows
once warm (check only, and the whole `score_records` path: windowing, decoding, rows), and the
RSS delta of the detector. Then, per size N (default 10,000 and 100,000), `harness score` in a
fresh process (so its peak RSS is its own) on a generated chat log of N conversations of 5
assistant turns, each reply 2 to 5 sentences drawn from the test set's (80 % French, so the
French check fails on some turns), checked with `language: fr` and IFEval
`punctuation:no_comma`, through the command's own code (`plan_score` and `run_score`: the
stages of `harness score`, the report included); prints conversations per second, the CPU time
(user + sys: wall time depends on what else runs on the cores) and the peak RSS, then a table
of the sizes. Goal: <= 40 s CPU and <= 800 MiB at 10,000, CPU linear and memory flat beyond.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import yaml

N_WINDOWS, WINDOW = 1000, 64
DATA = Path(__file__).parents[1] / "tests" / "data" / "scoring" / "language_windows.yaml"
SYSTEM = "Réponds toujours en français, sans virgules."
SUITE = {
    "suite": "bench-logs",
    "items": [
        {"id": "fr-support", "system": SYSTEM, "user": "Bonjour",
         "checks": [{"type": "language", "target": "fr"},
                    {"type": "ifeval", "id": "punctuation:no_comma"}]}
    ],
}  # fmt: skip


def windows_bench() -> None:
    from _limit import measure_limit

    from harness.checks.language import LanguageCheck
    from harness.models import resolve_model

    # scoring runs no model: the limit is printed for the record of the machine it ran on
    print(measure_limit(resolve_model("smollm2-135m-instruct").path).describe())
    from harness.config.run import ScoringConfig, TaskSuite
    from harness.scoring import score_records
    from harness.scoring.io import load_tokenizer
    from harness.text.records import GenerationRecord

    tokenizer = load_tokenizer(None)
    texts = [w["text"] for w in yaml.safe_load(DATA.read_text())["windows"] if w["lang"]]
    stream = tokenizer(" ".join(texts * 40), add_special_tokens=False)["input_ids"]
    assert len(stream) >= N_WINDOWS * WINDOW, len(stream)
    ids = stream[: N_WINDOWS * WINDOW]
    windows = tokenizer.batch_decode([ids[i : i + WINDOW] for i in range(0, len(ids), WINDOW)])

    process = psutil.Process()
    rss0 = process.memory_info().rss
    check = LanguageCheck(type="language", target="fr").bind(
        "language:fr", ScoringConfig().languages
    )
    start = time.perf_counter()
    check.score_many(windows[:1])  # builds the detector with its language models preloaded
    cold = time.perf_counter() - start

    start = time.perf_counter()
    results = check.score_many(windows)
    warm = time.perf_counter() - start
    rss_delta = (process.memory_info().rss - rss0) / 2**20

    # The same 1,000 windows through the batch API: 10 records of 100 windows each.
    suite = TaskSuite.model_validate(
        {
            "suite": "bench",
            "items": [
                {"id": "fr", "system": "s", "user": "u", "reminder": "r", "restatement": "t",
                 "checks": [{"type": "language", "target": "fr"}]}
            ],
        }
    )  # fmt: skip
    per = len(ids) // 10
    records = [
        GenerationRecord.from_transcript(
            {"item": "fr", "sample": k, "continuation_ids": ids[k * per : (k + 1) * per]}
        )
        for k in range(10)
    ]
    start = time.perf_counter()
    rows = score_records(records, suite, tokenizer)
    full = time.perf_counter() - start

    determined = sum(r.determined for r in results)
    print(f"windows: {len(windows)} x {WINDOW} tokens, {determined} determinable")
    print(f"detector build + model load (cold): {cold:.2f} s")
    print(f"language check, 1,000 windows (warm): {warm:.3f} s  (target < 2 s)")
    print(f"score_records, {len(rows)} window rows (warm): {full:.3f} s")
    print(f"detector RSS delta: {rss_delta:.0f} MiB  (target < 500 MB)")


def write_log(path: Path, conversations: int, turns: int = 5, seed: int = 0) -> None:
    """A chat log of `conversations` lines, each replies of 2-5 sentences of the labelled
    windows (80 % French), so most replies differ (no text is scored twice by accident)."""
    windows = [w for w in yaml.safe_load(DATA.read_text())["windows"] if w["lang"]]

    def sentences(lang: bool) -> list[str]:
        texts = [w["text"] for w in windows if (w["lang"] == "fr") == lang]
        return [s for t in texts for s in re.split(r"(?<=[.!?])\s+", t) if s]

    french, other = sentences(True), sentences(False)
    rng = random.Random(seed)
    with path.open("w", encoding="utf-8") as handle:
        for c in range(conversations):
            messages = [{"role": "system", "content": SYSTEM}]
            for k in range(turns):
                pool = french if rng.random() < 0.8 else other
                reply = " ".join(rng.choice(pool) for _ in range(rng.randint(2, 5)))
                messages += [{"role": "user", "content": f"Question {k + 1} ?"},
                             {"role": "assistant", "content": reply}]  # fmt: skip
            handle.write(json.dumps({"id": f"conv-{c}", "messages": messages}) + "\n")


def logs_child(log: Path, out: Path) -> None:
    """Score the log as `harness score` does; print the figures (this process's own peak)."""
    from harness.config.run import ScoringConfig, TaskSuite
    from harness.pipeline import run_score
    from harness.stages.logs import LogDigests
    from harness.units.plan import plan_score

    suite = TaskSuite.model_validate(SUITE)
    start = time.perf_counter()
    ctx = run_score(plan_score(log, [suite], out, ScoringConfig()))
    count = ctx.read(LogDigests).conversations
    total = time.perf_counter() - start
    scored = total - ctx.timings["report"]
    usage = resource.getrusage(resource.RUSAGE_SELF)
    peak = usage.ru_maxrss / 1024  # KiB on Linux
    print(f"chat log: {count} conversations x 5 turns, {log.stat().st_size / 2**20:.0f} MiB")
    print(f"scored + CSVs written: {scored:.1f} s = {count / scored:.0f} conversations/s")
    print(f"with report.html: {total:.1f} s  (goal <= 300 s)")
    print(f"peak RSS: {peak:.0f} MiB  (goal <= 800 MiB at 10,000 conversations)")
    # wall time depends on what else runs on the cores; CPU time much less so
    print(f"CPU time (user + sys, whole process): {usage.ru_utime + usage.ru_stime:.1f} s")


def logs_bench(conversations: int) -> tuple[float, float]:
    """(CPU seconds, peak RSS MiB) of `harness score` on a generated log, in a fresh process
    (its own peak; the log is written by this one)."""
    with tempfile.TemporaryDirectory(prefix="bench-logs-") as tmp:
        log = Path(tmp) / "talks.jsonl"
        write_log(log, conversations)
        child = [sys.executable, __file__, "--child", str(log), str(Path(tmp) / "out")]
        output = subprocess.run(child, check=True, capture_output=True, text=True).stdout
        print(output, end="", flush=True)
        cpu = float(re.search(r"CPU time \(user \+ sys, whole process\): ([\d.]+)", output)[1])
        peak = float(re.search(r"peak RSS: ([\d.]+) MiB", output)[1])
        return cpu, peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--conversations",
        type=int,
        nargs="+",
        default=[10_000, 100_000],
        help="log sizes, each scored in its own process (default: 10,000 and 100,000)",
    )
    parser.add_argument("--skip-windows", action="store_true", help="only the chat log part")
    parser.add_argument("--child", nargs=2, type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        logs_child(*args.child)
        return
    if not args.skip_windows:
        windows_bench()
    figures = {n: logs_bench(n) for n in args.conversations}
    print("\nconversations  CPU s (user+sys)  CPU ms/conversation  peak RSS MiB")
    for n, (cpu, peak) in figures.items():
        print(f"{n:13,d}  {cpu:16.1f}  {1000 * cpu / n:19.2f}  {peak:12.0f}")
    print("goal at 10,000: <= 40 s CPU and <= 800 MiB; CPU linear and memory flat beyond")


if __name__ == "__main__":
    main()
