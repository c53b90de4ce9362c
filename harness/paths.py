"""Where the harness keeps converted models and other caches."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """`HARNESS_CACHE` when set, else the user cache dir (e.g. ~/.cache/prompt-harness)."""
    env = os.environ.get("HARNESS_CACHE")
    if env:
        return Path(env).expanduser()
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("prompt-harness"))


def models_cache() -> Path:
    return cache_root() / "models"
