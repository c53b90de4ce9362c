"""No engine process outlives `harness run`, however it is stopped: SIGKILL (no handler runs)
is met by the engine processes themselves (harness/engines/lifetime.py), SIGTERM and SIGINT
shut the run down cleanly and print how to resume; after two SIGKILLs, a SIGTERM and a SIGINT
into one folder, the run resumes there and completes. Only the run's own process is signalled,
as a CI timeout or `kill PID` does, not its process group. (One sequence in one test: each
stopped run is a vLLM start, ~25-45 s on 2 cores.)"""

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


def _start_until_engine_runs(
    out: Path, command: tuple[str, ...] = ("run", str(CONFIG))
) -> tuple[subprocess.Popen, list[psutil.Process]]:
    """`harness COMMAND` into `out`, returned once its engine core and worker processes run."""
    run = subprocess.Popen(
        [sys.executable, "-m", "harness", *command, "--out", str(out)],
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
    stderr = run.communicate()[1][-2000:]
    pytest.fail(f"the engine never started (exit {run.returncode}): {stderr}")


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


def _stop_cleanly(run: subprocess.Popen, signum: int, out: Path) -> None:
    """SIGTERM or SIGINT: exit 128 + the signal, and the last stderr line says how to resume."""
    run.send_signal(signum)
    _, stderr = run.communicate(timeout=120)
    name = signal.Signals(signum).name
    assert run.returncode == 128 + signum, (name, stderr[-2000:])
    last = stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: interrupted by {name}") and "to resume" in last, last
    assert str(out) in last and "Traceback" not in stderr
    # stopped while the engine starts: the run went no further (vLLM's start swallows the
    # interrupt; the run used to go on to the end within the 30 s grace)
    assert not (out / "generations.jsonl").exists(), f"the run went on after {name}"


def test_kills_and_stop_signals_leave_no_engine_and_a_rerun_completes(tmp_path, tiny_model_path):
    """Each signal lands while the engine starts (the moment a run holds most processes): two
    SIGKILLs in a row, then SIGTERM, then SIGINT, into the same folder; what the stopped runs
    left there must not stop the fifth run from finishing."""
    out = tmp_path / "stopped"
    for signum in (signal.SIGKILL, signal.SIGKILL, signal.SIGTERM, signal.SIGINT):
        run, engines = _start_until_engine_runs(out)
        name = signal.Signals(signum).name
        if signum == signal.SIGKILL:
            run.send_signal(signum)
            run.wait(timeout=30)
        else:
            _stop_cleanly(run, signum, out)
        assert _left(engines) == [], f"engine processes outlived the run stopped by {name}"
    rerun = subprocess.run(
        [sys.executable, "-m", "harness", "run", str(CONFIG), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    windows = (out / "windows.csv").read_text().splitlines()
    assert {line.split(",")[6] for line in windows[1:]} == {"0", "1"}  # both samples scored


def test_sigkill_of_a_probe_leaves_no_engine_process(tmp_path, tiny_model_path):
    """`harness probe` generating its continuation on vLLM: the same engines, the same rule."""
    probe = ("probe", "--model", "tiny-random-llama", "--system-a", "Always answer in French.",
             "--system-b", ":none", "--user", "Hi", "--continuation", "generate",
             "--generator", "vllm", "--tokens", "64")  # fmt: skip
    run, engines = _start_until_engine_runs(tmp_path / "probe", probe)
    run.send_signal(signal.SIGKILL)
    run.wait(timeout=30)
    assert _left(engines) == [], "engine processes outlived the killed probe"
