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
    # deprecations inside vLLM; the resource tracker's note at exit about vLLM's shared-memory
    # queue (it unlinks the segment itself)
    "PYTHONWARNINGS": "ignore::FutureWarning,ignore:resource_tracker:UserWarning",
    "TRANSFORMERS_VERBOSITY": "warning",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",  # transformers' shard/weight-loading bars
    "TQDM_DISABLE": "1",  # every other library bar (GGUF conversion, vLLM); ours are rich's
    "TOKENIZERS_PARALLELISM": "false",  # silences the fork warning of HF tokenizers
}
_QUIET_LOGGERS = ("vllm", "transformers", "torch", "accelerate", "filelock", "httpx")


_VERBOSE_ENV = "HARNESS_VERBOSE"
_QUIET_ENV_MARK = "HARNESS_QUIET"  # inherited by the engine's worker processes


def is_verbose() -> bool:
    return os.environ.get(_VERBOSE_ENV) == "1"


def configure_logging(verbose: bool = False) -> None:
    """Set library log levels for this process and the engine processes it starts."""
    if verbose:
        os.environ[_VERBOSE_ENV] = "1"
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "INFO")
        return
    os.environ.pop(_VERBOSE_ENV, None)
    os.environ[_QUIET_ENV_MARK] = "1"
    for key, value in _QUIET_ENV.items():
        os.environ.setdefault(key, value)
    _quiet_this_process()


def _quiet_this_process() -> None:
    for name in _QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    # vLLM logs some lines before its own handler exists (they reach Python's last-resort
    # handler, past VLLM_LOGGING_LEVEL): its logger's own level stops them.
    logging.getLogger("vllm").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", category=FutureWarning)


# vLLM's worker processes are spawned: they import the main module (the harness CLI) first,
# and so this module, before vLLM; a quiet parent leaves them the mark.
if os.environ.get(_QUIET_ENV_MARK) == "1":
    _quiet_this_process()
