"""Fixtures shared by unit tests of several modules."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

BENCH = Path(__file__).parents[2] / "bench"


@pytest.fixture
def gate_family_bench(monkeypatch):
    """bench/gate_family.py as a module: the gates' and the prescription's family simulations."""
    monkeypatch.syspath_prepend(str(BENCH))
    spec = importlib.util.spec_from_file_location("bench_gate_family", BENCH / "gate_family.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
