"""Generation bad input found before anything is written: a system-placement reminder on a
template without a system role, and a token budget beyond the model's context."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.integration
CONFIGS = Path(__file__).parent.parent / "data" / "configs"
# Gemma-style: only user/assistant turns; a system message is an error
NO_SYSTEM_TEMPLATE = (
    "{% for m in messages %}{% if m['role'] == 'system' %}"
    "{{ raise_exception('System role not supported') }}{% endif %}"
    "<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def _config(tmp_path: Path, model: str, **generation) -> Path:
    config = yaml.safe_load((CONFIGS / "valid.yaml").read_text())
    config["models"] = [model]
    config["suites"] = [str(CONFIGS / "mini-suite.yaml")]
    config["generation"] = {"engine": "hf", "max_tokens": 64, **generation}
    config["policies"] = [{"name": "periodic", "every": 32, "placement": "system"}]
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_system_placement_without_system_role_names_the_alternative(
    tmp_path, tiny_model_path, run_cli
):
    model = tmp_path / "no-system-model"
    shutil.copytree(tiny_model_path, model)
    (model / "chat_template.jinja").write_text(NO_SYSTEM_TEMPLATE)
    path = _config(tmp_path, str(model))
    out = tmp_path / "out"
    code, _, err = run_cli(["run", str(path), "--out", str(out)])
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "placement 'system': the model's chat template has no system role" in err
    assert "use placement 'user' or 'inline'" in err
    assert not out.exists()


def test_template_without_system_role_folds_the_system_prompt_into_the_user_turn(
    tmp_path, tiny_model_path
):
    from transformers import AutoTokenizer

    from harness.policies import ChatFormat

    model = tmp_path / "no-system-model"
    shutil.copytree(tiny_model_path, model)
    (model / "chat_template.jinja").write_text(NO_SYSTEM_TEMPLATE)
    chat = ChatFormat(AutoTokenizer.from_pretrained(model))
    assert not chat.supports_system()
    text = chat.tokenizer.decode(chat.prompt_ids("Answer in French.", "Tell me a story."))
    assert text == (
        "<|im_start|>user\nAnswer in French.\n\nTell me a story.<|im_end|>\n<|im_start|>assistant\n"
    )


def test_max_tokens_beyond_context(tmp_path, tiny_model_path, run_cli):
    path = _config(tmp_path, "tiny-random-llama", max_tokens=5000)
    out = tmp_path / "out"
    code, _, err = run_cli(["run", str(path), "--out", str(out)])
    assert code == 2
    assert "exceeds the model's context of 4096 tokens" in err and not out.exists()


def test_user_placement_turn_is_what_the_template_renders(tiny_model_path):
    from transformers import AutoTokenizer

    from harness.policies import ChatFormat

    chat = ChatFormat(AutoTokenizer.from_pretrained(tiny_model_path))
    ids = chat.turn_ids("user", "Reminder: French only. Continue.", last_token=None)
    text = chat.tokenizer.decode(ids)
    assert text == (
        "<|im_end|>\n<|im_start|>user\nReminder: French only. Continue.<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    # after an EOS the turn is already closed: the end-of-turn token is not repeated
    after_eos = chat.turn_ids("user", "Continue.", last_token=chat.eos_id)
    assert chat.tokenizer.decode(after_eos).startswith("\n<|im_start|>user\n")


def test_probe_layer_beyond_the_model_fails_before_generation(tmp_path, tiny_model_path, run_cli):
    path = _config(tmp_path, "tiny-random-llama")
    config = yaml.safe_load(path.read_text())
    config["policies"] = ["none"]
    config["probe"] = {"layers": [1, 9]}  # the tiny model has hidden-state indices 0..4
    path.write_text(yaml.safe_dump(config))
    out = tmp_path / "out"
    code, _, err = run_cli(["run", str(path), "--out", str(out)])
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "probe.layers" in err and "out of range: this model has 0..4" in err
    assert not out.exists()
