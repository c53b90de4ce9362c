"""The linear relay model: exact layer 1, brute-force agreement, decay shape, bound, speed."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

from harness.analysis.relay import (
    CSV_COLUMNS,
    bound_limit,
    csv_positions,
    relay_deltas,
    solve_relay,
    sweep_alpha,
    validate_relay,
    write_relay_csv,
)
from harness.errors import UserError


def brute_force(P: int, L: int, T: int, W: float = 0.0) -> np.ndarray:
    """The recursion written out position by position: (L, T) continuation deltas."""
    d = [1.0] * P + [0.0] * T
    rows = []
    for _ in range(L):
        d = [
            (1 + W) * d[i] + (1 - W) * sum(d[: i + 1]) / (i + 1)  # i + 1 visible positions
            for i in range(P + T)
        ]
        rows.append(d[P:])
    return np.array(rows)


@pytest.mark.parametrize("W", [0.0, 0.3])
def test_layer_one_is_prompt_share_exactly(W):
    P, T = 32, 100_000
    c = relay_deltas(P, 1, T, W)
    t = np.arange(1, T + 1)
    assert np.array_equal(c.t, t)
    assert np.max(np.abs(c.delta[0] - (1 - W) * P / (P + t))) < 1e-12


@pytest.mark.parametrize(("P", "L", "T", "W"), [(3, 4, 40, 0.0), (5, 3, 30, 0.5), (1, 2, 16, 0.9)])
def test_matches_brute_force_across_chunks(P, L, T, W):
    expected = brute_force(P, L, T, W)
    for chunk in (7, 1 << 20):  # chunk boundaries inside the prompt and the continuation
        c = relay_deltas(P, L, T, W, chunk=chunk)
        assert np.allclose(c.delta, expected, rtol=1e-13, atol=0)


def test_prompt_positions_double_each_layer():
    c = relay_deltas(6, 5, 20, 0.25, chunk=4)
    assert c.prompt.shape == (6, 6)
    assert np.allclose(c.prompt, 2.0 ** np.arange(6)[:, None])


def test_positions_subset_equals_full_solution():
    full = relay_deltas(8, 3, 5000)
    pos = np.array([1, 17, 999, 5000])
    part = relay_deltas(8, 3, 5000, positions=pos)
    assert np.array_equal(part.delta, full.delta[:, pos - 1])
    with pytest.raises(ValueError):
        relay_deltas(8, 3, 5000, positions=np.array([5001]))


def test_top_layer_local_exponent_rises_toward_one():
    r = solve_relay(32, 4, 10**6)
    loc = r.local_alpha[-1]
    finite = np.isfinite(loc)
    assert finite[r.t >= 4].all()  # NaN only where the window holds < 3 points (t = 1, 2)
    step = np.diff(loc[finite])
    # Non-decreasing over the whole grid; equal only where T/10 was added to the grid and the
    # neighbouring windows hold the same points.
    assert np.all(step >= 0)
    assert np.sum(step == 0) <= 1
    assert 0.7 < loc[-1] < 1.0  # still below 1 at 1e6: the log factors
    # Layer 1 is P/(P+t): its local exponent is t/(P+t) -> 1.
    assert abs(r.local_alpha[0, -1] - 1.0) < 1e-3


def test_deeper_layers_decay_slower():
    r = solve_relay(32, 4, 10**5)
    alphas = [s.alpha for s in r.summary]
    assert all(a > b for a, b in zip(alphas, alphas[1:], strict=False))
    assert 0.9 < alphas[0] < 1.0


def test_bound_ratio_settles():
    rel = {}
    for T in (10**5, 10**6):
        top = solve_relay(32, 4, T).summary[-1]
        rel[T] = abs(top.bound_ratio_T10 - top.bound_ratio_T) / top.bound_ratio_T
    assert rel[10**6] < 0.05  # a small relative change over the last decade
    assert rel[10**6] < rel[10**5]  # and smaller the larger T
    # The limit (l - 1)!^-1 is approached from above, slowly (1/log t).
    top = solve_relay(32, 4, 10**6).summary[-1]
    assert bound_limit(4) < top.bound_ratio_T < top.bound_ratio_T10
    assert bound_limit(4) == pytest.approx(1 / 6)


def test_bound_ratio_column_is_delta_over_bound():
    r = solve_relay(10, 3, 1000)
    k = int(np.searchsorted(r.t, 100))
    assert r.bound_ratio[2, k] == pytest.approx(r.delta[2, k] / (10 * math.log(100) ** 2 / 100))
    assert math.isnan(r.bound_ratio[2, 0])  # t = 1: the bound is 0


def test_one_million_tokens_runs_fast():
    started = time.perf_counter()
    solve_relay(32, 4, 10**6)
    assert time.perf_counter() - started < 3.0  # measured ~0.15 s


def test_sweep_alpha_moves_with_layers_and_self_weight():
    s = sweep_alpha(32, 10**4)
    assert set(s) == {(n, w) for n in (1, 2, 4, 8) for w in (0.0, 0.25, 0.5, 0.75)}
    # Layer 1 is (1 - W) P/(P + t): W only scales it, alpha does not move.
    assert len({round(s[(1, w)], 12) for w in (0.0, 0.25, 0.5, 0.75)}) == 1
    for w in (0.0, 0.25, 0.5, 0.75):
        assert s[(1, w)] > s[(2, w)] > s[(4, w)] > s[(8, w)]
    for n in (2, 4, 8):
        assert s[(n, 0.0)] < s[(n, 0.25)] < s[(n, 0.5)] < s[(n, 0.75)]


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        ((0, 4, 100, 0.0), "--prompt-len"),
        ((8, 0, 100, 0.0), "--layers"),
        ((8, 4, 15, 0.0), "--tokens"),
        ((8, 4, 100, 1.0), "--self-weight"),
        ((8, 4, 100, -0.1), "--self-weight"),
        ((8, 4, 100, float("nan")), "--self-weight"),
    ],
)
def test_bad_parameters(args, flag):
    with pytest.raises(UserError, match=flag):
        validate_relay(*args)
    with pytest.raises(UserError):
        relay_deltas(*args)


def test_write_relay_csv(tmp_path):
    r = solve_relay(16, 2, 1000)
    path = tmp_path / "relay.csv"
    write_relay_csv(r, path)
    lines = path.read_text().splitlines()
    assert lines[0] == ",".join(CSV_COLUMNS)
    n = len(csv_positions(1000))
    assert len(lines) == 1 + 2 * n
    assert 100 < n <= 201  # 200 geometric positions, fewer after rounding, plus T/10
    assert 100 in csv_positions(1000)
    layer, t, delta, _, _, unit = lines[1 + 5].split(",")
    assert (layer, float(delta), unit) == ("1", 16 / (16 + int(t)), "tokens")
    assert [p.name for p in tmp_path.iterdir()] == ["relay.csv"]  # no temp file left
