"""The zoo builds real folders: embedded conversion, untrained twins, tiny models, listing."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from safetensors.numpy import load_file

from harness.models import resolve_model

pytestmark = pytest.mark.integration


def test_embedded_folder_has_weights_tokenizer_and_chat_template(embedded_model_path):
    config = json.loads((embedded_model_path / "config.json").read_text())
    assert config["num_hidden_layers"] == 30 and config["hidden_size"] == 576
    assert "quantization_config" not in config
    assert (embedded_model_path / "tokenizer.json").exists()
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(embedded_model_path)
    rendered = tokenizer.apply_chat_template(
        [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}],
        tokenize=False,
        add_generation_prompt=True,
    )
    assert rendered.endswith("<|im_start|>assistant\n") and "<|im_start|>system\nS" in rendered


def test_untrained_twin_is_seeded_and_differs_from_trained(tiny_model_path):
    one = resolve_model("untrained:tiny-random-llama@1")
    again = resolve_model("untrained:tiny-random-llama@1")
    two = resolve_model("untrained:tiny-random-llama@2")
    assert one.path == again.path and one.path != two.path
    w1 = load_file(one.path / "model.safetensors")
    w2 = load_file(two.path / "model.safetensors")
    base = load_file(tiny_model_path / "model.safetensors")
    key = "model.layers.0.self_attn.q_proj.weight"
    assert w1[key].shape == base[key].shape
    assert not (w1[key] == w2[key]).all() and not (w1[key] == base[key]).all()
    assert json.loads((one.path / "config.json").read_text())["num_hidden_layers"] == 4


def test_models_list_and_prepare_cli(tiny_model_path):
    listing = subprocess.run(
        [sys.executable, "-m", "harness", "models", "list"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert listing.returncode == 0, listing.stderr
    for name in ("smollm2-135m-instruct", "untrained:smollm2-135m-instruct", "tiny-random-llama"):
        assert name in listing.stdout
    assert "134.5M" in listing.stdout  # parameters of the embedded model
    prepared = subprocess.run(
        [sys.executable, "-m", "harness", "models", "prepare", "tiny-random-llama"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert prepared.returncode == 0 and prepared.stdout.strip() == str(tiny_model_path)
    bad = subprocess.run(
        [sys.executable, "-m", "harness", "models", "prepare", "gpt-17"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "unknown model" in bad.stderr


@pytest.mark.parametrize(
    ("name", "fixture"),
    [
        ("smollm2-135m-instruct", "embedded_model_path"),
        ("untrained:smollm2-135m-instruct", "untrained_model_path"),
        ("tiny-random-llama", "tiny_model_path"),
    ],
)
def test_a_plan_reads_the_built_folders_config_and_tokenizer_without_building(
    name, fixture, request, tmp_path, monkeypatch
):
    """`model_files` on an empty cache: the config.json and tokenizer files the built folder
    holds (what a plan reads: context, depth, architecture, chat template, token ids), and
    no model folder written."""
    from harness.models import locate_model, model_files

    built = request.getfixturevalue(fixture)
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path))
    files = model_files(locate_model(name))
    assert not (tmp_path / "models").exists()
    assert json.loads((files / "config.json").read_text()) == json.loads(
        (built / "config.json").read_text()
    )
    assert (files / "tokenizer.json").read_bytes() == (built / "tokenizer.json").read_bytes()
    # `local_files_only` records how the tokenizer was loaded (offline in the test session)
    settings = [
        {k: v for k, v in json.loads((folder / "tokenizer_config.json").read_text()).items()
         if k != "local_files_only"}
        for folder in (files, built)
    ]  # fmt: skip
    assert settings[0] == settings[1]
