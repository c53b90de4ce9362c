"""Atomic writes: a reader sees the old file or folder or the complete new one, never half.

A file is written to a hidden sibling (`.NAME.<random>.tmp`), flushed and fsynced, then
renamed over the target with `os.replace`, which is atomic on one filesystem. A process killed
mid-write leaves only the hidden sibling, which `RunStore` deletes on the next run. A folder is
filled under a hidden sibling (`.NAME.<random>.partial`) and renamed into place the same way.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO


def _hidden_sibling(path: Path, suffix: str) -> Path:
    return path.with_name(f".{path.name}.{uuid.uuid4().hex}.{suffix}")


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` atomically, creating the parent folders."""
    with atomic_open(path, "xb") as handle:
        handle.write(data)


@contextmanager
def atomic_open(path: Path, mode: str = "x") -> Iterator[IO]:
    """A handle on a hidden sibling of `path` ("x": UTF-8 text, line endings written as given;
    "xb": bytes), renamed over `path` once the block ends: for a file written a part at a
    time (a 100,000-conversation windows.csv is ~370 MiB, too big to hold as one string)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _hidden_sibling(path, "tmp")
    text = {} if "b" in mode else {"encoding": "utf-8", "newline": ""}
    try:
        with tmp.open(mode, **text) as handle:  # a normal file's permissions, unlike mkstemp
            yield handle
            handle.flush()
            # Without fsync a crash soon after the rename can leave the new name pointing at
            # an empty file on some filesystems (ext4 delayed allocation).
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def atomic_write_text(path: Path, text: str) -> None:
    """Write `text` as UTF-8 to `path` atomically; line endings are written as given."""
    atomic_write_bytes(path, text.encode("utf-8"))


@contextmanager
def atomic_folder(dest: Path) -> Iterator[Path]:
    """Yield an empty hidden sibling folder of `dest` to fill; renamed to `dest` on success.

    On an exception the partial folder is removed and `dest` is untouched. The rename fails
    with OSError when `dest` exists and is not empty (another process made it first): the
    caller decides whether that is an error.
    """
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = _hidden_sibling(dest, "partial")
    tmp.mkdir()
    try:
        yield tmp
        os.replace(tmp, dest)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
