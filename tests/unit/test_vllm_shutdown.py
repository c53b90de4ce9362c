"""Every vLLM engine the harness starts is stopped by `shutdown_all` (at exit at the latest),
so none is left to vLLM's exit finaliser, which logs to streams that may be closed by then.
A stand-in `vllm` module records the shutdowns; no engine is started."""

from __future__ import annotations

import atexit
import sys
import types

import pytest

from harness.engines import vllm_engine


@pytest.fixture
def stopped(monkeypatch):
    stopped = []

    class FakeLLM:
        def __init__(self, **options):
            core = types.SimpleNamespace(shutdown=lambda: stopped.append(options["model"]))
            self.llm_engine = types.SimpleNamespace(engine_core=core)

    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(LLM=FakeLLM))
    monkeypatch.setattr(vllm_engine, "_RUNNING", [])
    monkeypatch.setattr(vllm_engine, "_ENGINES", {})
    return stopped


def test_shutdown_all_stops_every_engine_once(stopped, monkeypatch):
    at_exit = []
    monkeypatch.setattr(atexit, "register", at_exit.append)
    first = vllm_engine.start_llm(model="a")
    second = vllm_engine.start_llm(model="b")
    assert at_exit == [vllm_engine.shutdown_all]  # registered once, with the first engine
    vllm_engine.shutdown_llm(first)
    assert stopped == ["a"] and not vllm_engine.is_running(first)
    vllm_engine.shutdown_all()
    vllm_engine.shutdown_all()
    vllm_engine.shutdown_llm(first)
    assert stopped == ["a", "b"] and not vllm_engine.is_running(second)


def test_closing_an_engine_stops_its_llm_and_uncaches_it(stopped, monkeypatch, tmp_path):
    monkeypatch.setattr(atexit, "register", lambda func: None)
    monkeypatch.setattr(vllm_engine.VllmEngine, "__init__", _fake_init)
    engine = vllm_engine.get_vllm_engine(tmp_path, seed=0)
    assert vllm_engine.get_vllm_engine(tmp_path, seed=0) is engine  # cached per process
    engine.close()
    assert stopped == [str(tmp_path)] and vllm_engine._ENGINES == {}


def _fake_init(self, model_path, **options):
    self._llm = vllm_engine.start_llm(model=str(model_path))


def test_a_stop_signal_that_vllm_swallowed_during_the_start_stops_the_run(stopped, monkeypatch):
    """vLLM starts its engine inside a socket context that catches KeyboardInterrupt, so the
    Interrupted of a SIGTERM landing then never reached the harness: the run went on until
    the 30 s grace ended it. The start raises it again; the engine stays registered, so
    `shutdown_all` still stops it."""
    from harness import errors
    from harness.errors import Interrupted

    monkeypatch.setattr(atexit, "register", lambda func: None)
    monkeypatch.setattr(errors, "STOP_SIGNALS", [])
    vllm_engine.start_llm(model="before")  # no signal: the engine is handed out
    errors.STOP_SIGNALS.append(15)  # what harness.cli's handler records before raising
    with pytest.raises(Interrupted) as raised:
        vllm_engine.start_llm(model="during")
    assert raised.value.signum == 15
    vllm_engine.shutdown_all()
    assert stopped == ["before", "during"]
