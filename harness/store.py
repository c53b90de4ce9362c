"""Run directory: content-addressed unit cache, resume, atomic writes, a single-writer lock.

Every unit of work (one generation batch, one sample's scoring, one pair's probe) is stored
under `cache/<stage>/<key>.json`, where the key hashes everything the result depends on
(model content key, prompt ids, parameters, seed, stage version). A unit is written with
an atomic rename once it is complete, so a run killed at any moment loses only the work in
flight (one unit for score, probe and bias; for generate, the (model, policy) units that were
generating together in one batch); the next run skips every stored unit. The CSVs are
assembled from the units in a fixed order, so a resumed run writes exactly the same rows as an
uninterrupted one.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

from harness.atomic import atomic_open, atomic_write_bytes, atomic_write_text
from harness.errors import UserError

# Bump a stage's version when its output for the same inputs changes. All at 2 (probe and
# bias 3) since every key took the one shape of `unit_key`.
# judge: the verdict cache (how a verdict is parsed and stored; the rubric prompt has its own
# RUBRIC_VERSION in the key)
# score, turns, forks, single-turn +1: the language check's rule (rank among the candidates,
# two detectors) and the script check's code stripping changed their verdicts.
STAGE_VERSIONS = {
    "generate": 2,
    "score": 3,
    "turns": 3,
    "probe": 4,
    "bias": 4,
    "probe-cli": 3,
    "judge": 2,
    "forks": 3,
    "single-turn": 2,
    "hosted": 1,  # a chat engine's requests, tokens and served identity (manifest.json)
}


def unit_key(stage: str, *, model: Any, inputs: Any, params: Any) -> str:
    """The key of one cached unit, one shape for every stage: first 32 hex of sha256 of the
    canonical JSON of the stage and its version, `model` (the content key of the model that
    computes the unit), `inputs` (the content it reads: record keys, prompt ids, texts) and
    `params` (every setting its result depends on, seeds included; None where one does not
    apply). Never the run id, the run folder or a time, so a unit is found again by any run
    that would compute the same thing."""
    payload = json.dumps(
        {
            "stage": stage,
            "version": STAGE_VERSIONS[stage],
            "model": model,
            "inputs": inputs,
            "params": params,
        },
        sort_keys=True,
        default=str,
        separators=(",", ":"),
    )
    return hashlib.sha256(payload.encode()).hexdigest()[:32]


def write_csv(frame, path: Path) -> None:
    """A pandas DataFrame to CSV, atomically, with a stable float format; written a chunk of
    rows at a time, not built as one string first."""
    with atomic_open(path) as handle:
        frame.to_csv(handle, index=False, float_format="%.9g")


# the lock files of the run folders this process is writing: a forced exit (os._exit, after a
# stop signal's grace) runs no `__exit__`, so it removes them through `remove_held_locks`
_HELD: set[Path] = set()


def remove_held_locks() -> None:
    """Delete the lock file of every run folder this process still writes (a forced exit)."""
    for path in list(_HELD):
        path.unlink(missing_ok=True)


class RunStore:
    """A run folder, written by one process at a time: `.lock` exists while it writes and is
    gone on every exit (a result, a verdict, bad input, a crash, a stop signal). A folder this
    store created that holds no file at exit (the run stopped before its first unit) is
    removed too: bad input found mid-run leaves nothing behind."""

    def __init__(self, root: Path, fresh: bool = False) -> None:
        self.root = root
        self.cache = root / "cache"
        self.fresh = fresh
        self._lock = None
        self._created = False

    def __enter__(self) -> RunStore:
        from filelock import FileLock, Timeout

        self._created = not self.root.exists()
        self.root.mkdir(parents=True, exist_ok=True)
        lock = FileLock(str(self.root / ".lock"))
        try:
            lock.acquire(timeout=0)
        except Timeout:
            raise UserError(
                f"another run is writing {self.root} (lock {self.root / '.lock'}); "
                "wait for it or choose another --out"
            ) from None
        self._lock = lock
        _HELD.add(self.root / ".lock")
        if self.fresh and self.cache.exists():
            shutil.rmtree(self.cache)
        for stale in self.root.rglob(".*.tmp"):  # left by a run that was killed mid-write
            stale.unlink(missing_ok=True)
        return self

    def __exit__(self, *exc) -> None:
        if self._lock is None:
            return
        # unlinked while still held: a process that opened it meanwhile fails to take it
        # (acquire(timeout=0)) and says another run is writing, as it should
        path = self.root / ".lock"
        written = any(p.is_file() and p != path for p in self.root.rglob("*"))
        if self._created and not written:
            shutil.rmtree(self.root, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
        _HELD.discard(path)
        self._lock.release()
        self._lock = None

    def _unit(self, stage: str, key: str) -> Path:
        return self.cache / stage / f"{key}.json"

    def get(self, stage: str, key: str) -> Any | None:
        path = self._unit(stage, key)
        if not path.exists():
            return None
        try:
            return json.loads(path.read_text())
        except json.JSONDecodeError:  # cannot happen with atomic writes, but never trust disk
            path.unlink()
            return None

    def put(self, stage: str, key: str, value: Any) -> None:
        atomic_write_text(self._unit(stage, key), json.dumps(value, separators=(",", ":")))

    def has(self, stage: str, key: str) -> bool:
        return self._unit(stage, key).exists()


def put_arrays(store: RunStore, stage: str, key: str, arrays: dict) -> None:
    """Numeric units (probe curves) as .npz: compact and exact, unlike JSON floats."""
    import io

    import numpy as np

    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    atomic_write_bytes(store.cache / stage / f"{key}.npz", buffer.getvalue())


def get_arrays(store: RunStore, stage: str, key: str) -> dict | None:
    import numpy as np

    path = store.cache / stage / f"{key}.npz"
    if not path.exists():
        return None
    with np.load(path) as data:
        return {name: data[name] for name in data.files}
