"""How many samples a run takes: `samples: N`, or `samples: {min, max, batch?}` to sample until
the gates decide (docs/architecture.md, "Sampling until decided"; the looks themselves are
`harness.units.sequential`)."""

from __future__ import annotations

import math
from typing import Any

from pydantic import Field, ValidationError, model_validator

from harness.config.schema import Strict


class SampleRange(Strict):
    """Sample until the gates decide (docs/architecture.md, "Sampling until decided"): every
    condition gets `min` samples, then the conditions whose gates are still undecided get more,
    a batch at a time, up to `max`."""

    # an interval cannot be formed from one sample, so a first look needs at least two
    min: int = Field(ge=2)
    max: int = Field(gt=0)
    # samples added to an open condition per batch; None: looks growing x1.3 (round(min x
    # 1.3^i): 4, 5, 7, 9, 11, 15, ... from 4), the group-sequential test's
    batch: int | None = Field(None, gt=0)

    @model_validator(mode="after")
    def _ordered(self) -> SampleRange:
        if self.min > self.max:
            raise ValueError(f"min {self.min} is greater than max {self.max}")
        return self


def sample_range(value: Any) -> Any:
    """`samples: {min, max}` -> SampleRange with its own message (pydantic would report the
    int branch of the union first)."""
    if isinstance(value, SampleRange) or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    if not isinstance(value, dict):
        raise ValueError(f"expected a number of samples or {{min, max}}, got {value!r}")
    try:
        return SampleRange.model_validate(value)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(part) for part in err["loc"])
        msg = "unknown key" if err["type"] == "extra_forbidden" else err["msg"]
        msg = msg.removeprefix("Value error, ")
        raise ValueError(f"{where}: {msg}" if where else msg) from None


# the looks' growth without `batch`: round(min * GROWTH^i). Many small steps beat doubling
# (bench/sequential.py: 15 looks x1.3 from 4 to 157 take 3.61x fewer expected samples than the
# fixed design on its ten conditions, doubling with confidence sequences 2.36x; 3.86 was a mean
# of per-run ratios, which Jensen's inequality pushes up): a condition stops near the n that
# decides it, and the calibrated nominal levels cost little for 15 looks.
GROWTH = 1.3


def schedule(samples: SampleRange) -> list[int]:
    """The sample counts at which a condition is looked at: round(min * GROWTH^i) (at least one
    more each time), or min + i batch, the last one max."""
    counts = [samples.min]
    while counts[-1] < samples.max:
        step = samples.batch or max(1, round(samples.min * GROWTH ** len(counts)) - counts[-1])
        counts.append(min(counts[-1] + step, samples.max))
    return counts


def _least_n(bound: float, alpha: float) -> float:
    """The fewest samples at which all of them on the gate's side give a one-sided
    Clopper-Pearson bound beyond `bound` (the bound's distance from the wall: a `min` gate's
    bound b, a `max` gate's 1 - b): alpha^(1/n) <= bound fails, so n >= ln alpha / ln bound."""
    return math.inf if bound >= 1 else 0.0 if bound <= 0 else math.log(alpha) / math.log(bound)


def max_needed(
    bound: float, side: str, samples: SampleRange, alpha: float
) -> tuple[int, int] | None:
    """None when a one-sided gate's bound can be decided in its favour by `samples.max`; else
    (at least, surely) the max it needs ((0, 0): none does). Even every sample passing (a `min`
    gate; failing, a `max` gate) passes only once the design's last look crosses the bound: at
    the full alpha that needs n >= ln alpha / ln b (necessary: `at least`); at alpha / looks,
    where the group-sequential design's nominal levels start (harness.stats.group_sequential),
    it is sufficient (`surely`). In between the design itself is asked (~2-30 s, only for such
    a gate); the exact max between the two would take a design per candidate."""
    wall = bound if side == "min" else 1.0 - bound
    if wall >= 1:
        return (0, 0)
    looks = schedule(samples)
    if samples.max >= _least_n(wall, alpha / len(looks)):
        return None
    if samples.max >= _least_n(wall, alpha):
        from harness.stats.group_sequential import gate_design  # lazy: scipy, only here

        test = gate_design(tuple(looks), bound, alpha)
        passes, fails = test.boundaries[-1]
        if passes[-1] if side == "min" else fails[0]:
            return None
    surely = samples.max
    while surely < _least_n(
        wall, alpha / len(schedule(samples.model_copy(update={"max": surely})))
    ):
        surely = max(surely + 1, math.ceil(surely * 1.02))
    return max(samples.max + 1, math.ceil(_least_n(wall, alpha))), surely
