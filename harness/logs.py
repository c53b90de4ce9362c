"""Quiet by default: engine and library logs at WARNING, their progress bars off.

vLLM reads its log level from the environment when it is imported (and its worker processes
inherit the environment), so this must run before any engine is created. `--verbose` keeps
every library's own defaults.
"""

from __future__ import annotations

import logging
import os

_QUIET_ENV = {
    "VLLM_LOGGING_LEVEL": "WARNING",
    "TRANSFORMERS_VERBOSITY": "warning",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",  # transformers' shard/weight-loading bars
    "TOKENIZERS_PARALLELISM": "false",  # silences the fork warning of HF tokenizers
}
_QUIET_LOGGERS = ("vllm", "transformers", "torch", "accelerate", "filelock", "httpx")


def configure_logging(verbose: bool = False) -> None:
    """Set library log levels for this process and the engine processes it starts."""
    if verbose:
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "INFO")
        return
    for key, value in _QUIET_ENV.items():
        os.environ.setdefault(key, value)
    for name in _QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
