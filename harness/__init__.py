"""Prompt-persistence evaluation harness: how long does a system prompt keep steering a model?

From Python (harness/api.py): `load_config`, `plan`, `run` -> `Run`, `score_log`, `probe`."""

from typing import Any

from harness.errors import HarnessError, UserError

__version__ = "0.1.0"
__all__ = [
    "HarnessError",
    "UserError",
    "__version__",
    "load_config",
    "plan",
    "run",
    "score_log",
    "probe",
    "Run",
    "RunManifest",
]
_API = {"load_config", "plan", "run", "score_log", "probe", "Run", "RunManifest"}


def __getattr__(name: str) -> Any:
    """The API on first use: `import harness` stays light for the CLI and engine processes
    (harness.api loads the pipeline, pydantic models and every stage)."""
    if name in _API:
        import harness.api  # lazy: see the docstring

        return getattr(harness.api, name)
    raise AttributeError(f"module 'harness' has no attribute {name!r}")
