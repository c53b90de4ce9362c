"""The names of the attention arrays a pair's curves carry (the hf probe measures them,
`harness.probes.attention`; `harness.analysis.attention` turns them into rows and curves).
Light on purpose: the analysis reads these names without loading the probe's torch code."""

from __future__ import annotations

SHARE_METRICS = ("share_prompt_mean", "share_prompt_max_head", "share_sink_mean",
                 "share_sink_max_head")  # fmt: skip
# `attn_layers`: hidden-state indices l >= 1 (the output of decoder layer l - 1), then one
# (n_layers, T) array per metric
ATTENTION_KEYS = ("attn_layers", *SHARE_METRICS)
