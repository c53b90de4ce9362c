"""Every shipped labelled set scored through the scoring path: each check's sensitivity,
specificity (exact intervals) and abstentions per length band; the language detector's cost.

Run: `make bench NAME=checks [ARGS=--quick]`. Each set of harness/checks/validation/ is scored by
`harness.scoring.validation.score_labelled` with the default candidate languages (rows with
`window` cut by the embedded model's tokenizer, as a run cuts them) and printed as the table of
docs/checks.md, the language sets also per target language; the mixed-language stratum apart.
Goals (issue 30, read on the frozen half `language-test`): >= 99 % right from 30 characters,
>= 95 % for 10-30, <= 1 % abstentions above 20 characters; the deterministic checks (set
`checks`): >= 90 % right. Then the choice of `LANGID_ALONE_FROM` (py3langid alone from that many
characters): the dev half's share right per band for several lengths, and the frozen half's table
under the mean of both detectors everywhere (the rule before) and the rule now, row by row. Then,
in three fresh processes side by side, the detector as lingua alone, as the mean of both and as
the rule now: RSS added, build time, time and CPU per reply, and the share right per band on the
frozen half, with the rule before those (lingua's confidence >= 0.5, 20 letters) and each of
them. `--quick`: the frozen half and the rows without `window` only (no
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


RULE_SWEEP = (10, 15, 20, 25, 30, 40, 60)  # LANGID_ALONE_FROM values tried on the dev half


def _scored_with(rows: list, langid_alone_from: int | None) -> list:
    """`rows` scored through the scoring path with LANGID_ALONE_FROM set (None: the mean of
    both detectors everywhere, the rule before)."""
    # lazy: as every harness import of this script (its --detector children measure RSS)
    from harness.checks import language
    from harness.scoring.validation import score_labelled

    saved = language.LANGID_ALONE_FROM
    language.LANGID_ALONE_FROM = langid_alone_from  # read by LanguageCheck.score_many
    try:
        return score_labelled(rows)
    finally:
        language.LANGID_ALONE_FROM = saved


def rule_choice() -> None:
    """The dev half's share right per band and LANGID_ALONE_FROM (where it was chosen); the
    frozen half's table under the mean everywhere (before) and the rule now, row by row."""
    # lazy: as every harness import of this script (its --detector children measure RSS)
    from harness.checks.language import LANGID_ALONE_FROM
    from harness.scoring.validation import confusions, load_shipped
    from harness.scoring.validation_table import HEADER, table_row

    dev = [row for row in load_shipped("language-dev") if row.check.type == "language"]
    print("\n== py3langid alone from N characters: dev half, share right (main / mixed)")
    print(f"{'N':>6} " + " ".join(f"{band:>8}" for band in BANDS) + f" {'mixed':>8}")
    for n in (None, *RULE_SWEEP):
        table = {
            (c.group["stratum"], c.group["band"]): c
            for c in confusions(_scored_with(dev, n), by=("stratum", "band"))
        }
        cells = [table[("main", band)].accuracy for band in BANDS] + [
            table[("mixed", "all")].accuracy
        ]
        label = "mean" if n is None else str(n)
        print(f"{label:>6} " + " ".join(f"{100 * x:6.1f} %" for x in cells))
    test = [row for row in load_shipped("language-test") if row.check.type == "language"]
    tables = {
        label: confusions(_scored_with(test, n), by=("stratum", "check", "band"))
        for label, n in (("mean", None), (f"now {LANGID_ALONE_FROM}", LANGID_ALONE_FROM))
    }
    print(f"\n== frozen half: the mean everywhere (before) and py3langid alone from "
          f"{LANGID_ALONE_FROM} characters (now)")  # fmt: skip
    print(HEADER)
    for pair in zip(*tables.values(), strict=True):
        for label, c in zip(tables, pair, strict=True):
            print(table_row(c, f"language {label}"))


def _cpu() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)  # every thread's, lingua's rayon pool too
    return usage.ru_utime + usage.ru_stime


def detector_child(kind: str) -> None:
    """In a fresh process: the detector's cost and the rule's share right per band, as JSON."""
    import psutil

    from harness.checks.text import letters, strip_code
    from harness.config.run import DEFAULT_CANDIDATE_LANGUAGES
    from harness.scoring.validation import load_shipped

    rows = [row for row in load_shipped("language-test") if not row.stratum]
    texts = [strip_code(row.text) for row in rows]
    codes = sorted({*DEFAULT_CANDIDATE_LANGUAGES, *(row.check.target for row in rows)})
    rss = psutil.Process().memory_info().rss
    start = time.perf_counter()
    # the shortest reply: each kind builds and loads every detector it uses here
    probs = _probabilities(kind, [min(texts, key=len)], codes)
    build = time.perf_counter() - start
    start, cpu = time.perf_counter(), _cpu()
    probs = _probabilities(kind, texts, codes)
    per_text = (time.perf_counter() - start) / len(texts)
    cpu_per_text = (_cpu() - cpu) / len(texts)
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
                      "cpu_per_text_ms": 1000 * cpu_per_text,
                      "right": right, "old_right": old_right}))  # fmt: skip


def _probabilities(kind: str, texts: list[str], codes: list[str]) -> list[dict[str, float]]:
    from harness.checks.language import candidate_probabilities, detector

    if kind == "mean":
        return candidate_probabilities(texts, codes, langid_alone_from=None)
    if kind == "now":
        return candidate_probabilities(texts, codes)
    found = detector(codes).compute_language_confidence_values_in_parallel(texts)
    return [
        {v.language.iso_code_639_1.name.lower(): float(v.value) for v in values} for values in found
    ]


DETECTOR_KINDS = {"lingua": "lingua alone", "mean": "mean of both", "now": "rule now"}


def detector_cost() -> None:
    here = Path(__file__).resolve()
    got = {}
    for kind in DETECTOR_KINDS:
        out = subprocess.run([sys.executable, str(here), "--detector", kind],
                             check=True, capture_output=True, text=True).stdout  # fmt: skip
        got[kind] = json.loads(out.strip().splitlines()[-1])
    print("\n== language detector, 12 default candidates, frozen half (main stratum)")
    print(f"{'':<34}" + "".join(f"{name:>14}" for name in DETECTOR_KINDS.values()))
    for label, key, form in (
        ("RSS added (models loaded), MiB", "rss_mib", "{:>14.0f}"),
        ("build + first reply, s", "build_s", "{:>14.2f}"),
        ("time per reply (batch), ms", "per_text_ms", "{:>14.3f}"),
        ("CPU per reply (all threads), ms", "cpu_per_text_ms", "{:>14.3f}"),
    ):
        print(f"{label:<34}" + "".join(form.format(got[kind][key]) for kind in DETECTOR_KINDS))
    a, b, c = (got[kind] for kind in DETECTOR_KINDS)
    for band in BANDS:
        k, n = a["old_right"][band]
        print(f"right {band:<7} before (>= 0.5, 20 letters) {100 * k / n:5.1f} %; ranked first "
              f"by 0.02: lingua {100 * a['right'][band][0] / n:5.1f} %, "
              f"mean {100 * b['right'][band][0] / n:5.1f} %, "
              f"now {100 * c['right'][band][0] / n:5.1f} %  (n={n})")  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="frozen half, no windows: seconds")
    parser.add_argument("--detector", choices=tuple(DETECTOR_KINDS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.detector:
        detector_child(args.detector)
        return 0
    start = time.perf_counter()
    misses = score_sets(args.quick)
    if not args.quick:
        rule_choice()
        detector_cost()
    print(f"\n{time.perf_counter() - start:.1f} s")
    for miss in misses:
        print(f"GOAL MISSED: {miss}")
    print("all goals met" if not misses else f"{len(misses)} goal(s) missed")
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main())
