"""Prototype, not an engine feature: classifier-free guidance on vLLM 0.32 through a v1
batch-level logits processor that pairs a cond request with its uncond request (docs/remedies.md,
"Guidance on vLLM"). Greedy only: the uncond row is forced to the guided argmax so both rows
share the token. It guides only while both rows of a pair are in the step at the same
position, and counts the steps where they are not.

    VLLM_CPU_KVCACHE_SPACE=1 PYTHONPATH=$PWD .venv/bin/python bench/vllm_guidance.py
        [--tokens 16] [--gamma 3] [--rounds 15]

Checks the guided tokens against the hf engine's guidance (harness/engines/guidance.py,
greedy) and the guided scores against a direct transformers computation, then times guided
vLLM against plain vLLM (same cond prompts, interleaved rounds: bench/remedies_speed.py).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch
from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor, MoveDirectionality

ROOT = Path(__file__).resolve().parents[1]
STATS = {"guided": 0, "incomplete": 0}  # pair-steps (engine in this process)


class GuidancePairs(LogitsProcessor):
    """Rows whose SamplingParams.extra_args name {"cfg_pair", "cfg_role", "gamma"}."""

    def __init__(self, vllm_config, device, is_pin_memory) -> None:
        self.rows: dict[int, tuple[str, str, float, list[int]]] = {}

    def is_argmax_invariant(self) -> bool:
        return False

    def update_state(self, batch_update: BatchUpdate | None) -> None:
        if batch_update is None:
            return
        for index in batch_update.removed:
            self.rows.pop(index, None)
        for index, params, _prompt, output in batch_update.added:
            extra = (params.extra_args or {}) if params is not None else {}
            if "cfg_pair" in extra:
                role = (extra["cfg_pair"], extra["cfg_role"], float(extra["gamma"]), output)
                self.rows[index] = role
            else:
                self.rows.pop(index, None)
        for a, b, kind in batch_update.moved:
            row_a, row_b = self.rows.pop(a, None), self.rows.pop(b, None)
            if row_a is not None:
                self.rows[b] = row_a
            if kind == MoveDirectionality.SWAP and row_b is not None:
                self.rows[a] = row_b

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        pairs: dict[str, dict[str, tuple[int, float, list[int]]]] = {}
        for index, (pair, role, gamma, output) in self.rows.items():
            pairs.setdefault(pair, {})[role] = (index, gamma, output)
        for roles in pairs.values():
            cond, uncond = roles.get("cond"), roles.get("uncond")
            if cond is None or uncond is None or len(cond[2]) != len(uncond[2]):
                STATS["incomplete"] += 1
                continue
            logp = torch.log_softmax(logits[[cond[0], uncond[0]]].float(), dim=-1)
            guided = logp[1] + cond[1] * (logp[0] - logp[1])
            # a token another processor masked (-inf in both rows) stays masked, not NaN
            guided = guided.masked_fill(logp.isneginf().any(0), -torch.inf)
            logits[cond[0]] = guided
            forced = torch.full_like(guided, -torch.inf)
            forced[guided.argmax()] = 0.0
            logits[uncond[0]] = forced
            STATS["guided"] += 1
        return logits


def prompts(n: int):
    """(cond, uncond) prompt ids of the first n of bench/remedies.py's items."""
    sys.path.insert(0, str(ROOT / "bench"))
    import remedies
    from transformers import AutoTokenizer

    from harness.models import resolve_model
    from harness.text.chat import ChatFormat

    path = resolve_model(remedies.MODEL).path
    chat = ChatFormat(AutoTokenizer.from_pretrained(path))
    _, chosen = remedies.items()
    pairs = [
        (chat.prompt_ids(i.system, i.user), chat.prompt_ids(None, i.user)) for _, i in chosen[:n]
    ]
    return path, pairs


def vllm_guided(llm, pairs, gamma: float, tokens: int, logprobs: int = 0):
    """Guided greedy replies ([ids], [per-step {token: processed logit}]) of each pair."""
    from vllm.inputs import TokensPrompt

    requests, params = [], []
    for n, (cond, uncond) in enumerate(pairs):
        for role, ids in (("cond", cond), ("uncond", uncond)):
            extra = {"cfg_pair": str(n), "cfg_role": role, "gamma": gamma}
            requests.append(TokensPrompt(prompt_token_ids=ids))
            params.append(_greedy(tokens, logprobs, extra))
    outs = llm.generate(requests, params, use_tqdm=False)
    conds = outs[0::2]
    ids = [list(o.outputs[0].token_ids) for o in conds]
    steps = [
        [{t: lp.logprob for t, lp in step.items()} for step in (o.outputs[0].logprobs or [])]
        for o in conds
    ]
    return ids, steps


def vllm_plain(llm, pairs, tokens: int) -> int:
    from vllm.inputs import TokensPrompt

    requests = [TokensPrompt(prompt_token_ids=cond) for cond, _ in pairs]
    outs = llm.generate(requests, [_greedy(tokens, 0, None)] * len(pairs), use_tqdm=False)
    return sum(len(o.outputs[0].token_ids) for o in outs)


def _greedy(tokens: int, logprobs: int, extra):
    # every reply `tokens` long, EOS kept drawable (min_tokens would mask it before the
    # processor, and the hf engine's guidance without an EOS id does not)
    from vllm import SamplingParams

    return SamplingParams(
        temperature=0.0, max_tokens=tokens, ignore_eos=True,
        logprobs=logprobs or None, extra_args=extra,
    )  # fmt: skip


def reference(path: Path, pairs, gamma: float, tokens: int):
    """The hf engine's guided greedy tokens, and the guided scores a direct transformers
    forward gives at each step along them."""
    from transformers import AutoModelForCausalLM

    from harness.engines import SamplingSettings
    from harness.engines.guidance import guided_generate, guided_scores

    model = AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch.float32).eval()
    settings = SamplingSettings(temperature=0.0, max_tokens=tokens)
    conds, unconds = [c for c, _ in pairs], [u for _, u in pairs]
    ids = guided_generate(model, conds, unconds, gamma, settings, 0, None)
    scores = []
    with torch.inference_mode():
        for (cond, uncond), reply in zip(pairs, ids, strict=True):
            rows = []
            for t in range(len(reply)):
                logits = torch.cat(
                    [model(torch.tensor([seq + reply[:t]])).logits[:, -1] for seq in (cond, uncond)]
                )
                rows.append(guided_scores(logits, gamma)[0])
            scores.append(rows)
    return ids, scores


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=16)
    parser.add_argument("--gamma", type=float, default=3.0)
    parser.add_argument("--items", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args(argv)
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # the processor's counters in-process
    sys.path.insert(0, str(ROOT / "bench"))
    from _limit import cpu_description
    from remedies_speed import speed_rounds, speed_table

    from harness.engines.vllm_engine import llm_options, shutdown_all, start_llm

    path, pairs = prompts(args.items)
    print(cpu_description(), flush=True)
    options = llm_options(path, max_model_len=1024)
    llm = start_llm(**options, logits_processors=[GuidancePairs], logprobs_mode="processed_logits")
    try:
        got, got_scores = vllm_guided(llm, pairs, args.gamma, args.tokens, logprobs=5)
        want, want_scores = reference(path, pairs, args.gamma, args.tokens)
        print(f"pair-steps guided {STATS['guided']}, incomplete {STATS['incomplete']}")
        print(f"tokens equal to the hf engine's guidance: {got == want}")
        worst = 0.0
        for steps, rows in zip(got_scores, want_scores, strict=False):
            for step, row in zip(steps, rows, strict=False):
                for token, value in step.items():
                    worst = max(worst, abs(value - float(row[token])))
        print(f"guided scores, top-5 per step: max |vLLM - transformers| = {worst:.2e}")

        def run_one(label: str) -> int:
            if label == "plain":
                return vllm_plain(llm, pairs, args.tokens)
            return sum(map(len, vllm_guided(llm, pairs, args.gamma, args.tokens)[0]))

        label = f"vllm guidance-{args.gamma:g}"
        ratios = speed_rounds(run_one, [label], args.rounds, baseline="plain")
        print(speed_table(ratios).replace("to none", "to plain vLLM"))
    finally:
        shutdown_all()


if __name__ == "__main__":
    main(sys.argv[1:])
