"""`harness probe`: paired-prompt divergence per layer and position, with alpha fits.

Writes divergence.csv, nexttoken.csv, attention.csv (hf backend: the prompt's attention share)
and fits.csv into --out and prints alpha by layer.
"""

from __future__ import annotations

from pathlib import Path

import typer

from harness.errors import UserError

TABLE_METRIC = "l2"
# the files as the closing line names them
FILE_ORDER = ("divergence.csv", "attention.csv", "nexttoken.csv", "fits.csv")


def probe_command(
    model: str = typer.Option(..., "--model", help="Model name, e.g. smollm2-135m-instruct."),
    prompt_a: str = typer.Option(None, "--prompt-a", help="Raw prompt A: TEXT or @file."),
    prompt_b: str = typer.Option(None, "--prompt-b", help="Raw prompt B: TEXT or @file."),
    system_a: str = typer.Option(
        None,
        "--system-a",
        help="System prompt A: TEXT, @file, :none (no system turn) or "
        ":default (the chat template's default system prompt).",
    ),  # fmt: skip
    system_b: str = typer.Option(None, "--system-b", help="System prompt B (as --system-a)."),
    user: str = typer.Option(None, "--user", help="User message shared by both chat prompts."),
    continuation: str = typer.Option(
        ...,
        "--continuation",
        help="@text-file (tokenised alone, no special tokens), gens.jsonl or gens.jsonl#ROW "
        "(continuation_ids of a generation record, used as stored) or 'generate': the first "
        "--model samples --tokens tokens from prompt A (temperature 0.7, top_p 0.95, --seed, "
        "EOS suppressed until T) on --generator; --compare reuses those ids.",
    ),  # fmt: skip
    generator: str = typer.Option(
        "auto",
        "--generator",
        help="Engine of --continuation generate: vllm (all pairs in one batch), hf "
        "(transformers, one pair at a time), or auto (vllm when installed).",
    ),
    tokens: int = typer.Option(..., "--tokens", help="Continuation length T."),
    layers: str = typer.Option("all", "--layers", help="'all' or hidden-state indices 0..L."),
    t_min: int = typer.Option(16, "--t-min", help="First position of the alpha fit."),
    pairs: Path = typer.Option(None, "--pairs", help="YAML file listing several pairs."),
    out: Path = typer.Option(
        None,
        "--out",
        help="Output folder (default reports/probe-<time>); re-run with the same --out to resume.",
    ),
    compare: str = typer.Option(
        None, "--compare", help="'untrained': also probe untrained:<model> on the same inputs."
    ),
    attention_bias: str = typer.Option(
        None, "--attention-bias", help="Comma-separated lam values to sweep (adds a lam column)."
    ),
    backend: str = typer.Option(
        "hf",
        "--backend",
        help="hf (transformers), vllm (the serving engine's extract_hidden_states: same "
        "layers and metrics), openai (a served model's prompt log-probs at --base-url: "
        "next-token influence only, tokenizer from --model) or auto (vllm where it can probe "
        "the model, else hf).",
    ),
    base_url: str = typer.Option(
        None, "--base-url", help="--backend openai: the endpoint (default $OPENAI_BASE_URL)."
    ),
    served_model: str = typer.Option(
        None, "--served-model", help="--backend openai: the served model (default: its only one)."
    ),
    top_k: int = typer.Option(
        20, "--top-k", help="--backend openai: log-probs per token (<= the server's max_logprobs)."
    ),
    concurrency: int = typer.Option(
        8, "--concurrency", help="--backend openai: requests in flight at once."
    ),
    chunk: int = typer.Option(
        0,
        "--chunk",
        help="Continuation tokens per forward over a KV cache; 0 = one whole-sequence forward "
        "(fastest; activations of one layer at a time).",
    ),
    tensor_parallel_size: int = typer.Option(
        1, "--tensor-parallel-size", help="--backend vllm: GPUs per layer (as in a run config)."
    ),
    pipeline_parallel_size: int = typer.Option(
        1, "--pipeline-parallel-size", help="--backend vllm: pipeline stages of layers."
    ),
    seed: int = typer.Option(0, "--seed", help="Seed of --continuation generate."),
    n_boot: int = typer.Option(1000, "--n-boot", help="Bootstrap resamples of each alpha CI."),
    fresh: bool = typer.Option(
        False, "--fresh", help="Recompute every unit instead of resuming from --out's cache."
    ),
) -> None:
    """Hidden-state divergence between two prompts that share one continuation, per layer."""
    from harness.models import is_untrained, parse_model_name, untrained_name  # lazy: CLI start-up
    from harness.probe_plan import ProbeRequest  # lazy: loads transformers
    from harness.probes.pairs import PairSpec, load_pairs, read_text_arg  # lazy: CLI start-up

    if tokens <= 0 or t_min <= 0 or chunk < 0:
        raise UserError("--tokens and --t-min must be positive, --chunk 0 or positive")
    if tensor_parallel_size <= 0 or pipeline_parallel_size <= 0:
        raise UserError("--tensor-parallel-size and --pipeline-parallel-size must be positive")
    if tokens < t_min:
        raise UserError(f"--tokens {tokens} is shorter than --t-min {t_min}: nothing to fit")
    if generator == "auto":
        import importlib.util

        generator = "vllm" if importlib.util.find_spec("vllm") else "hf"
    if generator not in ("hf", "vllm"):
        raise UserError(f"--generator must be 'vllm', 'hf' or 'auto', got '{generator}'")
    if backend not in ("hf", "vllm", "openai", "auto"):
        raise UserError(f"--backend must be 'vllm', 'hf', 'openai' or 'auto', got '{backend}'")
    if top_k <= 0 or concurrency <= 0:
        raise UserError("--top-k and --concurrency must be positive")
    if backend != "openai" and (base_url or served_model):
        raise UserError("--base-url and --served-model need --backend openai")
    raw = prompt_a is not None or prompt_b is not None
    chat = any(v is not None for v in (system_a, system_b, user))
    if pairs is not None and (raw or chat):
        raise UserError("give either --pairs FILE or prompts on the command line, not both")
    if pairs is not None:
        specs = load_pairs(pairs)
    elif raw and not chat:
        if prompt_a is None or prompt_b is None:
            raise UserError("--prompt-a and --prompt-b must both be given")
        specs = [
            PairSpec(name="cli", prompt_a=read_text_arg(prompt_a), prompt_b=read_text_arg(prompt_b))
        ]
    elif chat and not raw:
        if system_a is None or system_b is None or user is None:
            raise UserError("--system-a, --system-b and --user must all be given")
        texts = [read_text_arg(v) for v in (system_a, system_b, user)]
        specs = [PairSpec(name="cli", system_a=texts[0], system_b=texts[1], user=texts[2])]
    else:
        raise UserError(
            "give --prompt-a/--prompt-b, or --system-a/--system-b/--user, or --pairs FILE"
        )
    models = [model]
    if compare is not None:
        if compare != "untrained":
            raise UserError(f"--compare supports only 'untrained', got '{compare}'")
        if is_untrained(model):
            raise UserError("--compare untrained needs a trained --model")
        if backend == "openai":
            raise UserError("--compare untrained: the untrained twin is served nowhere")
        models.append(untrained_name(model))
    for name in models:
        parse_model_name(name)
    if backend == "auto":
        backend = _auto_backend(models, attention_bias is not None)
    request = ProbeRequest(
        models=models, pairs=specs, continuation=continuation, tokens=tokens,
        layers=layers, t_min=t_min, lams=_parse_lams(attention_bias), chunk=chunk or None,
        seed=seed, n_boot=n_boot, backend=backend, generator=generator,
        tensor_parallel_size=tensor_parallel_size, pipeline_parallel_size=pipeline_parallel_size,
        base_url=base_url, served_model=served_model, top_k=top_k, concurrency=concurrency,
    )  # fmt: skip
    _run(request, out, fresh)


def _auto_backend(models: list[str], bias: bool) -> str:
    """vllm when it can probe every model (and no attention bias is asked for), else hf."""
    if bias:
        return "hf"
    from harness.models import resolve_model  # lazy: CLI start-up
    from harness.probes.vllm_backend import vllm_support  # lazy: loads torch

    return "hf" if any(vllm_support(resolve_model(m).path) for m in models) else "vllm"


def _parse_lams(value: str | None) -> list[float] | None:
    import math

    if value is None:
        return None
    try:
        lams = [float(part) for part in value.split(",") if part.strip()]
    except ValueError:
        raise UserError(
            f"--attention-bias must be comma-separated numbers, got '{value}'"
        ) from None
    if not lams or not all(math.isfinite(lam) for lam in lams):
        raise UserError(f"--attention-bias needs finite numbers, got '{value}'")
    return sorted(set(lams))


def _run(request, out: Path | None, fresh: bool = False) -> None:
    import time

    from rich.console import Console

    from harness.pipeline import run_probe  # lazy: CLI start-up
    from harness.probe_plan import plan_probe  # lazy: loads transformers

    err = Console(stderr=True)
    folder = out or Path("reports") / time.strftime("probe-%Y%m%d-%H%M%S")
    with err.status("probing ...") as status:

        def say(msg: str) -> None:
            status.update(f"probing {msg} ...")
            if not err.is_terminal:  # a log file gets one line per pair instead of a spinner
                err.print(f"{time.strftime('%H:%M:%S')} probing {msg}")

        # every check before the first token; then the stages, resuming from <out>/cache
        ctx = run_probe(plan_probe(request, folder, fresh), say)
    for note in ctx.notes:
        err.print(f"[yellow]note:[/yellow] {note}")
    Console(width=160).print(alpha_table(ctx.outputs["fits.csv"]))
    csvs = [name for name in FILE_ORDER if name in ctx.outputs]
    err.print(f"wrote {folder}/{', '.join(csvs)}, continuations.jsonl")


def alpha_table(fits):
    """Rich table: alpha (metric l2; pooled over pairs when there are several) by layer."""
    from rich.table import Table

    pooled = fits[fits["pair"] == "all"]
    rows = pooled if len(pooled) else fits
    title = (
        f"alpha of {TABLE_METRIC} by layer ({'pooled over pairs' if len(pooled) else 'one pair'})"
    )
    table = Table(title=title)
    keys = ["model", "lam"] if "lam" in rows.columns else ["model"]
    columns = rows[keys].drop_duplicates().itertuples(index=False)
    columns = [tuple(c) for c in columns]
    table.add_column("layer", justify="right")
    for col in columns:
        table.add_column(
            " ".join(f"{k}={v}" if k == "lam" else str(v) for k, v in zip(keys, col, strict=True)),
            justify="right",
        )
    pick = rows[
        (rows["metric"] == TABLE_METRIC)
        | (rows["layer"] == -1) & (rows["metric"] == "abs_delta_logp")
    ]
    for layer in sorted(pick["layer"].unique(), key=lambda v: (v < 0, v)):
        cells = []
        for col in columns:
            sel = pick[(pick["layer"] == layer)]
            for k, v in zip(keys, col, strict=True):
                sel = sel[sel[k] == v]
            alpha = float(sel["alpha"].iloc[0]) if len(sel) else float("nan")
            cells.append("nan" if alpha != alpha else f"{alpha:.3f}")
        table.add_row("|dlogp|" if layer == -1 else str(layer), *cells)
    return table
