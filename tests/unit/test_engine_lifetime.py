"""Engine processes die with their parent, even when the parent is killed with SIGKILL
(harness/engines/lifetime.py). A stand-in "engine" (a process whose target claims to be vLLM's
code) and its own child stand in for vLLM's engine core and worker; no model starts."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from harness.engines import memory
from harness.errors import UserError

# A parent that binds its engine children, starts an "engine core" (spawn, as vLLM does on
# CPU) which starts a "worker", prints both pids, then waits to be killed.
PARENT = textwrap.dedent(
    """
    import multiprocessing as mp, os, sys, time
    from harness.engines.lifetime import bind_engine_children
    import tests.unit.engine_stand_in as stand_in

    if __name__ == "__main__":
        bind_engine_children()
        ready = mp.get_context("spawn").Queue()
        mp.get_context("spawn").Process(target=stand_in.engine_core, args=(ready,)).start()
        print(*ready.get(timeout=60), flush=True)
        time.sleep(600)
    """
)


# The same, but the "engine core" is killed while it starts: its argument takes a minute to
# unpickle (vLLM's imports), and the parent prints its pid and is killed meanwhile.
STARTING = textwrap.dedent(
    """
    import multiprocessing as mp, time
    from harness.engines.lifetime import bind_engine_children
    import tests.unit.engine_stand_in as stand_in

    if __name__ == "__main__":
        bind_engine_children()
        core = mp.get_context("spawn").Process(
            target=stand_in.starting_engine, args=(stand_in.SlowToLoad(),)
        )
        core.start()
        print(core.pid, flush=True)
        time.sleep(600)
    """
)


# A parent that starts a "server" (a plain subprocess, as the tests' `vllm serve` is) with
# terminate_with_parent, prints its pid, then waits to be killed.
SERVING = textwrap.dedent(
    """
    import subprocess, sys, time
    from harness.engines.lifetime import terminate_with_parent

    server = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)"], preexec_fn=terminate_with_parent
    )
    print(server.pid, flush=True)
    time.sleep(600)
    """
)


# A parent that, as tests/conftest.py does, binds every subprocess it starts to itself, then
# starts a `harness run` stand-in with a plain subprocess.Popen (no preexec_fn of its own).
SESSION = textwrap.dedent(
    """
    import subprocess, sys, time
    from harness.engines.lifetime import terminate_subprocesses_with_this_process

    terminate_subprocesses_with_this_process()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    print(child.pid, flush=True)
    time.sleep(600)
    """
)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:  # a zombie is gone for our purpose
        return stat.read().split(")")[-1].split()[0] != "Z"


def _kill_parent_and_wait(script: str, tmp_path, settle: float = 0.0) -> list[int]:
    """Run `script` as a parent process, read the pids of the children it prints, wait
    `settle` seconds, SIGKILL the parent (as `timeout` or a CI kill does) and return those of
    its children still alive 10 s later (all were alive before the kill)."""
    path = tmp_path / "parent.py"
    path.write_text(script)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    parent = subprocess.Popen(
        [sys.executable, str(path)], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        children = [int(pid) for pid in parent.stdout.readline().split()]
        time.sleep(settle)
        assert all(_alive(pid) for pid in children)
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)
        deadline = time.monotonic() + 10
        while any(_alive(pid) for pid in children) and time.monotonic() < deadline:
            time.sleep(0.1)
        return [pid for pid in children if _alive(pid)]
    finally:
        parent.kill()
        parent.wait()


LINUX_ONLY = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux's")


@LINUX_ONLY
def test_engine_processes_die_when_their_parent_is_killed(tmp_path):
    # the engine core and its worker: neither outlives the killed parent
    assert _kill_parent_and_wait(PARENT, tmp_path) == []


@LINUX_ONLY
def test_an_engine_killed_while_it_starts_dies_with_its_parent(tmp_path):
    # 3 s in, the engine core is still unpickling its slow argument (a minute)
    assert _kill_parent_and_wait(STARTING, tmp_path, settle=3) == []


@LINUX_ONLY
def test_a_server_started_by_a_killed_parent_is_terminated(tmp_path):
    assert _kill_parent_and_wait(SERVING, tmp_path) == []


@LINUX_ONLY
def test_a_subprocess_of_a_killed_test_session_is_terminated(tmp_path):
    assert _kill_parent_and_wait(SESSION, tmp_path) == []


def test_an_engine_start_without_memory_gets_one_line(tmp_path, monkeypatch):
    (tmp_path / "config.json").write_text('{"torch_dtype": "bfloat16"}')
    (tmp_path / "model.safetensors").write_bytes(b"\0" * (1 << 20))  # 1 MiB bf16: 2 MiB fp32
    assert memory.weights_bytes(tmp_path) == 2 << 20
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "2")
    with pytest.raises(UserError) as refused:
        memory.check_engine_memory(tmp_path, available=int(1.49 * memory.GIB))
    message = str(refused.value)
    assert "\n" not in message
    assert "1.49 GiB available" in message and "VLLM_CPU_KVCACHE_SPACE=2" in message
    memory.check_engine_memory(tmp_path, available=3 * memory.GIB)  # fits: no error
