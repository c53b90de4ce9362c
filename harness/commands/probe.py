"""`harness probe`: paired-prompt divergence per layer and position, with alpha fits.

Writes a run's own divergence.csv, nexttoken.csv, attention.csv (hf backend: the prompt's
attention share) and fits.csv into --out (every t; each pair a record of item = its name) and
prints alpha by layer.
"""

from __future__ import annotations

from pathlib import Path

import typer

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
        None,
        "--attention-bias",
        help="Comma-separated lam values to sweep (each a policy attention_bias-<lam>).",
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
    dtype: str = typer.Option(
        "auto",
        "--dtype",
        help="--backend hf: auto (float32 on CPU and where it fits the GPUs), float32, bfloat16 "
        "or float16; below float32 the probe measures its rounding floor per layer and leaves "
        "positions under it out of the fits.",
    ),
    seed: int = typer.Option(0, "--seed", help="Seed of --continuation generate."),
    n_boot: int = typer.Option(1000, "--n-boot", help="Bootstrap resamples of each alpha CI."),
    fresh: bool = typer.Option(
        False, "--fresh", help="Recompute every unit instead of resuming from --out's cache."
    ),
) -> None:
    """Hidden-state divergence between two prompts that share one continuation, per layer."""
    from harness.units.probe_plan import ProbeFlags  # lazy: CLI start-up

    flags = ProbeFlags(
        model=model, prompt_a=prompt_a, prompt_b=prompt_b, system_a=system_a,
        system_b=system_b, user=user, continuation=continuation, generator=generator,
        tokens=tokens, layers=layers, t_min=t_min, pairs=pairs, compare=compare,
        attention_bias=attention_bias, backend=backend, base_url=base_url,
        served_model=served_model, top_k=top_k, concurrency=concurrency, chunk=chunk,
        tensor_parallel_size=tensor_parallel_size, pipeline_parallel_size=pipeline_parallel_size,
        seed=seed, n_boot=n_boot, dtype=dtype,
    )  # fmt: skip
    _run(flags, out, fresh)


def _run(flags, out: Path | None, fresh: bool = False) -> None:
    import time

    from rich.console import Console

    from harness.pipeline import run_probe  # lazy: CLI start-up
    from harness.results import FitRow  # lazy: CLI start-up
    from harness.units.probe_plan import plan_probe, probe_request  # lazy: CLI start-up

    err = Console(stderr=True)
    folder = out or Path("reports") / time.strftime("probe-%Y%m%d-%H%M%S")
    with err.status("probing ...") as status:

        def say(msg: str) -> None:
            status.update(f"probing {msg} ...")
            if not err.is_terminal:  # a log file gets one line per pair instead of a spinner
                err.print(f"{time.strftime('%H:%M:%S')} probing {msg}")

        # every check before the first token; then the stages, resuming from <out>/cache
        ctx = run_probe(plan_probe(probe_request(flags), folder, fresh), say)
    for note in ctx.notes:
        err.print(f"[yellow]note:[/yellow] {note}")
    Console(width=160).print(alpha_table(ctx.artifacts.value(FitRow)))
    csvs = [name for name in FILE_ORDER if name in ctx.artifacts.files()]
    err.print(f"wrote {folder}/{', '.join(csvs)}, continuations.jsonl")


def alpha_table(fits):
    """Rich table: alpha (metric l2) by layer, one column per model and policy: each policy's
    pairs pooled under a lam sweep, every pair pooled without one, or a single pair's own."""
    from rich.table import Table

    from harness.analysis.fits import POOLED  # lazy: CLI start-up

    pooled = fits[fits["item"] == POOLED]
    per_policy = pooled[pooled["policy"] != POOLED]
    several = fits.loc[fits["item"] != POOLED, "item"].nunique() > 1
    rows = per_policy if len(per_policy) else pooled if several else fits[fits["item"] != POOLED]
    table = Table(title=f"alpha of {TABLE_METRIC} by layer "
                        f"({'pooled over pairs' if several else 'one pair'})")  # fmt: skip
    columns = [tuple(c) for c in rows[["model", "policy"]].drop_duplicates().to_numpy()]
    table.add_column("layer", justify="right")
    for model, policy in columns:  # the whole model's rows carry policy `all`: the model alone
        table.add_column(model if policy == POOLED else f"{model}\n{policy}", justify="right")
    pick = rows[
        (rows["metric"] == TABLE_METRIC)
        | (rows["layer"] == -1) & (rows["metric"] == "abs_delta_logp")
    ]
    for layer in sorted(pick["layer"].unique(), key=lambda v: (v < 0, v)):
        cells = []
        for model, policy in columns:
            sel = pick[(pick["layer"] == layer) & (pick["model"] == model)
                       & (pick["policy"] == policy)]  # fmt: skip
            alpha = float(sel["alpha"].iloc[0]) if len(sel) else float("nan")
            cells.append("nan" if alpha != alpha else f"{alpha:.3f}")
        table.add_row("|dlogp|" if layer == -1 else str(layer), *cells)
    return table
