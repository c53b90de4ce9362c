"""The one seam for running the harness's stages without a model (tests/README.md):
`scripted_run` opens a run's StageContext over a config whose models need no folder, with a stand-in
engine (harness.engines.scripted.ScriptedEngine, or another object with its `generate`) as
every engine the harness makes (`harness.engines.scripted.every_engine`, through the engine
registry). A test that only needs the engine swapped uses the `scripted_engine` fixture of
tests/conftest.py."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harness.config.files import load_run_config_and_suites
from harness.engines.scripted import every_engine
from harness.models import ResolvedModel
from harness.stages.context import RunContext, run_context
from harness.store import RunStore
from harness.units.plan import RunPlan, select_items


@contextmanager
def scripted_run(
    config_path: Path, out: Path, engine: Any, content_key: str = "scripted-1"
) -> Iterator[RunContext]:
    """The run of `config_path` into `out` on `engine`: its models are stand-ins (their
    names, no folder; tokenizer: the engine's), the store open while the block runs."""
    config, suites = load_run_config_and_suites(config_path)
    models = [
        ResolvedModel(name=name, source="tiny", path=config_path.parent, content_key=content_key)
        for name in config.models
    ]
    with every_engine(engine), RunStore(out) as store:
        plan = RunPlan(
            config=config, suites=suites, items=select_items(config, suites), models=models,
            twins={}, out_dir=out, run_id=config.run_id(),
        )  # fmt: skip
        ctx = run_context(plan, store, started=datetime.now(UTC).isoformat(timespec="seconds"))
        for model in models:
            ctx._tokenizers[model.name] = engine.tokenizer
        yield ctx
