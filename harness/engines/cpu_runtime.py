"""The runtime of vLLM's CPU engine process: preloaded allocator and OpenMP, thread binding.

vLLM's CPU installation guide asks for tcmalloc and Intel OpenMP in `LD_PRELOAD` (every start
warns when they are missing). The dynamic loader reads `LD_PRELOAD` when a process starts, so
the harness cannot change its own allocator, but vLLM's engine core on CPU is a *spawned*
process that inherits `os.environ`: setting it before `vllm.LLM` starts reaches exactly the
process that decodes. The libraries come from `scripts/setup.sh` (Debian's
`libtcmalloc-minimal4`; `intel-openmp`, which the CPU lock installs into the venv); where one
is missing, the engine runs without it. What was set is recorded in manifest.json.

`HARNESS_CPU_PRELOAD` picks the libraries (`tcmalloc,iomp` by default; `none` turns both
off, which `bench/runtime.py` uses to measure each alone). An `LD_PRELOAD` the user set keeps
its entries and comes first.
"""

from __future__ import annotations

import glob
import os
import sys
from pathlib import Path

from harness.errors import UserError

# name -> file patterns, searched in the venv's lib folder, then the system's library folders
LIBRARIES = {
    "tcmalloc": ("libtcmalloc_minimal.so.4", "libtcmalloc_minimal.so*", "libtcmalloc.so*"),
    "iomp": ("libiomp5.so",),
}
DEFAULT_PRELOAD = "tcmalloc,iomp"
_SYSTEM_DIRS = (
    "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib",
    "/usr/local/lib",
)  # fmt: skip


def library_dirs() -> list[Path]:
    return [Path(sys.prefix) / "lib", *(Path(d) for d in _SYSTEM_DIRS)]


def find_library(name: str) -> Path | None:
    """The first file matching the patterns of `name` (a key of LIBRARIES), or None."""
    for folder in library_dirs():
        for pattern in LIBRARIES[name]:
            found = sorted(glob.glob(str(folder / pattern)))
            if found:
                return Path(found[0])
    return None


def wanted_libraries(value: str | None = None) -> list[str]:
    value = os.environ.get("HARNESS_CPU_PRELOAD", DEFAULT_PRELOAD) if value is None else value
    names = [n.strip() for n in value.split(",") if n.strip() and n.strip() != "none"]
    unknown = [n for n in names if n not in LIBRARIES]
    if unknown:
        raise UserError(
            f"HARNESS_CPU_PRELOAD: unknown library {unknown[0]!r} "
            f"(expected a comma-separated list of {', '.join(LIBRARIES)}, or none)"
        )
    return names


def configure_cpu_runtime(env: dict | None = None) -> dict:
    """Put the wanted libraries that exist in `env`'s LD_PRELOAD (os.environ by default) and
    return what the engine process will run with, for the manifest."""
    env = os.environ if env is None else env
    present = [p for p in env.get("LD_PRELOAD", "").split(":") if p]
    preloaded, missing = {}, []
    for name in wanted_libraries(env.get("HARNESS_CPU_PRELOAD", DEFAULT_PRELOAD)):
        path = find_library(name)
        if path is None:
            missing.append(name)
            continue
        preloaded[name] = str(path)
        if not any(Path(p).name.startswith(path.name.split(".so")[0]) for p in present):
            present.append(str(path))
    if present:
        env["LD_PRELOAD"] = ":".join(present)
    return {
        "preloaded": preloaded,
        "missing": missing,
        "ld_preload": env.get("LD_PRELOAD", ""),
        "omp_threads_bind": env.get("VLLM_CPU_OMP_THREADS_BIND", "auto"),
    }
