"""Time to score 1,000 windows of 64 tokens with the language check, and the detector's memory.

Run by hand: `.venv/bin/python bench/scoring.py`. Windows are cut from the labelled test set
(12 languages) with the embedded model's tokenizer. Prints, from one run: detector build +
model load (cold), scoring time for the 1,000 windows once warm (check only, and the whole
`score_records` path: windowing, decoding, rows), and the RSS delta of the detector.
"""

from __future__ import annotations

import time
from pathlib import Path

import psutil
import yaml

N_WINDOWS, WINDOW = 1000, 64
DATA = Path(__file__).parents[1] / "tests" / "data" / "scoring" / "language_windows.yaml"


def main() -> None:
    from _limit import measure_limit

    from harness.checks.language import LanguageCheck
    from harness.models import resolve_model

    # scoring runs no model: the limit is printed for the record of the machine it ran on
    print(measure_limit(resolve_model("smollm2-135m-instruct").path).describe())
    from harness.config import ScoringConfig, TaskSuite
    from harness.records import GenerationRecord
    from harness.scoring import score_records
    from harness.scoring.io import load_tokenizer

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


if __name__ == "__main__":
    main()
