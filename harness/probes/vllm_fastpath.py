"""Fast path for big models on vLLM (`--engine vllm`): only what vLLM exposes cheaply.

- last hidden state (l = L, after the final norm) per token through the pooling runner
  (`runner="pooling"`, `PoolerConfig(task="token_embed", use_activation=False)`, `LLM.encode`);
- delta_logp from `prompt_logprobs` of a generation engine (log p of each given token).
Per-layer states, KL (needs the full next-token distribution) and attention bias need the
transformers path; here the result has the single layer L and kl = NaN.

vLLM is imported lazily: `import harness.probes` never pulls it in. Engines are kept per model
for the life of the process (starting one costs ~40 s on CPU).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from harness.probes.divergence import PairDivergence, check_inputs

_STARTED: dict[str, tuple[Any, Any, int]] = {}


def _engines(name: str) -> tuple[Any, Any, int]:
    """(pooling engine, generation engine, L) for a model name, started once per process
    (again only after `vllm_engine.shutdown_all` stopped them)."""
    from vllm.config import PoolerConfig

    from harness.engines.vllm_engine import is_running, start_llm
    from harness.models import resolve_model

    started = _STARTED.get(name)
    if started is not None and all(is_running(llm) for llm in started[:2]):
        return started
    path = str(resolve_model(name).path)
    n_layers = json.loads((resolve_model(name).path / "config.json").read_text())[
        "num_hidden_layers"
    ]
    common = dict(model=path, dtype="float32", enforce_eager=True, gpu_memory_utilization=0.4)
    pooling = start_llm(
        runner="pooling",
        pooler_config=PoolerConfig(task="token_embed", use_activation=False),
        **common,
    )
    generating = start_llm(**common)
    _STARTED[name] = (pooling, generating, n_layers)
    return _STARTED[name]


def _last_states(engine: Any, sequences: list[list[int]]) -> list[np.ndarray]:
    """Post-norm last-layer states (n_tokens, d) of each sequence."""
    from vllm.inputs import TokensPrompt

    outs = engine.encode(
        [TokensPrompt(prompt_token_ids=ids) for ids in sequences],
        pooling_task="token_embed",
        use_tqdm=False,
    )
    return [out.outputs.data.float().cpu().numpy().astype(np.float64) for out in outs]


def _token_logprobs(engine: Any, sequences: list[list[int]]) -> list[np.ndarray]:
    """log p(token_i | tokens before i) for i >= 1 of each sequence: (n_tokens - 1,)."""
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    params = SamplingParams(max_tokens=1, prompt_logprobs=0, temperature=0.0)
    outs = engine.generate(
        [TokensPrompt(prompt_token_ids=ids) for ids in sequences], params, use_tqdm=False
    )
    result = []
    for ids, out in zip(sequences, outs, strict=True):
        lp = out.prompt_logprobs  # position 0 is None: nothing predicts the first token
        result.append(np.array([lp[i][ids[i]].logprob for i in range(1, len(ids))]))
    return result


def vllm_pair_divergence(
    name: str, ids_a: list[int], ids_b: list[int], continuation: list[int]
) -> PairDivergence:
    """The probe's last-layer curves and delta_logp for one pair, computed by vLLM."""
    pooling, generating, n_layers = _engines(name)
    context = pooling.model_config.max_model_len
    check_inputs(ids_a, ids_b, continuation, context)
    total = len(continuation)
    seqs = [list(ids_a) + list(continuation), list(ids_b) + list(continuation)]
    ha, hb = (h[-total:] for h in _last_states(pooling, seqs))  # (T, d) each
    na, nb = np.linalg.norm(ha, axis=-1), np.linalg.norm(hb, axis=-1)
    l2 = np.linalg.norm(ha - hb, axis=-1)
    tiny = np.finfo(np.float64).tiny
    unit_gap = ha / np.maximum(na, tiny)[:, None] - hb / np.maximum(nb, tiny)[:, None]
    # prompt_logprobs index i (of the sequence minus its first token) predicts token i + 1, so
    # the last `total` entries are the continuation's tokens c_1..c_T
    lpa, lpb = (lp[-total:] for lp in _token_logprobs(generating, seqs))
    return PairDivergence(
        layers=[n_layers],
        l2=l2[None],
        rel_l2=(l2 / np.maximum((na + nb) / 2, tiny))[None],
        cos_dist=((unit_gap**2).sum(-1) / 2)[None],
        delta_logp=lpa - lpb,
        kl=np.full(total, np.nan),
        prompt_lens=(len(ids_a), len(ids_b)),
        identical_prompts=list(ids_a) == list(ids_b),
    )
