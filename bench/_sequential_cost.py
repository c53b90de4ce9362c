"""bench/sequential.py's samples as a hosted run pays for them: requests and tokens.

Each sample of the bench's single-reply items is one chat request; its tokens are the run
plan's budget (`harness.units.plan.plan_run`: what `harness run --dry-run` prints, priced) for
the
bench's own config (`sequential.write_inputs`) at `tokens` per reply: per sample the prompt's
input tokens and `tokens` output tokens, an upper bound (a reply that ends early costs less).
Input tokens are counted in the config model's tokenizer (tiny-random-llama, the Llama
tokenizer family); a hosted model's differ by its tokenizer, the requests do not.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class PerSample:
    """One sample's budget from the plan: requests, input and output tokens (means over the
    ten conditions, whose prompts differ by their item names only)."""

    requests: float
    input_tokens: float
    output_tokens: float


def per_sample_budget(tokens: int, samples: int = 4) -> PerSample:
    """The plan's generation units for `samples` per condition, divided by the samples."""
    from sequential import write_inputs

    from harness.units.plan import plan_run

    with tempfile.TemporaryDirectory(prefix="bench-sequential-plan-") as tmp:
        plan = plan_run(write_inputs(Path(tmp), samples, tokens), out=Path(tmp) / "out")
    units = [u for u in plan.units if u.stage == "generate"]
    n = sum(u.samples * len(u.items) for u in units)
    return PerSample(
        requests=sum(u.budget.requests for u in units) / n,
        input_tokens=sum(u.budget.input_tokens for u in units) / n,
        output_tokens=sum(u.budget.output_tokens for u in units) / n,
    )


def cost_lines(designs: dict[str, np.ndarray], fixed_total: int, per: PerSample) -> list[str]:
    """Per design (samples per run, one entry a run): mean requests and tokens per run, and
    the saving against the fixed design's `fixed_total` samples, absolute and as a ratio."""
    fixed_req = fixed_total * per.requests
    fixed_tok = fixed_total * (per.input_tokens + per.output_tokens)
    lines = [
        f"fixed (n = {fixed_total // 10} x 10): {fixed_req:,.0f} requests, "
        f"{fixed_total * per.input_tokens:,.0f} input + {fixed_total * per.output_tokens:,.0f} "
        f"output = {fixed_tok:,.0f} tokens at most"
    ]
    for name, totals in designs.items():
        mean = float(np.mean(totals))
        req, tok = mean * per.requests, mean * (per.input_tokens + per.output_tokens)
        lines.append(
            f"{name}: {req:,.1f} requests, {tok:,.0f} tokens at most (means per run); saves "
            f"{fixed_req - req:,.1f} requests and {fixed_tok - tok:,.0f} tokens a run "
            f"({fixed_req / req:.2f}x fewer)"
        )
    return lines
