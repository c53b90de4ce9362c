"""Generation engines kept open from one stage to the next within a run.

A vLLM engine takes ~40 s to start on CPU, so the stages that generate (generation, then the
forks) share one engine per model. The stages after them run transformers on the same cores,
where an idle vLLM CPU worker keeps spinning: the last stage that generates closes the pool,
and the pipeline closes it at the end of a run in any case.
"""

from __future__ import annotations

from pathlib import Path

from harness.capabilities import Capability
from harness.engines import make_engine
from harness.engines.base import Engine
from harness.engines.kinds import engine_can
from harness.engines.options import engine_options, run_budget


class EnginePool:
    def __init__(self) -> None:
        self._open: dict[str, Engine] = {}
        # a chat engine's request cache (the run's store sets it)
        self.request_cache: Path | None = None
        # engine chat: one spending guard per model for the whole run, shared by generation,
        # simulated users and hosted judges, so `budget` limits what they spend together
        self._budgets: dict[str, object] = {}

    def budget(self, config, model: str):
        """The run's `Budget` for `model` (None off the chat engine), made on first use."""
        if model not in self._budgets:
            self._budgets[model] = run_budget(config, model)
        return self._budgets[model]

    def get(self, config, model) -> Engine:
        """The run's generation engine for `model` (`config.generation`), started on first use."""
        # a vLLM engine is shared per process: a judge on the same model may have closed it
        if model.name not in self._open or getattr(self._open[model.name], "closed", False):
            gen = config.generation
            options = engine_options(gen, model.name, self.request_cache)
            if engine_can(gen, Capability.METERED):
                options["budget"] = self.budget(config, model.name)
            self._open[model.name] = make_engine(gen.engine, model.path, **options)
        return self._open[model.name]

    def engines(self) -> list[Engine]:
        """The engines open now."""
        return list(self._open.values())

    def close(self) -> None:
        for engine in self._open.values():
            engine.close()
        self._open.clear()
