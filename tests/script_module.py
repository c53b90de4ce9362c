"""One loader for the scripts tests import that are not package modules (bench/*.py, the
synthetic run builders of tests/data/): each a file run as `python path`, loaded here as a
module of its own name."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).parents[1]
BENCH = ROOT / "bench"


def load_script(path: Path, name: str, register: bool = False) -> ModuleType:
    """The file at `path` as a module named `name`. register: also in sys.modules (a module
    whose dataclasses or pickled objects look their module up by name needs it)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, f"no module at {path}"
    module = importlib.util.module_from_spec(spec)
    if register:
        sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
