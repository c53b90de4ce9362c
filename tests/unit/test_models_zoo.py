"""Model names, the atomic build and the listing, without loading any model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from harness.errors import UserError
from harness.models import (
    is_untrained,
    parse_model_name,
    split_untrained,
    trained_name,
    untrained_name,
)
from harness.models.build import build_atomically


@pytest.mark.parametrize(
    "name, kind, base, seed",
    [
        ("smollm2-135m-instruct", "embedded", None, None),
        ("untrained:smollm2-135m-instruct", "untrained", "smollm2-135m-instruct", 0),
        ("untrained:tiny-random-llama@7", "untrained", "tiny-random-llama", 7),
        ("tiny-random-qwen2", "tiny", None, None),
        ("HuggingFaceTB/SmolLM2-1.7B-Instruct", "hub", None, None),
    ],
)
def test_parse_model_name(name, kind, base, seed):
    parsed = parse_model_name(name)
    assert (parsed.kind, parsed.base, parsed.seed) == (kind, base, seed)


@pytest.mark.parametrize(
    "name, message",
    [
        ("", "model name is empty"),
        ("gpt-17", "unknown model 'gpt-17'"),
        ("untrained:gpt-17", "unknown model 'gpt-17'"),
        ("untrained:untrained:tiny-random-llama", "cannot be nested"),
        ("./no/such/folder", "unknown model"),
    ],
)
def test_bad_model_names(name, message):
    with pytest.raises(UserError, match=message):
        parse_model_name(name)


@pytest.mark.parametrize(
    "name, split, trained",
    [
        ("untrained:tiny-random-qwen2@7", ("tiny-random-qwen2", 7), "tiny-random-qwen2"),
        ("untrained:org/model", ("org/model", 0), "org/model"),
        ("untrained:./my@model@-3", ("./my@model", -3), "./my@model"),
        ("org/model@v2", None, "org/model@v2"),  # an @ outside a twin name is the name's own
        ("tiny-random-llama", None, "tiny-random-llama"),
    ],
)
def test_twin_names_are_read_by_the_one_parser(name, split, trained):
    assert split_untrained(name) == split and is_untrained(name) == (split is not None)
    assert trained_name(name) == trained
    assert parse_model_name(untrained_name("tiny-random-llama")).base == "tiny-random-llama"


def test_local_folder_needs_config(tmp_path):
    with pytest.raises(UserError, match="has no config.json"):
        parse_model_name(str(tmp_path))
    (tmp_path / "config.json").write_text("{}")
    assert parse_model_name(str(tmp_path)).kind == "local"


def test_build_is_atomic_when_killed_or_failing(tmp_path):
    dest = tmp_path / "models" / "thing"

    def failing(out: Path):
        (out / "model.safetensors").write_text("half")
        raise RuntimeError("killed mid-build")

    with pytest.raises(RuntimeError):
        build_atomically(dest, failing)
    assert not dest.exists()
    assert list(dest.parent.glob(".thing.*")) == []
    # a SIGKILL leaves a .partial folder behind: the next build ignores and removes it
    stale = dest.parent / ".thing.deadbeef.partial"
    stale.mkdir()
    (stale / "config.json").write_text("{}")
    calls = []
    build_atomically(dest, lambda out: (calls.append(1), (out / "config.json").write_text("{}")))
    assert (dest / "config.json").exists() and not stale.exists()
    build_atomically(dest, lambda out: calls.append(2))  # second call: cached, not rebuilt
    assert calls == [1]


def test_listing_counts_parameters_of_every_shard(tmp_path):
    import numpy as np
    from safetensors.numpy import save_file

    from harness.models import model_info

    (tmp_path / "config.json").write_text('{"num_hidden_layers": 2, "hidden_size": 8}')
    save_file(
        {"embed": np.zeros((10, 8), np.float32), "norm": np.zeros(8, np.float16)},
        str(tmp_path / "model-00001-of-00002.safetensors"),
        metadata={"format": "pt"},  # the header's __metadata__ entry is not a tensor
    )
    save_file(
        {"scale": np.zeros((), np.float32)}, str(tmp_path / "model-00002-of-00002.safetensors")
    )
    info = model_info(str(tmp_path))
    assert info.parameters == 10 * 8 + 8 + 1
    assert (info.layers, info.hidden_size, info.source) == (2, 8, "local")


def test_gguf_conversion_parses_each_file_once_then_restores_gguf(tmp_path):
    """transformers opens the GGUF three times per conversion; inside `gguf_parsed_once` the
    three share one reader (the same fields), and gguf's own names come back afterwards."""
    gguf = pytest.importorskip("gguf")
    from harness.models.build import gguf_parsed_once

    path = tmp_path / "tiny.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(2)
    writer.add_tensor("token_embd.weight", np.arange(8, dtype=np.float32).reshape(2, 4))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    original_reader, original_map = gguf.GGUFReader, gguf.get_tensor_name_map
    with gguf_parsed_once():
        first, again = gguf.GGUFReader(path), gguf.GGUFReader(str(path))
        assert first is again
        assert gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, 2) is gguf.get_tensor_name_map(
            gguf.MODEL_ARCH.LLAMA, 2
        )
        fresh = original_reader(path)
        assert first.fields.keys() == fresh.fields.keys()
        assert np.array_equal(first.tensors[0].data, fresh.tensors[0].data)
    assert gguf.GGUFReader is original_reader
    assert gguf.get_tensor_name_map is original_map
