"""Paired-prompt probes: hidden-state divergence, next-token gaps, attention bias.

- `divergence.pair_divergence(model, ids_a, ids_b, continuation)`: l2 / rel_l2 / cos_dist per
  hidden-state index and position, delta_logp and KL per position (hooks, chunked KV cache);
- `attention_bias.attention_bias(model, prompt_len, lam, layers=None)`: context manager adding
  lam * log((P+t)/P) to the prompt keys' logits (works with generate());
- `pairs`: prompt pairs (raw text or chat, `:none` / `:default` system) and continuations
  (text file, generation record, or `generate`);
- `experiment.run_probe(ProbeRequest)`: models x lam x pairs -> tables and alpha fits;
- `vllm_backend.VllmProbe`: the same curves from a vLLM engine (`extract_hidden_states` and
  the harness's connector `vllm_connector`), `--backend vllm` / `probe.backend: vllm`.

Names are re-exported lazily so `import harness.probes` does not import torch.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "pair_divergence": "harness.probes.divergence",
    "PairDivergence": "harness.probes.divergence",
    "attention_bias": "harness.engines.attention_bias",
    "PairSpec": "harness.probes.pairs",
    "load_pairs": "harness.probes.pairs",
    "ProbeRequest": "harness.probes.experiment",
    "run_probe": "harness.probes.experiment",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'harness.probes' has no attribute '{name}'")
    return getattr(import_module(_EXPORTS[name]), name)
