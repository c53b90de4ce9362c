"""Theory stage: relay.csv (the solvable relay model) and bias.csv (alpha per layer under the
attention bias b = lam * log((P + t) / P) on the prompt keys, trained vs untrained twin, and
the prompt's attention share the bias leaves: its decay exponent and its values at t_min and
at the end, from the same forwards).

The bias sweep re-probes the `none`-policy samples of each item; lam = 0 reuses the plain
probe's curves (lam = 0 is the plain model, tested to 1e-5). Units are cached like the probe's.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from harness.analysis.powerlaw import fit_alpha
from harness.analysis.relay import relay_csv_text, solve_relay
from harness.config.run import RunConfig
from harness.models import ResolvedModel
from harness.policies import NonePolicy
from harness.probes.backend import HfBackend, backend_dtype
from harness.probes.precision import key_params, resolved
from harness.results import BiasRow, RelayRow, result_frame
from harness.stages.base import Curves, Records
from harness.stages.context import RunContext
from harness.stages.probe import baseline_ids, record_curves
from harness.store import RunStore, unit_key
from harness.text.records import GenerationRecord

STAGE = "bias"


def relay_text(config: RunConfig) -> str | None:
    spec = config.theory.relay
    if spec is None:
        return None
    return relay_csv_text(solve_relay(spec.prompt_len, spec.layers, spec.tokens))


def bias_records(config: RunConfig, records: list[GenerationRecord]) -> list[GenerationRecord]:
    keep = config.theory.bias_samples
    baseline = {r.policy for r in records if isinstance(config.policy_spec(r.policy), NonePolicy)}
    return [r for r in records if r.policy in baseline and r.sample < keep]


def bias_rows(
    store: RunStore,
    config: RunConfig,
    models: list[ResolvedModel],
    records: list[GenerationRecord],
    plain: dict[tuple[str, str], dict[str, Any]],
) -> list[dict[str, Any]]:
    """bias.csv rows: per probe model, lam and layer, alpha of rel_l2 pooled over the pairs."""
    from transformers import AutoTokenizer

    chosen = bias_records(config, records)
    if not config.theory.bias_lams or not chosen:
        return []
    layers = None if config.probe.layers == "all" else list(config.probe.layers)
    rows = []
    for model in models:
        tokenizer = AutoTokenizer.from_pretrained(model.path)
        dtype = backend_dtype("hf", config.probe.dtype, model.path)
        on_demand = HfBackend(model.path, dtype=dtype)
        for lam in config.theory.bias_lams:
            curves = []
            for record in chosen:
                rkey = record.key
                if lam == 0 and (model.name, rkey) in plain:
                    curves.append(plain[(model.name, rkey)])
                    continue
                base = baseline_ids(config, tokenizer, record)
                params = {"layers": layers, "lam": lam, "backend": on_demand.name,
                          **key_params(dtype)}  # fmt: skip
                key = unit_key(STAGE, model=model.content_key, inputs=[rkey, base], params=params)
                curves.append(
                    record_curves(store, STAGE, key, on_demand, record, base, layers, lam)
                )
            common = min(c["rel_l2"].shape[1] for c in curves)
            t = np.arange(1, common + 1)
            for row, layer in enumerate(curves[0]["layers"].tolist()):
                # below float32, positions under the rounding floor are left out (NaN)
                stack = np.vstack(
                    [resolved(c, config.probe.t_min)["rel_l2"][row, :common] for c in curves]
                )
                fit = fit_alpha(t, stack, t_min=config.probe.t_min, seed=0)
                rows.append(
                    {"model": model.name, "lam": lam, "layer": layer, "alpha": fit.alpha,
                     "alpha_low": fit.ci_low, "alpha_high": fit.ci_high, "r2": fit.r2,
                     "n_pairs": len(curves), "reason": fit.reason}
                    | share_fields(curves, layer, common, config.probe.t_min)
                )  # fmt: skip
    return rows


def share_fields(
    curves: list[dict[str, Any]], layer: int, common: int, t_min: int
) -> dict[str, Any]:
    """bias.csv's share columns at one hidden-state index: the pooled share_prompt_mean's
    exponent and its values at t_min and at `common`; NaN where a pair has no share there
    (layer 0, a vllm-probed lam = 0)."""
    nan = float("nan")
    stack = []
    for c in curves:
        rows = np.asarray(c.get("attn_layers", [])).tolist()
        if layer not in rows:
            return dict.fromkeys(SHARE_FIELDS, nan)
        stack.append(np.asarray(c["share_prompt_mean"][rows.index(layer), :common], np.float64))
    share = np.vstack(stack)
    fit = fit_alpha(np.arange(1, common + 1), share, t_min=t_min, seed=0)
    mean = share.mean(axis=0)
    start = float(mean[t_min - 1]) if common >= t_min else nan
    values = (fit.alpha, fit.ci_low, fit.ci_high, start, float(mean[-1]))
    return dict(zip(SHARE_FIELDS, values, strict=True))


SHARE_FIELDS = ("share_alpha", "share_alpha_low", "share_alpha_high", "share_start", "share_end")


class TheoryStage:
    """relay.csv (the solvable relay model) and bias.csv (alpha(lam) trained vs twin)."""

    name = "theory"
    reads = (Records, Curves)
    writes = (RelayRow, BiasRow)

    def run(self, ctx: RunContext) -> dict[str, object]:
        import pandas as pd

        out: dict[str, Any] = {}
        relay = relay_text(ctx.config)
        if relay is not None:
            out["relay.csv"] = relay
        if ctx.config.probe.enabled and ctx.config.theory.bias_lams:
            bar = ctx.progress.bar("theory: alpha under attention bias", 1)
            rows = bias_rows(
                ctx.cache, ctx.config, ctx.probe_models, ctx.records(), ctx.read(Curves, {})
            )
            out["bias.csv"] = result_frame(BiasRow, pd.DataFrame(rows, columns=BiasRow.columns()))
            bar.finish()
        return out
