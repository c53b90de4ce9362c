"""docs/config.md is the rendering of the config models (harness/config/docs.py)."""

from __future__ import annotations

from harness.config.docs import COMMAND, DOC, default_text, field_comments, render, type_text
from harness.config.run import GenerationConfig, RunConfig


def test_docs_config_md_is_the_rendering_of_the_models():
    assert DOC.read_text(encoding="utf-8") == render(), (
        f"docs/config.md is stale: run `{COMMAND}` (with PYTHONPATH at this checkout) after "
        "changing a config model, and commit the file"
    )


def test_every_field_of_every_section_is_listed():
    text = render()
    for name, info in GenerationConfig.model_fields.items():
        assert f"| `{info.alias or name}` |" in text.split("## GenerationConfig")[1]
    for section in ("RunConfig", "TaskSuite", "TaskItem", "ProbeConfig", "GateSpec",
                    "PeriodicPolicy", "LanguageCheck", "SampleRange"):  # fmt: skip
        assert f"\n## {section}\n" in text


def test_a_field_reads_its_comments_type_and_default():
    comments = field_comments(RunConfig)
    assert comments["items"] == "subset of item ids; None: every item of every suite"
    # the lines above a field, joined
    assert comments["conversation_policies"].startswith("Conversation items run under these")
    probe = RunConfig.model_fields["probe"]
    assert type_text(probe.annotation) == "[ProbeConfig](#probeconfig)"
    assert default_text(GenerationConfig.model_fields["max_tokens"]) == "`512`"
    assert default_text(GenerationConfig.model_fields["continue_on_eos"]) == "`false`"
    assert default_text(RunConfig.model_fields["name"]) == "required"
    row = next(line for line in render().splitlines() if line.startswith("| `top_p` |"))
    assert row == "| `top_p` | number | `0.95` | gt 0, le 1 |  |"
