"""Quiet by default: library logs at WARNING, vLLM's at ERROR, their progress bars off.

vLLM reads its log level from the environment when it is imported (and its worker processes
inherit the environment), so this must run before any engine is created. At WARNING every
vLLM start on CPU still printed ~15 lines that ask nothing of the user (Triton absent, eager
mode, chunked prefill off, tcmalloc hints), so vLLM gets ERROR. `--verbose` keeps every
library's own defaults.
"""

from __future__ import annotations

import logging
import os
import warnings

_QUIET_ENV = {
    "VLLM_LOGGING_LEVEL": "ERROR",
    "TORCH_CPP_LOG_LEVEL": "ERROR",  # torch's C++ warnings in the engine's workers (NUMA binding)
    "PYTHONWARNINGS": "ignore::FutureWarning",  # deprecations inside vLLM, seen by no user
    "TRANSFORMERS_VERBOSITY": "warning",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",  # transformers' shard/weight-loading bars
    "TOKENIZERS_PARALLELISM": "false",  # silences the fork warning of HF tokenizers
}
_QUIET_LOGGERS = ("vllm", "transformers", "torch", "accelerate", "filelock", "httpx")


_VERBOSE_ENV = "HARNESS_VERBOSE"


def is_verbose() -> bool:
    return os.environ.get(_VERBOSE_ENV) == "1"


def configure_logging(verbose: bool = False) -> None:
    """Set library log levels for this process and the engine processes it starts."""
    if verbose:
        os.environ[_VERBOSE_ENV] = "1"
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "INFO")
        return
    os.environ.pop(_VERBOSE_ENV, None)
    for key, value in _QUIET_ENV.items():
        os.environ.setdefault(key, value)
    for name in _QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", category=FutureWarning)
