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


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:  # a zombie is gone for our purpose
        return stat.read().split(")")[-1].split()[0] != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux's")
def test_engine_processes_die_when_their_parent_is_killed(tmp_path):
    script = tmp_path / "parent.py"
    script.write_text(PARENT)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    parent = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        core, worker = (int(pid) for pid in parent.stdout.readline().split())
        assert _alive(core) and _alive(worker)
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)
        deadline = time.monotonic() + 10
        while (_alive(core) or _alive(worker)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(core), "the engine core outlived its killed parent"
        assert not _alive(worker), "the worker outlived its killed engine core"
    finally:
        parent.kill()
        parent.wait()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux's")
def test_an_engine_killed_while_it_starts_dies_with_its_parent(tmp_path):
    script = tmp_path / "parent.py"
    script.write_text(STARTING)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    parent = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        core = int(parent.stdout.readline())
        time.sleep(3)  # the child is unpickling its slow argument (a minute)
        assert _alive(core)
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)
        deadline = time.monotonic() + 10
        while _alive(core) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(core), "an engine core killed during start-up outlived its parent"
    finally:
        parent.kill()
        parent.wait()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux's")
def test_a_server_started_by_a_killed_parent_is_terminated(tmp_path):
    script = tmp_path / "parent.py"
    script.write_text(SERVING)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    parent = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        server = int(parent.stdout.readline())
        assert _alive(server)
        parent.send_signal(signal.SIGKILL)  # as `timeout` or a CI kill ends a pytest session
        parent.wait(timeout=10)
        deadline = time.monotonic() + 10
        while _alive(server) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(server), "the server outlived the process that started it"
    finally:
        parent.kill()
        parent.wait()


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
