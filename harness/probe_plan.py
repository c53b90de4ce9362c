"""`harness probe`'s plan: every input checked before the first token (docs/architecture.md,
"The flow of one run"; the probe's stages: `harness.stages.probe_cli`).

`plan_probe` resolves the models, checks each against the backend (vLLM's support, the
endpoint's preflight) and the layer indices against its depth, tokenises every pair, loads
every continuation file and checks prompt + continuation against the context. A bad input
fails here, in one line with exit code 2, and leaves no --out folder.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from harness.endpoint import BaseUrl, ServedModel, endpoint_of
from harness.errors import UserError
from harness.models import ResolvedModel, resolve_model
from harness.probes.backend import EndpointBackend
from harness.probes.pairs import PairSpec, file_continuation, pair_prompt_ids


class ProbeRequest(BaseModel):
    """What the command line asks for, its flags already combined (`commands.probe`)."""

    models: list[str] = Field(min_length=1)
    pairs: list[PairSpec] = Field(min_length=1)
    continuation: str  # "generate", a text file, or gens.jsonl[#row]
    tokens: int = Field(gt=0)
    layers: str | list[int] = "all"
    t_min: int = Field(16, gt=0)
    lams: list[float] | None = None  # None: plain model, no lam column
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

    def endpoint(self) -> dict:
        return {**endpoint_of(self).options(), "top_k": self.top_k, "concurrency": self.concurrency}


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
    from harness.probes.divergence import resolve_layers  # lazy: loads torch
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
