"""Malformed configs: each gets one line naming file, field and what was expected, exit code 2,
no traceback, and no output folder."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from harness.config.files import load_run_config, load_suite
from harness.config.run import policy_label
from harness.errors import UserError

DATA = Path(__file__).parent.parent / "data" / "configs"
VALID = yaml.safe_load((DATA / "valid.yaml").read_text())
SUITE = yaml.safe_load((DATA / "mini-suite.yaml").read_text())


def _set(path: str, value):
    def mutate(config, suite):
        *parents, leaf = path.split(".")
        target = config
        for key in parents:
            target = target.setdefault(key, {})
        target[leaf] = value

    return mutate


def _suite(mutate_item):
    def mutate(config, suite):
        mutate_item(suite["items"][0])

    return mutate


CASES = {
    "unknown top-level key": (
        _set("modles", ["x"]),
        "field 'modles': unknown key (did you mean 'models'?)",
    ),
    "unknown nested key": (
        _set("generation.temprature", 0.5),
        "field 'generation.temprature': unknown key (did you mean 'temperature'?)",
    ),
    "unknown key of a policy": (
        _set("policies", [{"name": "periodic", "evry": 8}]),
        "field 'policies.0.periodic.evry': unknown key (did you mean 'every'?)",
    ),
    "unknown key of an item": (
        _suite(lambda item: item.update(sytem="Be brief.")),
        "field 'items.0.sytem': unknown key (did you mean 'system'?)",
    ),
    "wrong type": (_set("samples", "four"), "field 'samples'"),
    "zero max_tokens": (_set("generation.max_tokens", 0), "generation.max_tokens"),
    "negative max_tokens": (_set("generation.max_tokens", -5), "greater than 0"),
    "zero samples": (_set("samples", 0), "field 'samples'"),
    "unknown model": (_set("models", ["gpt-17"]), "unknown model 'gpt-17'"),
    "nested untrained": (_set("models", ["untrained:untrained:x"]), "cannot be nested"),
    "unknown policy": (_set("policies", [{"name": "sometimes"}]), "unknown policy: 'sometimes'"),
    "unknown policy shorthand": (_set("policies", ["always"]), "unknown policy: 'always'"),
    "periodic every 0": (_set("policies", [{"name": "periodic", "every": 0}]), "every"),
    "bad placement": (
        _set("policies", [{"name": "periodic", "every": 8, "placement": "sideways"}]),
        "placement",
    ),
    "empty reminder text": (
        _set("policies", [{"name": "periodic", "every": 8, "text": ""}]),
        "policies.0.periodic.text",
    ),
    "no policies": (_set("policies", []), "field 'policies'"),
    "one policy twice": (
        _set(
            "policies",
            [
                "none",
                {"name": "periodic", "every": 8, "text": "A"},
                {"name": "periodic", "every": 8, "text": "A"},
            ],
        ),
        "policies[2] is the same policy as policies[1] (periodic-8-user-text-",
    ),  # fmt: skip
    "interval level 1": (_set("stats.level", 1.0), "field 'stats.level'"),
    "interval level 0": (_set("stats.level", 0), "field 'stats.level'"),
    "interval level 95": (_set("stats.level", 95), "less than 1"),
    "too few draws": (_set("stats.draws", 10), "field 'stats.draws'"),
    "no models": (_set("models", []), "field 'models'"),
    "missing suite file": (_set("suites", ["nowhere.yaml"]), "nowhere.yaml: file not found"),
    "window larger than max tokens": (_set("scoring.window", 512), "larger than"),
    "not ISO 639-1 in candidates": (
        _set("scoring.languages", ["en", "french"]),
        "'french' is not an ISO 639-1 language code",
    ),
    "candidate language lingua cannot detect": (
        _set("scoring.languages", ["aa", "en"]),
        "field 'scoring.languages.0': 'aa' is not an ISO 639-1 language code that the language "
        "detector (lingua) supports",
    ),
    "negative temperature": (_set("generation.temperature", -1), "generation.temperature"),
    "top_p above 1": (_set("generation.top_p", 1.5), "generation.top_p"),
    "unknown engine": (_set("generation.engine", "tensorrt"), "generation.engine"),
    "unknown item filter": (_set("items", ["mini-de"]), "no task item 'mini-de'"),
    "baseline text missing": (_set("probe.baseline", "text"), "baseline_text"),
    "negative fork position": (_set("forks", {"at": [-1, 32]}), "field 'forks.at.0'"),
    "unsorted fork positions": (
        _set("forks", {"at": [64, 32]}),
        "field 'forks.at': positions must be strictly increasing (got [64, 32])",
    ),
    "repeated fork position": (_set("forks", {"at": [0, 32, 32]}), "strictly increasing"),
    "no fork positions": (_set("forks", {"at": []}), "field 'forks.at'"),
    "zero fork draws": (_set("forks", {"at": [0], "draws": 0}), "field 'forks.draws'"),
    "negative fork draws": (_set("forks", {"at": [0], "draws": -2}), "field 'forks.draws'"),
    "zero fork tokens": (_set("forks", {"at": [0], "tokens": 0}), "field 'forks.tokens'"),
    "fork baseline text missing": (
        _set("forks", {"at": [0], "baseline": "text"}),
        "baseline: 'text' needs baseline_text",
    ),
    "fork policy not in run": (
        _set("forks", {"at": [0], "policies": ["adaptive-64-user"]}),
        "forks.policies: 'adaptive-64-user' is not in the config's policies "
        "(none, restate, periodic-64-user)",
    ),
    "unknown probe backend": (_set("probe.backend", "onnx"), "field 'probe.backend'"),
    "empty system prompt": (_suite(lambda item: item.update(system="  ")), "items.0.system"),
    "empty user prompt": (_suite(lambda item: item.update(user="")), "items.0.user"),
    "language target not ISO": (
        _suite(lambda item: item.update(checks=[{"type": "language", "target": "xx"}])),
        "'xx' is not an ISO 639-1 language code",
    ),
    "regex does not compile": (
        _suite(lambda item: item.update(checks=[{"type": "regex_must", "pattern": "(["}])),
        "regex does not compile",
    ),
    "unknown check type": (
        _suite(lambda item: item.update(checks=[{"type": "vibes"}])),
        "unknown check type: 'vibes'",
    ),
    "empty judge rule": (
        _suite(lambda item: item.update(checks=[{"type": "judge", "rule": ""}])),
        "items.0.checks.0.judge.rule",
    ),
    "unknown judge engine": (
        _suite(
            lambda item: item.update(
                checks=[{"type": "judge", "rule": "r", "judge": {"engine": "tensorrt"}}]
            )
        ),
        "items.0.checks.0.judge.judge.engine",
    ),
    "unknown judge model": (
        _suite(
            lambda item: item.update(
                checks=[{"type": "judge", "rule": "r", "judge": {"model": "gpt-17"}}]
            )
        ),
        "unknown model 'gpt-17'",
    ),
    "empty turns list": (_suite(lambda item: item.update(turns=[])), "items.0.turns"),
    "turn neither text nor mapping": (
        _suite(lambda item: item.update(turns=["ok", 7])),
        "field 'items.0.turns.1': a turn must be a string or {user, pressure}, got 7",
    ),
    "turn with unknown key": (
        _suite(lambda item: item.update(turns=[{"user": "hi", "presure": True}])),
        "field 'items.0.turns.0.presure': unknown key (did you mean 'pressure'?)",
    ),
    "simulated user without turns": (
        _suite(lambda item: item.update(user_simulator={"system": "Be a user.", "turns": 0})),
        "field 'items.0.user_simulator.turns': Input should be greater than 0",
    ),
    "simulated user of an unknown model": (
        _suite(
            lambda item: item.update(
                user_simulator={"system": "Be a user.", "turns": 2, "model": "gpt-17"}
            )
        ),
        "item 'mini-fr': field 'items.0.user_simulator.model': unknown model 'gpt-17'",
    ),
    "turn_tokens above max_tokens": (
        _set("generation.turn_tokens", 1000),
        "turn_tokens (1000) is larger than max_tokens",
    ),
    "periodic with two rhythms": (
        _set("policies", [{"name": "periodic", "every": 8, "every_turns": 2}]),
        "periodic needs exactly one of every (tokens) or every_turns",
    ),
    "adaptive without rhythm": (
        _set("policies", [{"name": "adaptive"}]),
        "adaptive needs exactly one of every (tokens) or on: turn",
    ),
    "between turns inline": (
        _set(
            "conversation_policies", [{"name": "periodic", "every_turns": 2, "placement": "inline"}]
        ),
        "every_turns reminds between turns: placement system or user",
    ),
    "a sequential gate out of reach of max": (
        lambda config, suite: config.update(
            samples={"min": 4, "max": 157},
            gates=[{"metric": "auc", "policy": "none", "min": 0.99}],
        ),
        "gates[0]: auc min 0.99 cannot pass by samples max 157",
    ),
    "duplicate item ids": (
        lambda config, suite: suite["items"].append(copy.deepcopy(suite["items"][0])),
        "duplicate item id 'mini-fr'",
    ),
}


def _write_case(tmp_path: Path, mutate) -> Path:
    config, suite = copy.deepcopy(VALID), copy.deepcopy(SUITE)
    mutate(config, suite)
    (tmp_path / "mini-suite.yaml").write_text(yaml.safe_dump(suite, allow_unicode=True))
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config, allow_unicode=True))
    return path


def test_valid_config_loads():
    config = load_run_config(DATA / "valid.yaml")
    assert [policy_label(p) for p in config.policies] == ["none", "restate", "periodic-64-user"]
    assert config.scoring.languages[0] == "en"
    assert len(load_suite(DATA / "mini-suite.yaml").items) == 2


def test_candidate_language_lingua_cannot_detect_fails_at_load(tmp_path):
    # `aa` (Afar) is ISO 639-1 but lingua cannot detect it: such a config used to load, generate,
    # then die in scoring with an AttributeError and a half-written run folder.
    path = _write_case(tmp_path, _set("scoring.languages", ["aa", "en"]))
    with pytest.raises(UserError) as info:
        load_run_config(path)
    message = str(info.value)
    assert message.startswith(f"{path}: field 'scoring.languages.0': 'aa' ")
    assert "\n" not in message


def test_candidate_languages_are_normalised_to_lowercase(tmp_path):
    path = _write_case(tmp_path, _set("scoring.languages", [" EN", "Fr"]))
    assert load_run_config(path).scoring.languages == ["en", "fr"]


@pytest.mark.parametrize("case", sorted(CASES))
def test_malformed_config_one_line_exit_2_nothing_written(case, tmp_path, run_cli):
    mutate, expected = CASES[case]
    path = _write_case(tmp_path, mutate)
    out_dir = tmp_path / "out"
    code, stdout, stderr = run_cli(["run", str(path), "--out", str(out_dir)])
    assert code == 2
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    assert str(path.parent) in lines[0] and expected in lines[0], lines[0]
    assert not out_dir.exists()


@pytest.mark.parametrize(
    "text, expected",
    [("name: [unclosed\n", "not valid YAML"), ("- just\n- a list\n", "expected a mapping")],
)
def test_unparseable_yaml(text, expected, tmp_path, run_cli):
    path = tmp_path / "broken.yaml"
    path.write_text(text)
    code, _, stderr = run_cli(["run", str(path), "--out", str(tmp_path / "out")])
    assert code == 2 and expected in stderr and len(stderr.strip().splitlines()) == 1


def test_missing_config_file(tmp_path, run_cli):
    code, _, stderr = run_cli(["run", str(tmp_path / "nope.yaml")])
    assert code == 2 and "nope.yaml: file not found" in stderr


def test_a_policy_has_one_label_in_config_records_and_reports():
    from harness.config.run import RunConfig

    config = RunConfig.model_validate(
        {"name": "x", "models": ["m"], "suites": ["s.yaml"],
         "policies": [{"name": "attention_bias", "lam": 1}, {"name": "attention_bias", "lam": 0.5},
                      {"name": "periodic", "every": 128, "placement": "inline"}]}
    )  # fmt: skip
    labels = [policy_label(p) for p in config.policies]
    assert labels == ["attention_bias-1", "attention_bias-0.5", "periodic-128-inline"]
    from harness.policies import policy_run

    assert [policy_run(p, continue_on_eos=True).label for p in config.policies] == labels


def test_two_reminder_texts_under_one_schedule_are_two_policies():
    from harness.config.run import RunConfig

    config = RunConfig.model_validate(
        {"name": "x", "models": ["m"], "suites": ["s.yaml"],
         "policies": ["none", {"name": "periodic", "every": 16, "text": "A"},
                      {"name": "periodic", "every": 16, "text": "B"},
                      {"name": "periodic", "every": 16}]}
    )  # fmt: skip
    labels = config.policy_labels()
    assert len(set(labels)) == 4
    assert labels[1].startswith("periodic-16-user-text-") and labels[1] != labels[2]
    assert labels[3] == "periodic-16-user"  # the items' own reminders: the label gates name
    assert config.policy_spec(labels[2]).text == "B"
