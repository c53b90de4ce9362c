"""Half-life and survival on the generated-token clock, as AUC: a policy that injects a
reminder before every window (t counts it, g does not) gets the same half-life, survival median
and survival curve as the same generated text without reminders; the reminders are its cost,
not time it survived."""

from __future__ import annotations

import pandas as pd
import pytest

from harness.scoring.adherence import adherence_summary
from harness.scoring.passes import window_passes
from harness.scoring.survival import survival_curves

WIDTH, REMINDER = 64, 40  # generated tokens per window; tokens each reminder injects


def _windows(policy: str, injected: int) -> pd.DataFrame:
    """8 samples of 4 windows: sample s passes its first s % 4 + 1 windows, then fails. With
    `injected` > 0 a reminder of that many tokens precedes every window after the first."""
    rows = []
    for sample in range(8):
        for k in range(4):
            t_start = k * (WIDTH + injected) + 1
            ok = k <= sample % 4
            rows.append(
                dict(run_id="r", model="m", task="t", item="i", policy=policy, seed=0,
                     sample=sample, window=k, t_start=t_start, t_end=t_start + WIDTH - 1,
                     t_gen_start=k * WIDTH + 1, check="c", scope="window", value=float(ok),
                     passed=ok, reason="")
            )  # fmt: skip
    return pd.DataFrame(rows)


@pytest.fixture
def frame() -> pd.DataFrame:
    return pd.concat([_windows("none", 0), _windows("periodic", REMINDER)], ignore_index=True)


def test_half_life_and_survival_median_count_generated_tokens_only(frame):
    rows = {r.policy: r for r in adherence_summary(frame, horizon=4 * WIDTH)}
    plain, reminded = rows["none"], rows["periodic"]
    assert reminded.auc == pytest.approx(plain.auc)
    assert reminded.half_life == plain.half_life
    assert (reminded.half_life_low, reminded.half_life_high) == (
        plain.half_life_low, plain.half_life_high,
    )  # fmt: skip
    assert reminded.survival_median == plain.survival_median
    # the first failure of samples 0, 4 is the second window: generated token 65, whatever
    # the reminders before it (on the t clock it was 65 + 40)
    assert plain.survival_median <= 3 * WIDTH + 1


def test_the_survival_curve_steps_at_the_same_generated_tokens(frame):
    curves = survival_curves(window_passes(frame))
    plain = curves[curves["policy"] == "none"][["t", "survival"]].reset_index(drop=True)
    reminded = curves[curves["policy"] == "periodic"][["t", "survival"]].reset_index(drop=True)
    pd.testing.assert_frame_equal(plain, reminded)
    assert plain["t"].tolist() == [0.0, 65.0, 129.0, 193.0]
