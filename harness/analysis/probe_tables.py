"""The frames of `harness probe` from its curves: a run's own divergence.csv, nexttoken.csv,
attention.csv (every t, where a run keeps a subset) and fits.csv (the run's fits writer), each
through the run's row model (`harness.results.probing`).

A probed pair is `(model, lam, pair, curves)`: the probe model's name, the attention-bias
strength (None without --attention-bias), the pair's name and its `PairDivergence`
(`harness.probes.divergence`). In the files it is a run's record: item = the pair's name,
policy = `none` or, under a lam, the run's label of that attention-bias policy, sample 0; its
tokens are a single reply's (turn 1, role `assistant`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from harness.analysis.attention import uniform_share
from harness.analysis.fits import POOLED, FitMember, fit_table, pooled_fit_rows
from harness.config.policy_specs import BASELINE, policy_label
from harness.policies import AttentionBiasPolicy
from harness.probes.arrays import SHARE_METRICS
from harness.probes.precision import hidden_below_floor
from harness.results import CONDITION, AttentionRow, pair_id
from harness.results.probing import ContinuationRole

if TYPE_CHECKING:  # annotations only: the module loads torch
    from harness.probes.divergence import PairDivergence

ProbedPair = tuple[str, "float | None", str, "PairDivergence"]

SAMPLE = 0  # one continuation per pair: the record's only sample
TURN = 1  # a single reply
ROLE: ContinuationRole = "assistant"  # every continuation token stands in the model's reply


def probe_policy(lam: float | None) -> str:
    """The policy a probe's curves ran under: the baseline, or the run's attention-bias label."""
    return BASELINE if lam is None else policy_label(AttentionBiasPolicy(lam=lam))


def _record(model: str, lam: float | None, pair: str) -> dict[str, Any]:
    """The run's record columns of one probed pair (model, item, policy, sample, pair)."""
    policy = probe_policy(lam)
    return {"model": model, "item": pair, "policy": policy, "sample": SAMPLE,
            "pair": pair_id(pair, policy, SAMPLE)}  # fmt: skip


def divergence_frame(curves: list[ProbedPair]) -> pd.DataFrame:
    """Every (model, pair, layer, t) of l2, rel_l2 and cos_dist."""
    parts = []
    for model, lam, pair, res in curves:
        n_layers, total = res.l2.shape
        parts.append(pd.DataFrame({
            **_record(model, lam, pair),
            "layer": np.repeat(res.layers, total),
            "t": np.tile(np.arange(1, total + 1), n_layers),
            "turn": TURN, "role": ROLE,
            "l2": res.l2.reshape(-1),
            "rel_l2": res.rel_l2.reshape(-1),
            "cos_dist": res.cos_dist.reshape(-1),
            "below_floor": hidden_below_floor(res.to_arrays()).reshape(-1),
        }))  # fmt: skip
    return pd.concat(parts)


def nexttoken_frame(curves: list[ProbedPair], backend: str) -> pd.DataFrame:
    """Every (model, pair, t) of delta_logp and the KL with its bounds (= kl where the
    backend computes it exactly)."""
    parts = []
    for model, lam, pair, res in curves:
        total = res.l2.shape[1]
        parts.append(pd.DataFrame({
            **_record(model, lam, pair),
            "t": np.arange(1, total + 1),
            "delta_logp": res.delta_logp,
            "kl": res.kl,
            "kl_low": res.kl if res.kl_low is None else res.kl_low,
            "kl_high": res.kl if res.kl_high is None else res.kl_high,
            "backend": backend,
        }))  # fmt: skip
    return pd.concat(parts)


def attention_frame(curves: list[ProbedPair]) -> pd.DataFrame:
    """Every (model, pair, layer, t) of prompt A's attention share; header-only without
    shares (as a run's where no pair ran on the hf backend)."""
    parts = []
    for model, lam, pair, res in curves:
        if not res.attention:
            continue
        layers = res.attention["attn_layers"]
        total = res.attention[SHARE_METRICS[0]].shape[1]
        t = np.arange(1, total + 1)
        parts.append(pd.DataFrame({
            **_record(model, lam, pair),
            "layer": np.repeat(layers, total), "t": np.tile(t, len(layers)),
            "turn": TURN, "role": ROLE,
            "prompt_len": res.prompt_lens[0],
            **{m: res.attention[m].reshape(-1) for m in SHARE_METRICS},
            "uniform": np.tile(uniform_share(res.prompt_lens[0], t), len(layers)),
        }))  # fmt: skip
    return pd.concat(parts) if parts else pd.DataFrame(columns=AttentionRow.columns())


def probe_fits(curves: list[ProbedPair], t_min: int, n_boot: int) -> pd.DataFrame:
    """fits.csv through the run's one fits writer: alpha per (model, item, policy, pair, layer,
    metric) of every pair, and a row per model pooled over all its pairs (item = policy = pair
    = `all`, bootstrap over pairs, identical pairs left out), as a run pools a model. Under
    several lams, also each policy's pairs pooled (item = pair = `all`): the sweep's
    comparison, which the whole model's row (biased and plain curves together) cannot give."""
    groups: list[tuple[dict, list[FitMember]]] = []
    by_policy: dict[tuple[str, str], list[FitMember]] = {}
    for model, lam, pair, res in curves:
        record = _record(model, lam, pair)
        member = FitMember(record["pair"], res.to_arrays())
        groups.append(({k: record[k] for k in CONDITION}, [member]))
        by_policy.setdefault((model, record["policy"]), []).append(member)
    fits = fit_table(groups, t_min, n_boot, n_boot, pool_models=True, ident=list(CONDITION))
    if len({policy for _, policy in by_policy}) == 1:
        return fits
    swept = [
        row
        for (model, policy), members in by_policy.items()
        if len(members) > 1
        for row in pooled_fit_rows(
            {"model": model, "item": POOLED, "policy": policy}, members, t_min, n_boot
        )
    ]
    whole = fits["item"] == POOLED  # the models' rows stay last, as a run writes them
    parts = [fits[~whole], pd.DataFrame(swept, columns=fits.columns), fits[whole]]
    return pd.concat([p for p in parts if len(p)], ignore_index=True)
