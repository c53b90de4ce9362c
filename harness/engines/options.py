"""The `make_engine` options of a generation config: the run's engines, the engine pool's and
the judges' (a judge without its own engine runs on the run's, with all its options)."""

from __future__ import annotations

from harness.config import GenerationConfig
from harness.endpoint import endpoint_of


def engine_options(gen: GenerationConfig) -> dict:
    """`make_engine(gen.engine, path, **engine_options(gen))` for this generation config."""
    if gen.engine == "vllm":
        return {
            "max_model_len": gen.max_model_len,
            "tensor_parallel_size": gen.tensor_parallel_size,
            "pipeline_parallel_size": gen.pipeline_parallel_size,
        }
    if gen.engine == "openai":
        return {**endpoint_of(gen).options(), "max_model_len": gen.max_model_len}
    return {"max_model_len": gen.max_model_len, "dtype": gen.dtype}
