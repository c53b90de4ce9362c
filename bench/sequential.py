"""Samples per decision: sampling until decided vs a fixed sample count with the same guarantee.

    .venv/bin/python bench/sequential.py [--runs 200] [--quick] [--seed 0]
    .venv/bin/python bench/sequential.py --pipeline [--max 256] [--tokens 64]   (one whole run)

Ten conditions gated `auc >= 0.8` (RATES: eight clear of the bound, two close), each sample
complying with a known probability, one-sided at the full 95 % (harness.stats.sided), power 0.9.

Default: --runs simulated runs (seeded 0/1 sample paths, the same paths for every design):

- the fixed baseline: the smallest n at which the fixed-n one-sided Clopper-Pearson bounds give
  all ten verdicts right with probability >= --power (exact binomial: the product of the ten
  conditions' powers; `fixed_n`). The smallest n with each condition's own power >= 0.9 (77)
  sits on the sawtooth of the discrete test (78 gives 0.874) and gets all ten right with 0.867;
- shipped: what `samples: {min: 4, max: 157}` runs (SHIPPED), read through the runner's own
  functions: the looks of harness.config.sampling.schedule (x1.3 from 4: 4, 5, 7, ..., 121,
  157), the
  passes counted as the analyse stage counts them, each look's verdict the gates stage's
  group-sequential test (harness.analysis.gate_sequential), its nominal levels calibrated
  exactly so each side errs <= 0.05 at every rate; exact figures beside;
- before: the rule shipped until this design (`samples: {min: 4, max: 256}` doubling, each
  look reading the gate's anytime one-sided bounds, `one_sided_bounds(anytime=True,
  value_type="fraction")`), on the same paths.

Per design: the ratio (fixed-design samples / sequential samples, all ten conditions) per run,
its mean, sd and 5-95 % range, the ratio of expectations, and per condition the share of runs
that decided right and wrong (exact figures beside, for the shipped rule). Exits 1
when the shipped rule's mean ratio is below GOAL_RATIO, an exact error at the bound
exceeds 0.05, an exact power is below --power, or the simulation disagrees with the exact
figures (more than 4 standard errors). Last, each design's samples as a hosted run pays them:
requests (one a sample) and tokens (the run plan's budget per sample at --tokens per reply),
and the saving against the fixed design (bench/_sequential_cost.py).

--pipeline: the previous bench, one run of each rule through the project's stages with the
scripted engine (harness/engines/scripted.py), tokens from generations.jsonl, against the
planned fixed n (the same `fixed_n`).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

BOUND = 0.8
LEVEL = 0.95
GOAL_RATIO = 3.3  # issue 45: at least a 7-look group-sequential design's 3.31x
SHIPPED = {"min": 4, "max": 157}  # `samples: {min: 4, max: 157}`: looks round(4 * 1.3^i)
# pass rates: most conditions are clear of the bound, two are close to it
RATES = {
    "pass-a": 0.99, "pass-b": 0.99, "pass-c": 0.98, "pass-d": 0.97,
    "fail-a": 0.2, "fail-b": 0.3, "fail-c": 0.4, "fail-d": 0.5,
    "close-hi": 0.93, "close-lo": 0.65,
}  # fmt: skip


def write_inputs(folder: Path, samples, tokens: int) -> Path:
    suite = {
        "suite": "scripted",
        "items": [
            {
                "id": item,
                "system": "Say yes.",
                "user": f"Answer [{item}].",
                "checks": [{"type": "regex_must_not", "pattern": r"\bno\b"}],
            }
            for item in RATES
        ],
    }
    (folder / "suite.yaml").write_text(yaml.safe_dump(suite))
    config = {
        "name": "bench-sequential",
        "models": ["tiny-random-llama"],
        "suites": [str(folder / "suite.yaml")],
        "policies": ["none"],
        "samples": samples,
        "generation": {"engine": "hf", "max_tokens": tokens},
        "scoring": {"window": tokens // 4},
        "probe": {"enabled": False},
        "gates": [{"metric": "auc", "policy": "none", "min": BOUND}],
    }
    path = folder / f"run-{'seq' if isinstance(samples, dict) else samples}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def install_scripted_engine():
    """The scripted engine in place of every engine the harness makes (the engine registry)."""
    from transformers import AutoTokenizer

    from harness.engines.scripted import ScriptedEngine, replace_every_engine
    from harness.models import resolve_model

    tokenizer = AutoTokenizer.from_pretrained(resolve_model("tiny-random-llama").path)
    engine = ScriptedEngine({f"[{item}]": rate for item, rate in RATES.items()}, tokenizer)
    replace_every_engine(engine)  # for the bench's whole process
    return engine


def generated_tokens(out: Path, below: int | None = None) -> int:
    rows = [json.loads(line) for line in (out / "generations.jsonl").read_text().splitlines()]
    return sum(r["tokens"]["generated"] for r in rows if below is None or r["sample"] < below)


def verdicts(gates) -> dict[str, str]:
    return dict(zip(gates["item"], gates["verdict"], strict=True))


def fixed_powers(n: int) -> np.ndarray:
    """Per condition, the exact probability that n samples' fixed-n one-sided Clopper-Pearson
    bounds at LEVEL give the right verdict (pass: lcb >= BOUND; fail: ucb < BOUND)."""
    from scipy.stats import beta, binom

    alpha = 1 - LEVEL
    k = np.arange(n + 1)
    with np.errstate(invalid="ignore"):
        low = np.where(k > 0, beta.ppf(alpha, np.maximum(k, 1), n - k + 1), 0.0)
        high = np.where(k < n, beta.ppf(1 - alpha, k + 1, np.maximum(n - k, 1)), 1.0)
    return np.array(
        [
            (binom.pmf(k, n, p) * ((low >= BOUND) if p >= BOUND else (high < BOUND))).sum()
            for p in RATES.values()
        ]
    )


def fixed_n(power: float, largest: int = 2048) -> int:
    """The smallest n at which all ten fixed-n verdicts are right with probability >= power
    (the conditions are independent: the product of their powers)."""
    for n in range(4, largest + 1):
        if fixed_powers(n).prod() >= power:
            return n
    raise SystemExit(f"no n <= {largest} reaches power {power}")


def oracle_n(config_path: Path, out: Path, target: dict[str, str]) -> int | None:
    """The smallest n (steps of 4) whose fixed-n verdicts on the run's first n samples equal
    `target`, through summarise_conditions and evaluate_gates (None: not even all of them)."""
    import pandas as pd

    from harness.analysis.gates import evaluate_gates
    from harness.analysis.summary import summarise_conditions, token_frame
    from harness.config.files import load_run_config
    from harness.text.records import GenerationRecord

    config = load_run_config(config_path)
    windows = pd.read_csv(out / "windows.csv", dtype={"item": str})
    records = [
        GenerationRecord.model_validate_json(line)
        for line in (out / "generations.jsonl").read_text().splitlines()
    ]
    largest = max(r.sample for r in records) + 1
    for n in range(4, largest + 1, 4):
        tokens = token_frame([r for r in records if r.sample < n])
        summary = summarise_conditions(None, windows[windows["sample"] < n], tokens, [])
        got = evaluate_gates(config.gates, summary, list(RATES), list(config.models))
        if verdicts(got) == target:
            return n
    return None


def run(folder: Path, samples, tokens: int) -> tuple[Path, float]:
    from harness.pipeline import run_pipeline

    start = time.perf_counter()
    out = run_pipeline(
        write_inputs(folder, samples, tokens), out=folder / "out", show_progress=False
    )
    return out, time.perf_counter() - start


def pipeline_main(args) -> None:
    import pandas as pd

    install_scripted_engine()
    rules = {"x1.3": {}, "batch 4": {"batch": 4}, "batch 1": {"batch": 1}}
    seq = {}
    with tempfile.TemporaryDirectory(prefix="bench-sequential-") as tmp:
        for rule, extra in rules.items():
            (Path(tmp) / rule).mkdir()
            out, seconds = run(Path(tmp) / rule, {"min": 4, "max": args.max, **extra}, args.tokens)
            manifest = json.loads((out / "manifest.json").read_text())["sequential"]
            gates = pd.read_csv(out / "gates.csv", dtype={"item": str})
            taken = {c["item"]: c["samples"] for c in manifest["conditions"]}
            seq[rule] = (
                verdicts(gates),
                taken,
                generated_tokens(out),
                seconds,
                len(manifest["looks"]),
            )
        n = fixed_n(args.power)
        (Path(tmp) / "fixed").mkdir()
        fixed_out, _ = run(Path(tmp) / "fixed", n, args.tokens)
        fixed = verdicts(pd.read_csv(fixed_out / "gates.csv", dtype={"item": str}))
        fixed_tokens = generated_tokens(fixed_out)
        oracle = oracle_n(Path(tmp) / "fixed" / f"run-{n}.yaml", fixed_out, seq["x1.3"][0])
        oracle_tokens = generated_tokens(fixed_out, below=oracle) if oracle else None

    print(f"gate auc >= {BOUND} (one-sided bounds) at {LEVEL:.0%}; samples of {args.tokens} tokens")
    head = "".join(f"{rule:>20}" for rule in rules)
    print(f"{'item':9} {'p':>5}{head}{'fixed n=' + str(n):>16}")
    for item, rate in RATES.items():
        cells = "".join(f"{seq[r][0][item]:>14} {seq[r][1][item]:>5}" for r in rules)
        print(f"{item:9} {rate:5.2f}{cells}{fixed[item]:>16}")
    for rule, (verdict_of, _, tokens, seconds, looks) in seq.items():
        same = sum(verdict_of[i] == fixed[i] for i in RATES)
        print(
            f"sequential, {rule}: {tokens} generated tokens, {looks} looks, {seconds:.0f} s; "
            f"planned fixed (n = {n}, power {args.power}): {fixed_tokens} tokens; "
            f"ratio {fixed_tokens / tokens:.2f}; verdicts equal on {same} of {len(RATES)}"
        )
    if oracle:
        tokens = seq["x1.3"][2]
        print(
            f"oracle fixed n = {oracle} (after the fact): {oracle_tokens} tokens, "
            f"ratio {oracle_tokens / tokens:.2f} to x1.3, "
            f"{oracle_tokens / seq['batch 4'][2]:.2f} to batch 4, "
            f"{oracle_tokens / seq['batch 1'][2]:.2f} to batch 1"
        )
    else:
        print(f"no fixed n <= {n} gives the sequential verdicts on these samples")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200, help="simulated runs (>= 200 to report)")
    parser.add_argument("--quick", action="store_true", help="20 runs: a smoke test, not a result")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--power", type=float, default=0.9, help="the fixed design's, all ten")
    parser.add_argument("--pipeline", action="store_true", help="one whole run per rule instead")
    parser.add_argument("--max", type=int, default=256, help="--pipeline: samples at most")
    parser.add_argument(
        "--tokens",
        type=int,
        default=64,
        help="tokens per reply (--pipeline: generated; else the budget per request)",
    )
    args = parser.parse_args(argv)
    if args.pipeline:
        pipeline_main(args)
        return 0
    from _sequential_sim import simulate_main

    return simulate_main(20 if args.quick else args.runs, args.seed, args.power, args.tokens)


if __name__ == "__main__":
    raise SystemExit(main())
