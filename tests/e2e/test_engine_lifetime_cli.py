"""No engine process outlives `harness run`, however it is stopped: SIGTERM shuts the run down
cleanly and prints how to resume; SIGKILL (no handler runs) is met by the engine processes
themselves (harness/engines/lifetime.py). Only the run's own process is signalled, as a CI
timeout or `kill PID` does, not its process group."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]

CONFIG = Path(__file__).parent.parent / "data" / "configs" / "tiny-vllm-kill.yaml"


def _start_until_engine_runs(out: Path) -> tuple[subprocess.Popen, list[psutil.Process]]:
    """`harness run` into `out`, returned once its engine core and worker processes run."""
    run = subprocess.Popen(
        [sys.executable, "-m", "harness", "run", str(CONFIG), "--out", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and run.poll() is None:
        engines = [
            p
            for p in psutil.Process(run.pid).children(recursive=True)
            if any(name in " ".join(_cmdline(p)) for name in ("EngineCore", "Worker"))
        ]
        if len(engines) >= 2:
            return run, engines
        time.sleep(0.2)
    run.kill()
    pytest.fail(f"the engine never started: {run.communicate()[1][-2000:]}")


def _cmdline(process: psutil.Process) -> list[str]:
    try:
        return process.cmdline()
    except psutil.Error:
        return []


def _left(processes: list[psutil.Process], seconds: float = 10) -> list[psutil.Process]:
    deadline = time.monotonic() + seconds
    alive = processes
    while alive and time.monotonic() < deadline:
        alive = [p for p in alive if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        time.sleep(0.2)
    for process in alive:  # leave the machine clean whatever the verdict
        process.kill()
    return alive


def test_sigkill_of_a_run_leaves_no_engine_process(tmp_path, tiny_model_path):
    run, engines = _start_until_engine_runs(tmp_path / "killed")
    run.send_signal(signal.SIGKILL)
    run.wait(timeout=30)
    assert _left(engines) == [], "engine processes outlived the killed run"


def test_sigterm_stops_a_run_cleanly_and_says_how_to_resume(tmp_path, tiny_model_path):
    out = tmp_path / "stopped"
    run, engines = _start_until_engine_runs(out)
    run.send_signal(signal.SIGTERM)
    _, stderr = run.communicate(timeout=120)
    assert run.returncode == 128 + signal.SIGTERM
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("error: interrupted by SIGTERM") and "to resume" in last, last
    assert str(out) in last and "Traceback" not in stderr
    assert _left(engines) == [], "engine processes outlived the stopped run"
