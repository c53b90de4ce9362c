"""Synthetic run-folder frames (schemas.md) shared by the test_analysis_* modules (no tests)."""

from __future__ import annotations

import numpy as np
import pandas as pd

WINDOW = 64


def windows_frame(conditions, n_samples=4, n_windows=8, passed=None, with_check_rows=False):
    """windows.csv rows with check = "all" for each (model, item, policy) in `conditions`.

    passed(model, item, policy, sample, window) -> True / False / None (undetermined).
    """
    passed = passed or (lambda *a: True)
    rows = []
    for model, item, policy in conditions:
        for s in range(n_samples):
            for w in range(n_windows):
                ok = passed(model, item, policy, s, w)
                base = dict(
                    run_id="r", model=model, task="suite", item=item, policy=policy,
                    seed=1000 + s, sample=s, window=w, t_start=w * WINDOW + 1,
                    t_end=(w + 1) * WINDOW, t_gen_start=w * WINDOW + 1,
                )  # fmt: skip
                value = np.nan if ok is None else float(ok)
                rows.append({**base, "check": "all", "value": value, "passed": ok, "reason": ""})
                if with_check_rows:
                    rows.append(
                        {**base, "check": "language", "value": value, "passed": ok, "reason": ""}
                    )
    return pd.DataFrame(rows)


def fits_frame(conditions, alpha_of, n_layers=4, pooled=True):
    """fits.csv rows: rel_l2 (and an l2 decoy) per layer 0..n_layers, pair "all"."""
    rows = []
    for model, item, policy in conditions:
        for layer in range(n_layers + 1):
            for metric in ("rel_l2", "l2"):
                a = alpha_of(model, item, policy, layer)
                if metric == "l2":
                    a = 99.0  # must never be read
                if layer == 0:
                    a = np.nan
                rows.append(
                    dict(
                        model=model,
                        item=item,
                        policy=policy,
                        pair="all" if pooled else f"{item}/{policy}/0",
                        layer=layer,
                        metric=metric,
                        alpha=a,
                        alpha_low=a - 0.1,
                        alpha_high=a + 0.2,
                        r2=0.9,
                        t_min=16,
                        t_max=512,
                        reason="" if layer else "identical",
                    )  # fmt: skip
                )
    return pd.DataFrame(rows)


def tokens_frame(conditions, n_samples=4, generated=512, injected=0, restated=0):
    rows = []
    for model, item, policy in conditions:
        inj = injected(policy) if callable(injected) else injected
        res = restated(policy) if callable(restated) else restated
        for s in range(n_samples):
            rows.append(
                dict(model=model, item=item, policy=policy, seed=1000 + s, sample=s,
                     generated=generated, injected=inj, restated=res)
            )  # fmt: skip
    return pd.DataFrame(rows)
