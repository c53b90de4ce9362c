"""Tokens per decision: sampling until decided vs a fixed sample count with the same guarantee.

    .venv/bin/python bench/sequential.py [--max 256] [--tokens 64] [--power 0.9]

A mix of clear and close conditions: items whose samples comply with a known probability
(a scripted engine, harness/engines/scripted.py: no model; each sample complies in every
window or in none, as the embedded model does), each gated `auc >= 0.8`: a one-sided question,
tested one-sided at the full 95 % (harness.stats.sided) by every design. Every design runs
through the project's own stages (generate, score, analyse, gates) and its tokens are counted
from generations.jsonl:

- sequential: `samples: {min: 4, max: --max}`, the one-sided bounds of a sequential run (AUC
  is a per-sample fraction, so the beta-binomial e-process and the betting e-process, each at
  alpha/2, the tighter bound read: valid at every look), looked at after every batch; with the
  default rule (doubling), with `batch: 4` and with `batch: 1` (a look after every sample:
  the fewest tokens a look schedule can spend);
- fixed, planned: the n a fixed design must choose in advance to decide every condition with
  probability >= --power at the same level, given the true pass rates (the exact binomial
  distribution of the one-sided Clopper-Pearson bounds that the fixed-n gates read on 0/1
  values: one-sided too, so the comparison is like for like);
- fixed, oracle: the smallest n (steps of 4) at which the fixed run's first n samples give
  every verdict the sequential run gave (the project's summary and gate code on them). It is
  chosen after seeing the data, which no real design can: a lower bound on fixed tokens.

All designs draw the same samples (a sample's seed depends on its item and index only), so
the verdicts compare one to one. Goal (issue 32): >= 4x fewer tokens than the planned one-sided
fixed design with the better sequential rule, with the same verdicts.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import yaml

BOUND = 0.8
LEVEL = 0.95
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


def planned_n(power: float, largest: int = 2048) -> int:
    """The smallest n at which the fixed-n one-sided Clopper-Pearson bounds at LEVEL decide
    every condition correctly with probability >= power, given its true pass rate."""
    import numpy as np
    from scipy.stats import beta, binom

    alpha = 1 - LEVEL
    for n in range(4, largest + 1):
        k = np.arange(n + 1)
        with np.errstate(invalid="ignore"):
            low = np.where(k > 0, beta.ppf(alpha, k, n - k + 1), 0.0)  # one-sided, full alpha
            high = np.where(k < n, beta.ppf(1 - alpha, k + 1, n - k), 1.0)
        powers = [
            float((binom.pmf(k, n, p) * ((low >= BOUND) if p >= BOUND else (high < BOUND))).sum())
            for p in RATES.values()
        ]
        if min(powers) >= power:
            return n
    raise SystemExit(f"no n <= {largest} reaches power {power}")


def oracle_n(config_path: Path, out: Path, target: dict[str, str]) -> int | None:
    """The smallest n (steps of 4) whose fixed-n verdicts on the run's first n samples equal
    `target`, through summarise_conditions and evaluate_gates (None: not even all of them)."""
    import pandas as pd

    from harness.analysis.gates import evaluate_gates
    from harness.analysis.summary import summarise_conditions, token_frame
    from harness.config_files import load_run_config
    from harness.records import GenerationRecord

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max", type=int, default=256, help="samples per condition at most")
    parser.add_argument("--tokens", type=int, default=64, help="generated tokens per sample")
    parser.add_argument("--power", type=float, default=0.9, help="the planned fixed design's")
    args = parser.parse_args()

    import pandas as pd

    install_scripted_engine()
    rules = {"doubling": {}, "batch 4": {"batch": 4}, "batch 1": {"batch": 1}}
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
        n = planned_n(args.power)
        (Path(tmp) / "fixed").mkdir()
        fixed_out, _ = run(Path(tmp) / "fixed", n, args.tokens)
        fixed = verdicts(pd.read_csv(fixed_out / "gates.csv", dtype={"item": str}))
        fixed_tokens = generated_tokens(fixed_out)
        oracle = oracle_n(Path(tmp) / "fixed" / f"run-{n}.yaml", fixed_out, seq["doubling"][0])
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
        tokens = seq["doubling"][2]
        print(
            f"oracle fixed n = {oracle} (after the fact): {oracle_tokens} tokens, "
            f"ratio {oracle_tokens / tokens:.2f} to doubling, "
            f"{oracle_tokens / seq['batch 4'][2]:.2f} to batch 4, "
            f"{oracle_tokens / seq['batch 1'][2]:.2f} to batch 1"
        )
    else:
        print(f"no fixed n <= {n} gives the sequential verdicts on these samples")


if __name__ == "__main__":
    main()
