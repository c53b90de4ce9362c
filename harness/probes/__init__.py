"""Paired-prompt probes: hidden-state divergence and next-token gaps.

- `divergence.pair_divergence(model, ids_a, ids_b, continuation)`: l2 / rel_l2 / cos_dist per
  hidden-state index and position, delta_logp and KL per position (hooks, chunked KV cache);
- `checkpoint`: the probe's model (float32 transformers) and its final norm and output head;
- `pairs`: prompt pairs (raw text or chat, `:none` / `:default` system) and continuations
  (text file, generation record, or `generate`);
- `backend`: the hf, vllm and openai backends behind one `curves` call;
- `arrays`: the names of the attention arrays a pair's curves carry (light: the analysis
  reads them);
- `vllm_backend.VllmProbe`: the same curves from a vLLM engine (`extract_hidden_states` and
  the harness's connector `vllm_connector`), `--backend vllm` / `probe.backend: vllm`.
The attention bias the probe can apply lives in `harness.engines.attention_bias`.

Import the module you need: the package itself imports nothing (its modules import torch, and
vLLM's worker processes import `vllm_connector` alone). `harness probe`'s plan and stages
live above (`harness.units.probe_plan`, `harness.stages.probe_cli`): this package measures.
"""
