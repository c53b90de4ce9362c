"""Stand-ins for vLLM's engine core and worker processes (tests/unit/test_engine_lifetime.py):
started through multiprocessing with spawn, as vLLM's CPU platform starts its own."""

from __future__ import annotations

import multiprocessing as mp
import os
import time


def worker(ready) -> None:
    ready.put(os.getpid())
    time.sleep(600)


def engine_core(ready) -> None:
    mine = mp.get_context("spawn").Queue()
    mp.get_context("spawn").Process(target=worker, args=(mine,)).start()
    ready.put((os.getpid(), mine.get(timeout=60)))
    time.sleep(600)


def _load_slowly() -> SlowToLoad:
    time.sleep(60)
    return SlowToLoad()


class SlowToLoad:
    """An argument that takes a minute to unpickle in the child, as vLLM's engine-core
    arguments do while they import vLLM (start-up)."""

    def __reduce__(self):
        return (_load_slowly, ())


def starting_engine(_argument) -> None:
    time.sleep(600)
