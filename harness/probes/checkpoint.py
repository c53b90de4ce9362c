"""The probed model on the harness side: the whole model for the hf backend, or only its final
norm and output head for the vllm backend.

vLLM hands out the last decoder layer's output before the final norm (the norm is fused into
its forward), and no logits of prompt positions. The vllm backend therefore rebuilds the two
modules that turn that state into hidden-state index L and into next-token distributions,
with transformers' own classes (so a model's norm variant and logit soft-capping are the
ones the hf backend runs) and the checkpoint's own weights, read tensor by tensor from its
safetensors files: the decoder's weights are never loaded here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from harness.engines.device import load_causal_lm
from harness.errors import UserError
from harness.probes.head import output_head
from harness.probes.hooks import decoder_parts


def load_probe_model(path: Path, dtype: str = "auto") -> Any:
    """The hf backend's model in `dtype` (`probe.dtype`; `auto`: float32 on the CPU and where
    it fits the GPUs, `harness.engines.device`), spread over the visible GPUs by accelerate
    (`device_map="auto"`) on CUDA, so a model larger than one GPU still loads. Below float32
    the probe compares states and logits in float32 and measures its own rounding floor
    (`harness.probes.floor`)."""
    return load_causal_lm(path, dtype)


def _weight_files(path: Path) -> dict[str, Path]:
    """Tensor name -> the safetensors file holding it (sharded or single-file checkpoints)."""
    index = path / "model.safetensors.index.json"
    if index.is_file():
        weight_map = json.loads(index.read_text())["weight_map"]
        return {name: path / file for name, file in weight_map.items()}
    single = path / "model.safetensors"
    if not single.is_file():
        raise UserError(f"{path}: the vllm probe backend needs safetensors weights")
    from safetensors import safe_open

    with safe_open(single, framework="pt") as handle:
        return dict.fromkeys(handle.keys(), single)


def _read(files: dict[str, Path], name: str) -> torch.Tensor:
    from safetensors import safe_open

    with safe_open(files[name], framework="pt") as handle:
        return handle.get_tensor(name).float()


class FinalHead:
    """Final norm + output head of a checkpoint, float32 on the CPU.

    `norm(states)`: pre-norm states (..., d) of the last decoder layer -> hidden-state index
    L as transformers numbers it; `head`: normed states (2, s, d) -> logits (2, s, V), the
    callable `harness.probes.head.head_gaps` takes.
    """

    def __init__(self, path: Path) -> None:
        from transformers import AutoConfig, AutoModelForCausalLM

        config = AutoConfig.from_pretrained(path)
        with torch.device("meta"):  # the architecture without memory: only two modules are real
            model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        _, norm = decoder_parts(model)
        out = model.get_output_embeddings()
        if out is None:
            raise UserError(f"{path}: the probe needs a model with an output head (lm_head)")
        names = {id(module): name for name, module in model.named_modules()}
        files = _weight_files(path)
        embed_name = names[id(model.get_input_embeddings())] + ".weight"
        for module in (norm, out):
            module.to_empty(device="cpu")
            state = {}
            for key in module.state_dict():
                name = f"{names[id(module)]}.{key}"
                if name not in files and module is out and key == "weight":
                    name = embed_name  # tied embeddings: the head is the input embedding
                if name not in files:
                    raise UserError(f"{path}: tensor '{name}' not found in the checkpoint")
                state[key] = _read(files, name)
            module.load_state_dict(state)
        self.norm = norm.eval()
        self.head = output_head(model)
        self.vocab = int(out.weight.shape[0])

    @torch.no_grad()
    def normed(self, states: torch.Tensor) -> torch.Tensor:
        return self.norm(states.float())
