"""Engine processes die with the process that started them, however it ends.

vLLM on CPU spawns its engine core (`VLLM::EngineCore`), which spawns its workers
(`VLLM::Worker`), through `multiprocessing`. A clean end stops them (`vllm_engine.shutdown_all`),
but a parent killed with SIGKILL runs no handler and no atexit hook, and the engine core then
kept running with ~4.7 GB until the next start failed for lack of memory.

`bind_engine_children()` makes every process started through `multiprocessing` from then on
(vLLM's, and any other: none may outlive the run) ask the kernel, as the first thing it runs,
to SIGKILL it when its parent dies (`prctl(PR_SET_PDEATHSIG)`), and
passes the same rule on to the processes it starts (the workers of an engine core). Linux
sends that signal when the *thread* that started the child ends, so a child started from
another thread (none is, today) watches its parent's pid from a thread instead. Keeping the
engine core in-process (`VLLM_ENABLE_V1_MULTIPROCESSING=0`) would not need this, but vLLM's
CPU platform then cannot set the workers' OpenMP binding and preloads (vllm/platforms/cpu.py).
"""

from __future__ import annotations

import ctypes
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from multiprocessing.process import BaseProcess
from multiprocessing.reduction import ForkingPickler
from typing import Any

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
# Resolved here, in the parent: a `preexec_fn` runs between fork and exec, where looking a
# symbol up (dlsym) could wait forever on a lock another thread held at the fork.
_prctl = ctypes.CDLL(None, use_errno=True).prctl if sys.platform.startswith("linux") else None
_POLL_SECONDS = 0.5
_original_start = BaseProcess.start


class BoundToParent:
    """A process target that dies with its parent.

    Pickled into a spawned child, it arms the death signal as the child unpickles it: before
    the target and the process's arguments, pickled after it, are unpickled, which imports
    vLLM and takes seconds of start-up that a kill of the parent would otherwise miss."""

    def __init__(
        self, target: Any, parent_pid: int, from_main_thread: bool, armed: bool = False
    ) -> None:
        self.target = target
        self.parent_pid = parent_pid
        self.from_main_thread = from_main_thread
        self.armed = armed

    def __reduce__(self):
        target = bytes(ForkingPickler.dumps(self.target))
        return (_armed_in_child, (self.parent_pid, self.from_main_thread, target))

    def __call__(self, *args, **kwargs):
        if not self.armed:  # a forked child: nothing was unpickled
            die_with_parent(self.parent_pid, self.from_main_thread)
            bind_engine_children()  # the engine core's own workers
        return self.target(*args, **kwargs)


def _armed_in_child(parent_pid: int, from_main_thread: bool, target: bytes) -> BoundToParent:
    die_with_parent(parent_pid, from_main_thread)
    bind_engine_children()
    return BoundToParent(pickle.loads(target), parent_pid, from_main_thread, armed=True)


def die_with_parent(parent_pid: int, use_pdeathsig: bool = True) -> None:
    """End this process with SIGKILL once `parent_pid` is gone (at once if it already is)."""
    if use_pdeathsig and _prctl is not None and _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0):
        use_pdeathsig = False  # e.g. a sandbox refusing prctl (non-zero): poll instead
    if not (use_pdeathsig and _prctl is not None):
        threading.Thread(target=_watch_parent, args=(parent_pid,), daemon=True).start()
    if os.getppid() != parent_pid:  # the parent died before the signal was armed
        os.kill(os.getpid(), signal.SIGKILL)


def terminate_with_parent() -> None:
    """`preexec_fn` of a server process a test or bench starts (`vllm serve`): SIGTERM it when
    its parent dies, however that parent ends (a killed pytest runs no fixture teardown);
    SIGTERM, not SIGKILL, so that the server stops its own engine processes."""
    if _prctl is not None:
        _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


class _DiesWithItsStarter(subprocess.Popen):
    """A `subprocess.Popen` whose child, started from the main thread, gets SIGTERM when this
    process dies (`terminate_with_parent`), unless the caller set a `preexec_fn` of its own.
    Other threads are left alone: Linux sends the signal when the starting *thread* ends."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if (
            kwargs.get("preexec_fn") is None
            and threading.current_thread() is threading.main_thread()
        ):
            kwargs["preexec_fn"] = terminate_with_parent
        super().__init__(*args, **kwargs)


def terminate_subprocesses_with_this_process() -> None:
    """From now on every subprocess this process starts from its main thread (`subprocess.run`
    and `Popen`, asyncio's too) is SIGTERMed when it dies: a test session killed by a CI timeout
    runs no teardown, and the `harness run` it had started kept its engine going; idempotent."""
    subprocess.Popen = _DiesWithItsStarter


def _watch_parent(parent_pid: int) -> None:
    while os.getppid() == parent_pid:
        time.sleep(_POLL_SECONDS)
    os.kill(os.getpid(), signal.SIGKILL)


def _start_bound(self: BaseProcess) -> None:
    target = getattr(self, "_target", None)
    if target is not None and not isinstance(target, BoundToParent):
        main = threading.current_thread() is threading.main_thread()
        self._target = BoundToParent(target, os.getpid(), main)
    _original_start(self)


def bind_engine_children() -> None:
    """From now on, every process this process starts through multiprocessing dies with it;
    idempotent. The CLI asks for this (`harness.cli.main`); a library caller gets
    `engine_children_bound` around each engine start instead."""
    BaseProcess.start = _start_bound


@contextmanager
def engine_children_bound() -> Iterator[None]:
    """The processes started through multiprocessing inside the block die with this one
    (and pass that on to theirs); `BaseProcess.start` is as it was after the block, so a
    notebook that imports the harness keeps its own multiprocessing."""
    before = BaseProcess.start
    BaseProcess.start = _start_bound
    try:
        yield
    finally:
        BaseProcess.start = before
