"""Time per generated token of each remedy relative to `none`, measured so that the shared
machine's load cancels (issue 53's speed column).

Timing each policy once, one after the other, lets the other sessions' load change between
them: guidance at gamma 1.5, 2 and 3 does the same work per token yet read 3.27x, 3.13x and
1.86x that way. Here each round times, for every remedy, one `none` batch and one remedy batch
back to back on the same prompts (same batch, every reply exactly `tokens` tokens: EOS is held
off until then), the pair's order alternating from round to round so a drift within a pair
does not favour either side. The round's ratio is (remedy s/token) / (none s/token); load that
holds for the few seconds of a pair divides out. Over rounds: the median ratio with its
distribution-free order-statistic interval (`harness.stats.quantile_interval`, valid whatever
the load does to the spread). Round 0 is a warm-up (one-off costs: kernels, hooks) and is
dropped.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence

RATIO_CAP = 100.0  # the ratio's range for the interval's bounds (no remedy costs 100x a token)


def pair_order(round_index: int, remedy: str, baseline: str = "none") -> tuple[str, str]:
    """Even rounds time `none` first, odd rounds the remedy first."""
    return (baseline, remedy) if round_index % 2 == 0 else (remedy, baseline)


def speed_rounds(
    run_one: Callable[[str], int],
    remedies: Sequence[str],
    rounds: int,
    clock: Callable[[], float] = time.perf_counter,
    baseline: str = "none",
) -> dict[str, list[float]]:
    """{remedy: [per-round ratio of seconds per generated token to `baseline`'s]} over
    `rounds` rounds after one warm-up round. `run_one(label)` generates the fixed batch under
    that policy and returns the tokens it generated."""
    ratios: dict[str, list[float]] = {r: [] for r in remedies}
    for index in range(rounds + 1):
        for remedy in remedies:
            per_token = {}
            for label in pair_order(index, remedy, baseline):
                start = clock()
                tokens = run_one(label)
                per_token[label] = (clock() - start) / tokens
            if index > 0:  # round 0 is the warm-up
                ratios[remedy].append(per_token[remedy] / per_token[baseline])
        if index > 0:
            done = ", ".join(f"{r} {v[-1]:.2f}" for r, v in ratios.items())
            print(f"  round {index}: {done}", file=sys.stderr, flush=True)
    return ratios


def ratio_interval(ratios: Sequence[float], level: float = 0.95):
    """The median per-round ratio with its order-statistic interval (a `harness.stats.Interval`)."""
    from harness.stats import quantile_interval

    return quantile_interval(ratios, 0.5, level=level, lower=0.0, upper=RATIO_CAP)


def speed_table(ratios: dict[str, list[float]]) -> str:
    lines = [
        "| remedy | time ratio to none (median of rounds) | 95 % interval | rounds | "
        "round ratios (min..max) |",
        "|---|---|---|---|---|",
    ]
    for label, values in ratios.items():
        ci = ratio_interval(values)
        lines.append(
            f"| {label} | {ci.estimate:.2f} | [{ci.low:.2f}, {ci.high:.2f}] | {ci.n} | "
            f"{min(values):.2f}..{max(values):.2f} |"
        )
    return "\n".join(lines)


def measure(engine, specs, policy_specs, tokens: int, rounds: int) -> dict[str, list[float]]:
    """Per-round ratios of each remedy in `policy_specs` (the first is `none`) on `specs`, each
    reply exactly `tokens` tokens, on the hf `engine`."""
    from harness.engines import SamplingSettings
    from harness.policies import ChatFormat, policy_run, run_policies

    chat = ChatFormat(engine.tokenizer)
    sampling = SamplingSettings(
        temperature=0.7, top_p=0.95, max_tokens=tokens, min_tokens=tokens, seed=11
    )
    by_label = {spec.label: spec for spec in policy_specs}

    def run_one(label: str) -> int:
        records = run_policies([(policy_run(by_label[label]), specs)], engine, chat, sampling)[0]
        return sum(len(r.continuation_ids) for r in records)

    labels = [spec.label for spec in policy_specs]
    return speed_rounds(run_one, labels[1:], rounds, baseline=labels[0])
