"""Every shipped labelled set scored through the scoring path: each check's sensitivity,
specificity (exact intervals) and abstentions per length band; the language detector's cost.

Run: `harness bench checks [--quick]`. Each set of harness/checks/validation/ is scored by
`harness.scoring.validation.score_labelled` with the default candidate languages (rows with
`window` cut by the embedded model's tokenizer, as a run cuts them) and printed as the table of
docs/checks.md, the language sets also per target language; the mixed-language stratum apart.
Goals (issue 30, read on the frozen half `language-test`): >= 99 % right from 30 characters,
>= 95 % for 10-30, <= 1 % abstentions above 20 characters; the deterministic checks (set
`checks`): >= 90 % right. Then, in two fresh processes side by side, the detector alone as
before (lingua) and as now (lingua + py3langid): RSS added, build time, time per reply, and
the share right per band on the frozen half, with the rule before (lingua's confidence >= 0.5,
20 letters) and now. `--quick`: the frozen half and the rows without `window` only (no
tokenizer, no detector processes): seconds; exits 1 when a goal is missed.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

DETERMINISTIC_GOAL = 0.90
BANDS = ("10-30", "30-80", "80-200")


def score_sets(quick: bool) -> list[str]:
    """Print each set's table; the goals it misses."""
    from harness.scoring.validation import load_shipped, score_labelled, shipped_sets
    from harness.scoring.validation_table import (
        LanguageGoal,
        accuracy,
        language_goal_misses,
        table_lines,
    )

    misses = []
    for name in shipped_sets():
        if quick and name == "language-dev":
            continue
        rows = load_shipped(name)
        if quick:
            rows = [row for row in rows if row.window is None]
        tokenizer = None
        if any(row.window is not None for row in rows):
            from harness.scoring.io import load_tokenizer

            tokenizer = load_tokenizer(None)
        start = time.perf_counter()
        scored = score_labelled(rows, tokenizer=tokenizer)
        print(f"\n== {name}: {len(rows)} labelled replies, scored in "
              f"{time.perf_counter() - start:.1f} s")  # fmt: skip
        print("\n".join(table_lines(scored)))
        if any(s.row.check.type == "language" for s in scored):
            print(f"\n-- {name} per target language")
            print("\n".join(table_lines(scored, by="label")))
        if name == "language-test":
            misses += language_goal_misses(scored, LanguageGoal())
        if name == "checks":
            right = accuracy([s for s in scored if s.row.window is None])
            if right < DETERMINISTIC_GOAL:
                misses.append(f"checks: {right:.1%} right < {DETERMINISTIC_GOAL:.0%}")
            wrong = [s for s in scored if s.outcome not in ("true_pass", "true_fail")]
            print("\nnot right: " + "; ".join(f"{s.row.id} {s.outcome}" for s in wrong))
    return misses


def detector_child(kind: str) -> None:
    """In a fresh process: the detector's cost and the rule's share right per band, as JSON."""
    import psutil

    from harness.checks.text import letters, strip_code
    from harness.config import DEFAULT_CANDIDATE_LANGUAGES
    from harness.scoring.validation import load_shipped

    rows = [row for row in load_shipped("language-test") if not row.stratum]
    texts = [strip_code(row.text) for row in rows]
    codes = sorted({*DEFAULT_CANDIDATE_LANGUAGES, *(row.check.target for row in rows)})
    rss = psutil.Process().memory_info().rss
    start = time.perf_counter()
    probs = _probabilities(kind, texts[:1], codes)  # builds and loads the models
    build = time.perf_counter() - start
    start = time.perf_counter()
    probs = _probabilities(kind, texts, codes)
    per_text = (time.perf_counter() - start) / len(texts)
    added = (psutil.Process().memory_info().rss - rss) / 2**20
    right: dict[str, list[int]] = {band: [0, 0] for band in BANDS}
    old_right: dict[str, list[int]] = {band: [0, 0] for band in BANDS}
    for row, text, p in zip(rows, texts, probs, strict=True):
        target = row.check.target
        lead = p[target] - max(v for code, v in p.items() if code != target)
        band = row.band
        right[band][0] += (lead >= 0.02) == row.expected
        right[band][1] += 1
        old = len(letters(text)) >= 20 and ((p[target] >= 0.5) == row.expected)
        old_right[band][0] += old
        old_right[band][1] += 1
    print(json.dumps({"build_s": build, "per_text_ms": 1000 * per_text, "rss_mib": added,
                      "right": right, "old_right": old_right}))  # fmt: skip


def _probabilities(kind: str, texts: list[str], codes: list[str]) -> list[dict[str, float]]:
    from harness.checks.language import candidate_probabilities, detector

    if kind == "both":
        return candidate_probabilities(texts, codes)
    found = detector(codes).compute_language_confidence_values_in_parallel(texts)
    return [
        {v.language.iso_code_639_1.name.lower(): float(v.value) for v in values} for values in found
    ]


def detector_cost() -> None:
    here = Path(__file__).resolve()
    got = {}
    for kind in ("lingua", "both"):
        out = subprocess.run([sys.executable, str(here), "--detector", kind],
                             check=True, capture_output=True, text=True).stdout  # fmt: skip
        got[kind] = json.loads(out.strip().splitlines()[-1])
    a, b = got["lingua"], got["both"]
    print("\n== language detector, 12 default candidates, frozen half (main stratum)")
    print(f"{'':<34} {'lingua alone':>14} {'lingua + py3langid':>20}")
    print(f"{'RSS added (models loaded), MiB':<34} {a['rss_mib']:>14.0f} {b['rss_mib']:>20.0f}")
    print(f"{'build + first reply, s':<34} {a['build_s']:>14.2f} {b['build_s']:>20.2f}")
    print(f"{'time per reply (batch), ms':<34} {a['per_text_ms']:>14.3f} "
          f"{b['per_text_ms']:>20.3f}  ({b['per_text_ms'] / a['per_text_ms']:.2f}x)")  # fmt: skip
    for band in BANDS:
        k, n = a["old_right"][band]
        k1, _ = a["right"][band]
        k2, _ = b["right"][band]
        print(f"right {band:<7} before (>= 0.5, 20 letters) {100 * k / n:5.1f} %; "
              f"ranked first by 0.02: lingua {100 * k1 / n:5.1f} %, both {100 * k2 / n:5.1f} %"
              f"  (n={n})")  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="frozen half, no windows: seconds")
    parser.add_argument("--detector", choices=("lingua", "both"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.detector:
        detector_child(args.detector)
        return 0
    start = time.perf_counter()
    misses = score_sets(args.quick)
    if not args.quick:
        detector_cost()
    print(f"\n{time.perf_counter() - start:.1f} s")
    for miss in misses:
        print(f"GOAL MISSED: {miss}")
    print("all goals met" if not misses else f"{len(misses)} goal(s) missed")
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main())
