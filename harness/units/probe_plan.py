"""`harness probe`'s plan: every input checked before the first token (docs/architecture.md,
"The flow of one run"; the probe's stages: `harness.stages.probe_cli`).

`probe_request` checks and combines the command's flags (`ProbeFlags`); `plan_probe` resolves
the models, checks each against the backend (vLLM's support, the
endpoint's preflight) and the layer indices against its depth, tokenises every pair, loads
every continuation file and checks prompt + continuation against the context. A bad input
fails here, in one line with exit code 2, and leaves no --out folder.
"""

from __future__ import annotations

import importlib.util
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from harness.analysis.probe_tables import probe_policy
from harness.config.endpoint import BaseUrl, ServedModel, endpoint_of
from harness.config.run import Precision
from harness.engines.device import PRECISIONS
from harness.errors import UserError
from harness.models import (
    ResolvedModel,
    is_untrained,
    parse_model_name,
    resolve_model,
    untrained_name,
)
from harness.probes.backend import EndpointBackend
from harness.probes.pairs import (
    PairSpec,
    file_continuation,
    load_pairs,
    pair_prompt_ids,
    read_text_arg,
)


class ProbeRequest(BaseModel):
    """What the command line asks for, its flags already combined (`commands.probe`)."""

    models: list[str] = Field(min_length=1)
    pairs: list[PairSpec] = Field(min_length=1)
    continuation: str  # "generate", a text file, or gens.jsonl[#row]
    tokens: int = Field(gt=0)
    layers: str | list[int] = "all"
    t_min: int = Field(16, gt=0)
    lams: list[float] | None = None  # None: plain model (policy `none`)
    chunk: int | None = Field(None, gt=0)  # None: one whole-sequence forward per pair
    generator: Literal["vllm", "hf"] = "vllm"  # engine of --continuation generate
    seed: int = 0
    n_boot: int = Field(1000, gt=0)
    backend: Literal["vllm", "hf", "openai"] = "hf"  # resolved: `auto` is the command's
    tensor_parallel_size: int = Field(1, gt=0)  # the vllm backend's engine
    pipeline_parallel_size: int = Field(1, gt=0)
    # the openai backend's endpoint (EndpointProbe's settings)
    base_url: BaseUrl = None
    served_model: ServedModel = None
    top_k: int = Field(20, gt=0)
    concurrency: int = Field(8, gt=0)
    dtype: Precision = "auto"  # the hf backend's (harness.engines.device)

    def endpoint(self) -> dict:
        return {**endpoint_of(self).options(), "top_k": self.top_k, "concurrency": self.concurrency}


class ProbeFlags(BaseModel):
    """The command line as given (`harness probe`'s options); `probe_request` combines them."""

    model: str
    prompt_a: str | None = None
    prompt_b: str | None = None
    system_a: str | None = None
    system_b: str | None = None
    user: str | None = None
    continuation: str
    generator: str = "auto"
    tokens: int
    layers: str = "all"
    t_min: int = 16
    pairs: Path | None = None
    compare: str | None = None
    attention_bias: str | None = None
    backend: str = "hf"
    base_url: str | None = None
    served_model: str | None = None
    top_k: int = 20
    concurrency: int = 8
    chunk: int = 0
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    seed: int = 0
    n_boot: int = 1000
    dtype: str = "auto"


def probe_request(flags: ProbeFlags) -> ProbeRequest:
    """The flags checked and combined: the numbers, the generator and backend (`auto`
    resolved), the pairs (--pairs, raw prompts or chat prompts), the models (--compare)."""
    f = flags
    if f.tokens <= 0 or f.t_min <= 0 or f.chunk < 0:
        raise UserError("--tokens and --t-min must be positive, --chunk 0 or positive")
    if f.tensor_parallel_size <= 0 or f.pipeline_parallel_size <= 0:
        raise UserError("--tensor-parallel-size and --pipeline-parallel-size must be positive")
    if f.tokens < f.t_min:
        raise UserError(f"--tokens {f.tokens} is shorter than --t-min {f.t_min}: nothing to fit")
    generator = f.generator
    if generator == "auto":
        generator = "vllm" if importlib.util.find_spec("vllm") else "hf"
    if generator not in ("hf", "vllm"):
        raise UserError(f"--generator must be 'vllm', 'hf' or 'auto', got '{generator}'")
    if f.backend not in ("hf", "vllm", "openai", "auto"):
        raise UserError(f"--backend must be 'vllm', 'hf', 'openai' or 'auto', got '{f.backend}'")
    if f.top_k <= 0 or f.concurrency <= 0:
        raise UserError("--top-k and --concurrency must be positive")
    if f.dtype not in PRECISIONS:
        raise UserError(f"--dtype must be one of {', '.join(PRECISIONS)}, got '{f.dtype}'")
    if f.backend != "openai" and (f.base_url or f.served_model):
        raise UserError("--base-url and --served-model need --backend openai")
    specs = _pair_specs(f)
    models = _models(f)
    lams = _parse_lams(f.attention_bias)
    backend = _auto_backend(models, lams is not None) if f.backend == "auto" else f.backend
    if f.dtype != "auto" and backend != "hf":
        raise UserError(f"--dtype {f.dtype} needs --backend hf (the engines keep their own dtype)")
    return ProbeRequest(
        models=models, pairs=specs, continuation=f.continuation, tokens=f.tokens,
        layers=f.layers, t_min=f.t_min, lams=lams, chunk=f.chunk or None, seed=f.seed,
        n_boot=f.n_boot, backend=backend, generator=generator,
        tensor_parallel_size=f.tensor_parallel_size,
        pipeline_parallel_size=f.pipeline_parallel_size, base_url=f.base_url,
        served_model=f.served_model, top_k=f.top_k, concurrency=f.concurrency, dtype=f.dtype,
    )  # fmt: skip


def _pair_specs(f: ProbeFlags) -> list[PairSpec]:
    """--pairs FILE, or --prompt-a/--prompt-b, or --system-a/--system-b/--user: one of them."""
    raw = f.prompt_a is not None or f.prompt_b is not None
    chat = any(v is not None for v in (f.system_a, f.system_b, f.user))
    if f.pairs is not None and (raw or chat):
        raise UserError("give either --pairs FILE or prompts on the command line, not both")
    if f.pairs is not None:
        return load_pairs(f.pairs)
    if raw and not chat:
        if f.prompt_a is None or f.prompt_b is None:
            raise UserError("--prompt-a and --prompt-b must both be given")
        a, b = read_text_arg(f.prompt_a), read_text_arg(f.prompt_b)
        return [PairSpec(name="cli", prompt_a=a, prompt_b=b)]
    if chat and not raw:
        if f.system_a is None or f.system_b is None or f.user is None:
            raise UserError("--system-a, --system-b and --user must all be given")
        texts = [read_text_arg(v) for v in (f.system_a, f.system_b, f.user)]
        return [PairSpec(name="cli", system_a=texts[0], system_b=texts[1], user=texts[2])]
    raise UserError("give --prompt-a/--prompt-b, or --system-a/--system-b/--user, or --pairs FILE")


def _models(f: ProbeFlags) -> list[str]:
    """--model, and its untrained twin with --compare untrained; every name parsed."""
    models = [f.model]
    if f.compare is not None:
        if f.compare != "untrained":
            raise UserError(f"--compare supports only 'untrained', got '{f.compare}'")
        if is_untrained(f.model):
            raise UserError("--compare untrained needs a trained --model")
        if f.backend == "openai":
            raise UserError("--compare untrained: the untrained twin is served nowhere")
        models.append(untrained_name(f.model))
    for name in models:
        parse_model_name(name)
    return models


def _auto_backend(models: list[str], bias: bool) -> str:
    """vllm when it can probe every model (and no attention bias is asked for), else hf."""
    if bias:
        return "hf"
    from harness.probes.vllm_backend import vllm_support  # lazy: loads torch

    return "hf" if any(vllm_support(resolve_model(m).path) for m in models) else "vllm"


def _parse_lams(value: str | None) -> list[float] | None:
    if value is None:
        return None
    try:
        lams = [float(part) for part in value.split(",") if part.strip()]
    except ValueError:
        raise UserError(
            f"--attention-bias must be comma-separated numbers, got '{value}'"
        ) from None
    if not lams or not all(math.isfinite(lam) and lam >= 0 for lam in lams):
        # each lam is an attention-bias policy, whose strength is >= 0 (config.policy_specs)
        raise UserError(f"--attention-bias needs finite numbers >= 0, got '{value}'")
    lams = sorted(set(lams))
    labels = [probe_policy(lam) for lam in lams]
    if len(set(labels)) < len(labels):  # the files name a lam by its policy label alone
        raise UserError(f"--attention-bias: two values label as one policy ({', '.join(labels)})")
    return lams


@dataclass
class ProbePlan:
    """A validated probe: the request, its models resolved, each pair's prompt ids (the first
    model's tokenizer, shared by the twin) and the continuations read from files."""

    request: ProbeRequest
    models: list[ResolvedModel]
    out_dir: Path
    ids: dict[str, tuple[list[int], list[int]]]  # pair -> (prompt A ids, prompt B ids)
    given: dict[str, list[int]]  # pair -> continuation from a file (the rest: generated)
    notes: list[str] = field(default_factory=list)
    fresh: bool = False


def plan_probe(request: ProbeRequest, out: Path, fresh: bool = False) -> ProbePlan:
    """Every check before the first token; raises `UserError` with nothing written."""
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} exists and is not a folder")
    if request.backend != "hf" and request.lams is not None:
        raise UserError("--attention-bias needs --backend hf (the bias is a transformers hook)")
    if (
        request.backend != "hf"
        and request.continuation == "generate"
        and (request.generator == "hf")
    ):
        raise UserError(
            f"--backend {request.backend} loads no transformers model: use --generator vllm"
        )
    models = [resolve_model(name) for name in request.models]
    tokenizer = None
    for model in models:
        # an unsupported architecture or a bad layer index fails before any pair
        facts = _model_facts(model.path, request.backend == "vllm")
        tokenizer = tokenizer or facts
        _check_layers(request.layers, model.path)
        if request.backend == "openai":  # the endpoint's preflight, before any continuation
            endpoint = EndpointBackend(model.path, request.endpoint())
            try:
                endpoint.probe()
            finally:
                endpoint.close()
    notes: list[str] = []
    ids, given = _pairs(tokenizer, request, models[0], notes)
    return ProbePlan(request, models, out, ids, given, notes, fresh)


def _model_facts(path: Path, vllm: bool) -> Any:
    """The tokenizer, without loading weights; on vllm, fails when it cannot probe."""
    from transformers import AutoTokenizer  # lazy: loads transformers

    from harness.probes.vllm_backend import vllm_support  # lazy: loads torch

    if vllm:
        why = vllm_support(path)
        if why:
            raise UserError(f"--backend vllm cannot probe {path.name}: {why}")
    return AutoTokenizer.from_pretrained(path)


def _check_layers(layers: str | list[int], path: Path) -> None:
    from harness.probes.hooks import resolve_layers  # lazy: loads torch
    from harness.probes.vllm_backend import model_depth  # lazy: loads torch

    resolve_layers(layers, model_depth(path) + 1)


def _context(path: Path) -> int | None:
    from transformers import AutoConfig  # lazy: loads transformers

    return getattr(AutoConfig.from_pretrained(path), "max_position_embeddings", None)


def fit_continuation(ids: list[int], request: ProbeRequest, where: str, notes: list[str]) -> list:
    """`ids` cut to --tokens; fewer than t_min is an error, fewer than --tokens a note."""
    if len(ids) < request.t_min:
        raise UserError(
            f"{where}: continuation has {len(ids)} tokens, fewer than t_min = {request.t_min}"
        )
    if len(ids) < request.tokens:
        notes.append(
            f"{where}: continuation has only {len(ids)} tokens (< --tokens {request.tokens})"
        )
    return ids[: request.tokens]


def _pairs(
    tokenizer: Any, request: ProbeRequest, model: ResolvedModel, notes: list[str]
) -> tuple[dict[str, tuple[list[int], list[int]]], dict[str, list[int]]]:
    """Token ids of every pair and the continuations read from files, each checked against
    the model's context (a generated continuation counts as --tokens long)."""
    ids = {spec.name: pair_prompt_ids(tokenizer, spec) for spec in request.pairs}
    context = _context(model.path)
    for name, (a, b) in ids.items():
        if context is not None and max(len(a), len(b)) + request.t_min > context:
            raise UserError(
                f"pair '{name}': prompt of {max(len(a), len(b))} tokens + t_min exceeds the "
                f"model's context of {context}"
            )
    loaded: dict[str, list[int]] = {}
    given: dict[str, list[int]] = {}
    for spec in request.pairs:
        source = spec.continuation or request.continuation
        if source != "generate":
            if source not in loaded:
                ids_c = file_continuation(tokenizer, source)
                loaded[source] = fit_continuation(ids_c, request, source, notes)
            given[spec.name] = loaded[source]
    for name, (a, b) in ids.items():
        total = max(len(a), len(b)) + len(given.get(name, [0] * request.tokens))
        if context is not None and total > context:
            raise UserError(
                f"pair '{name}': prompt + continuation = {total} tokens exceeds the model's "
                f"context of {context}"
            )
    return ids, given
