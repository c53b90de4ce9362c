"""`harness init`: the two files it writes load as they are (any system prompt, verbatim), every
commented example is valid once uncommented, and it never overwrites."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from harness.config.files import load_run_config_and_suites
from harness.config.gate_specs import gate_problem
from harness.config.run import TaskItem, policy_label

PROMPTS = {
    "plain": "You are a helpful assistant for Acme Corp.",
    "yaml syntax": "key: value # not a comment\n- \"quoted\" and 'single'\n&anchor *alias ---\n...",
    "leading spaces and tabs": "   indented first line\n\tthen a tab\n  ",
    "trailing newlines": "Rules:\n1. Be brief.\n\n\n",
    "unicode": "Réponds en français 🇫🇷. 日本語も。 Ω≈ç√ – “quotes”",
    "line separators": "one\u2028two\x85three\r\nfour\rfive",
    "only newline inside": "a\nb",
    "looks like a number": "1e3",
}


@pytest.fixture
def in_tmp(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("case", sorted(PROMPTS))
def test_written_files_load_and_hold_the_prompt_verbatim(case, in_tmp, run_cli):
    prompt = PROMPTS[case]
    code, stdout, stderr = run_cli(["init", "acme", "--system", prompt])
    assert code == 0, stderr
    first, language, rules = stdout.strip().splitlines()
    assert first == "wrote acme.yaml and acme.suite.yaml; run: harness run acme.yaml"
    assert language.startswith("language check: the prompt ")
    assert re.fullmatch(r"\d+ rule\(s\) checked: .+", rules), rules
    config, (suite,) = load_run_config_and_suites(in_tmp / "acme.yaml")
    assert [item.system for item in suite.items] == [prompt] * 6


def test_a_prompt_file_is_read_as_text(in_tmp, run_cli):
    # a text file: Windows line ends read as "\n", like any file Python opens as text
    (in_tmp / "prompt.txt").write_bytes("Règle 1 : « oui ».\r\nRule 2: no.\r\n".encode())
    assert run_cli(["init", "acme", "--system", "@prompt.txt"])[0] == 0
    _, (suite,) = load_run_config_and_suites(in_tmp / "acme.yaml")
    assert suite.items[0].system == "Règle 1 : « oui ».\nRule 2: no.\n"


def test_the_starter_config_and_suite(in_tmp, run_cli):
    code, _, stderr = run_cli(["init", "acme", "--system", "Always answer in English."])
    assert code == 0, stderr
    config, (suite,) = load_run_config_and_suites(in_tmp / "acme.yaml")
    assert config.name == "acme" and config.models == ["smollm2-135m-instruct"]
    assert [policy_label(p) for p in config.policies] == ["none", "periodic-64-user"]
    talk_policies = [policy_label(p) for p in config.conversation_policies]
    assert talk_policies == ["none", "periodic-turns2-system", "adaptive-turn-system"]
    # sized for minutes on a CPU: 4 requests x 2 policies x 3 samples x 256 tokens, and
    # 2 conversations x 3 policies x 3 samples x 5 replies of at most 48 tokens
    gen = config.generation
    assert (config.samples, gen.max_tokens, gen.turn_tokens) == (3, 256, 48)
    assert config.probe.enabled
    assert [(g.metric, g.policy, g.min) for g in config.gates] == [("auc", "none", 0.5)]
    ids = [item.id for item in suite.items]
    assert ids == ["story", "guide", "explanation", "list", "conv-trip", "conv-bread"]
    assert len({item.user for item in suite.items}) == 6
    for item in suite.items:  # no reminder: periodic repeats the prompt; no restate policy
        assert item.reminder is None and item.restatement is None
        assert [c.id for c in item.checks] == ["language:en"]
        assert [(c.rule, c.sentence) for c in item.checks] == [
            ("language-en", "Always answer in English.")
        ]
    talks = [item for item in suite.items if item.is_conversation]
    assert [item.n_turns for item in talks] == [5, 5]
    assert [[t.pressure for t in item.turns] for item in talks] == [
        [False] * 4,
        [False, True, False, False],  # turn 3 of the second conversation
    ]
    assert all(item.n_turns * gen.turn_tokens <= gen.max_tokens for item in talks)


def _commented(text: str, key: str) -> list[dict]:
    """The commented-out list entries `# - {key: ...}` of a YAML file, parsed as YAML."""
    lines = re.findall(rf"^\s*# (- \{{{key}: .*)$", text, flags=re.M)
    return [yaml.safe_load(line)[0] for line in lines]


def test_every_check_type_is_an_example_and_each_is_valid_uncommented(in_tmp, run_cli):
    from harness.checks import CHECK_TYPES

    assert run_cli(["init", "acme", "--system", "Be nice."])[0] == 0
    text = (in_tmp / "acme.suite.yaml").read_text()
    examples = _commented(text.split("# Other check types")[1], "type")
    types = {e["type"] for e in examples} | {"language"}  # language is the active one
    assert len(examples) == 8
    assert types >= set(CHECK_TYPES) | {"judge"}
    for example in examples:
        if example["type"] in CHECK_TYPES:  # judge only once that check type exists
            TaskItem(id="x", system="s", user="u", checks=[example])


def test_each_commented_gate_is_valid_uncommented(in_tmp, run_cli):
    assert run_cli(["init", "acme", "--system", "Be nice."])[0] == 0
    config, _ = load_run_config_and_suites(in_tmp / "acme.yaml")
    gates = _commented((in_tmp / "acme.yaml").read_text(), "metric")
    labels = [policy_label(p) for p in config.policies]
    assert len(gates) == 4
    for gate in gates:
        spec = type(config.gates[0]).model_validate(gate)
        assert gate_problem(spec, labels, config.models, config.probe.enabled) == ""


def test_never_overwrites(in_tmp, run_cli):
    (in_tmp / "acme.suite.yaml").write_text("mine")
    code, stdout, stderr = run_cli(["init", "acme", "--system", "Be nice."])
    assert code == 2 and stdout == ""
    assert (
        stderr == "error: acme.suite.yaml: already exists (harness init never overwrites a file)\n"
    )
    assert (in_tmp / "acme.suite.yaml").read_text() == "mine"
    assert not (in_tmp / "acme.yaml").exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["init", "my run", "--system", "x"], "NAME 'my run': use letters, digits"),
        (["init", "acme", "--system", "@missing.txt"], "file not found: missing.txt"),
        (["init", "acme", "--system", "  "], "--system: the system prompt is empty"),
        (["init", "acme", "--system", "x", "--model", "gpt-17"], "unknown model 'gpt-17'"),
    ],
)
def test_bad_input_one_line_exit_2_nothing_written(argv, message, in_tmp, run_cli):
    code, _, stderr = run_cli(argv)
    assert code == 2 and stderr.count("\n") == 1 and message in stderr, stderr
    assert list(in_tmp.iterdir()) == []
