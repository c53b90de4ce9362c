"""No engine process outlives `harness run`, however it is stopped: SIGTERM and SIGINT shut the
run down cleanly and print how to resume; SIGKILL (no handler runs) is met by the engine
processes themselves (harness/engines/lifetime.py), three times in a row, and the run resumes.
Only the run's own process is signalled, as a CI timeout or `kill PID` does, not its process
group."""

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


def test_three_sigkills_in_a_row_leave_no_engine_and_a_rerun_completes(tmp_path, tiny_model_path):
    """Each kill lands while the engine starts (the moment a run holds most processes); what
    the killed runs left in the folder must not stop the fourth run from finishing."""
    out = tmp_path / "killed"
    for kill in range(3):
        run, engines = _start_until_engine_runs(out)
        run.send_signal(signal.SIGKILL)
        run.wait(timeout=30)
        assert _left(engines) == [], f"engine processes outlived killed run {kill + 1}"
    rerun = subprocess.run(
        [sys.executable, "-m", "harness", "run", str(CONFIG), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    windows = (out / "windows.csv").read_text().splitlines()
    assert {line.split(",")[6] for line in windows[1:]} == {"0", "1"}  # both samples scored


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stop_signal_ends_a_run_cleanly_and_says_how_to_resume(tmp_path, tiny_model_path, signum):
    out = tmp_path / "stopped"
    run, engines = _start_until_engine_runs(out)
    run.send_signal(signum)
    _, stderr = run.communicate(timeout=120)
    assert run.returncode == 128 + signum
    last = stderr.strip().splitlines()[-1]
    name = signal.Signals(signum).name
    assert last.startswith(f"error: interrupted by {name}") and "to resume" in last, last
    assert str(out) in last and "Traceback" not in stderr
    assert _left(engines) == [], "engine processes outlived the stopped run"


def test_sigkill_of_a_probe_leaves_no_engine_process(tmp_path, tiny_model_path):
    """`harness probe` generating its continuation on vLLM: the same engines, the same rule."""
    probe = ("probe", "--model", "tiny-random-llama", "--system-a", "Always answer in French.",
             "--system-b", ":none", "--user", "Hi", "--continuation", "generate",
             "--generator", "vllm", "--tokens", "64")  # fmt: skip
    run, engines = _start_until_engine_runs(tmp_path / "probe", probe)
    run.send_signal(signal.SIGKILL)
    run.wait(timeout=30)
    assert _left(engines) == [], "engine processes outlived the killed probe"
