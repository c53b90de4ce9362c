"""Where a transformers model runs and in which precision: the one loader of the hf engine and
the probe's hf backend (`generation.dtype`, `probe.dtype`).

- dtype `auto` resolves to float32 on the CPU, and on CUDA where the float32 weights take at
  most FIT_SHARE of the visible GPUs' free memory (the rest holds activations and the KV cache);
  else bfloat16, or float16 on GPUs without bf16 units. The resolved name is what cache keys
  and the manifest record, so `auto` and the dtype it picks share their cached units.
- On CUDA the model is spread over the visible GPUs by accelerate (`device_map="auto"`), so a
  model larger than one GPU loads; every input goes to the device of the input embeddings
  (`input_device`), and accelerate's hooks move activations between GPUs.
- On the CPU a reduced dtype runs the same code path as on a GPU (the dtype is the point):
  slow on CPUs without bf16 units, but the numerics are the GPU's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, get_args

from harness.config.run import Precision
from harness.errors import UserError
from harness.models.zoo import safetensors_parameters

PRECISIONS: tuple[str, ...] = get_args(Precision)
# `auto` keeps float32 while the float32 weights fit in this share of the GPUs' free memory
FIT_SHARE = 0.6


def cuda_free_bytes() -> int:
    """Free memory summed over the visible CUDA devices (0 without CUDA)."""
    import torch

    if not torch.cuda.is_available():
        return 0
    return sum(torch.cuda.mem_get_info(i)[0] for i in range(torch.cuda.device_count()))


def resolve_dtype(name: str, path: Path, free_bytes: int | None = None) -> str:
    """The dtype `name` stands for with the model at `path` on this machine. `free_bytes`:
    the GPUs' free memory (None: measured now; 0: no GPU, i.e. the CPU)."""
    if name not in PRECISIONS:
        raise UserError(f"dtype must be one of {', '.join(PRECISIONS)}, got '{name}'")
    if name != "auto":
        return name
    free = cuda_free_bytes() if free_bytes is None else free_bytes
    if free == 0 or 4 * safetensors_parameters(Path(path)) <= FIT_SHARE * free:
        return "float32"
    import torch

    return "bfloat16" if torch.cuda.is_bf16_supported() else "float16"


def load_causal_lm(path: Path, dtype: str = "auto") -> Any:
    """The model at `path` in `dtype` (resolved here), eval mode: spread over the GPUs by
    accelerate on CUDA, on the CPU otherwise."""
    import torch
    from transformers import AutoModelForCausalLM

    resolved = resolve_dtype(dtype, path)
    options: dict[str, Any] = {"dtype": getattr(torch, resolved)}
    if torch.cuda.is_available():
        options["device_map"] = "auto"
    return AutoModelForCausalLM.from_pretrained(path, **options).eval()


def input_device(model: Any) -> Any:
    """The device the model's inputs go to: that of its input embeddings (the first GPU of a
    device map)."""
    return model.get_input_embeddings().weight.device


def model_dtype_name(model: Any) -> str:
    """'float32', 'bfloat16', ... of a loaded model."""
    return str(model.dtype).removeprefix("torch.")
