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
