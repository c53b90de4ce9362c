"""Refuse a CPU vLLM start that cannot get its memory, in one line, before any process starts.

vLLM's CPU worker loads the weights, then allocates the whole KV cache
(`VLLM_CPU_KVCACHE_SPACE` GiB) and fails when the node's available memory is below it: a
~200-line traceback from two processes, ending in "Available memory on node 0 ... less than
requested memory for kv", and exit 3. The same comparison made before the start, with the
same available-memory figure (vLLM's `get_memory_node_info`), names the cause and the setting.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from harness.errors import UserError

GIB = 1024**3
_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}


def weights_bytes(model_path: Path) -> int:
    """The weights' size once loaded in float32 (the CPU engine's dtype)."""
    files = sorted(Path(model_path).glob("*.safetensors")) or sorted(Path(model_path).glob("*.bin"))
    stored = sum(f.stat().st_size for f in files)
    try:
        config = json.loads((Path(model_path) / "config.json").read_text())
    except (OSError, ValueError):
        config = {}
    width = _BYTES.get(str(config.get("torch_dtype") or config.get("dtype") or "float32"), 4)
    return stored * 4 // width


def available_bytes() -> int | None:
    """What vLLM's CPU worker will count as available (None where it cannot be read)."""
    try:
        from vllm.utils.cpu_resource_utils import get_memory_node_info  # lazy: vllm

        return int(get_memory_node_info(0).available_memory)
    except Exception:
        try:
            import psutil

            return int(psutil.virtual_memory().available)
        except Exception:
            return None


def check_engine_memory(model_path: Path, available: int | None = None) -> None:
    """Raise a one-line UserError when the weights and the KV cache cannot fit."""
    space = os.environ.get("VLLM_CPU_KVCACHE_SPACE", "")
    if not space:
        return  # vLLM then sizes the cache from a share of memory and checks that itself
    try:
        kv = float(space) * GIB
    except ValueError:
        return  # vLLM names a malformed value itself
    weights = weights_bytes(model_path)
    available = available_bytes() if available is None else available
    if available is None or available >= kv + weights:
        return
    raise UserError(
        f"not enough free memory to start the vLLM engine: {available / GIB:.2f} GiB "
        f"available, it needs {(kv + weights) / GIB:.2f} GiB (KV cache "
        f"VLLM_CPU_KVCACHE_SPACE={space} GiB + weights {weights / GIB:.2f} GiB); lower "
        "VLLM_CPU_KVCACHE_SPACE (e.g. VLLM_CPU_KVCACHE_SPACE=1) or free memory (is another "
        "engine running? ps aux | grep VLLM)"
    )
