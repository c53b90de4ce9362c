"""Bad check specs fail at suite load with one line naming the file and the field."""

from __future__ import annotations

import pytest
import yaml

from harness.config.files import load_suite
from harness.config.run import DEFAULT_CANDIDATE_LANGUAGES
from harness.errors import UserError


def _suite(tmp_path, check, items=True):
    data = {"suite": "s", "items": []}
    if items:
        data["items"] = [
            {
                "id": "a",
                "system": "s",
                "user": "u",
                "reminder": "r",
                "restatement": "t",
                "checks": [check],
            }
        ]
    path = tmp_path / "suite.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize(
    ("check", "message"),
    [
        ({"type": "ifeval", "id": "punctuation:no_semicolon"}, "unknown IFEval instruction id"),
        (
            {"type": "ifeval", "id": "keywords:existence", "kwargs": {"words": ["x"]}},
            "takes no kwarg 'words'",
        ),
        ({"type": "ifeval", "id": "keywords:forbidden_words"}, "needs kwarg(s): forbidden_words"),
        (
            {
                "type": "ifeval",
                "id": "keywords:forbidden_words",
                "kwargs": {"forbidden_words": "x"},
            },
            "list of strings",
        ),
        (
            {
                "type": "ifeval",
                "id": "keywords:frequency",
                "kwargs": {"keyword": "a", "frequency": 2, "relation": "more"},
            },
            "rejects kwargs",
        ),
        ({"type": "language", "target": "xx"}, "not an ISO 639-1 language code"),
        # kl (Greenlandic) is ISO 639-1, but lingua cannot detect it
        ({"type": "language", "target": "kl"}, "that the language detector (lingua) supports"),
        ({"type": "language", "target": "fr", "scope": "response"}, "Input should be 'window'"),
        (
            {"type": "language", "target": "fr", "threshold": 0.5},
            "'threshold' and 'min_letters' were replaced: the language check now passes when its "
            "target ranks first among the candidates by 'margin' (default 0.02); set 'margin' / "
            "'abstain_below'",
        ),
        ({"type": "language", "target": "fr", "min_letters": 20}, "set 'margin' / 'abstain_below'"),
        (
            {"type": "vibes"},
            "unknown check type: 'vibes' (expected one of 'ifeval', 'judge', 'language', ",
        ),
        ({"type": "judge", "rule": " "}, "judge.rule': String should match pattern"),
        ({"type": "judge"}, "a judge check needs `sentence` (the text it judges) or `rule`"),
        ({"type": "judge", "rule": "r", "judge": {"engine": "tgi"}}, "Input should be 'vllm'"),
        ({"type": "judge", "rule": "r", "judge": {"model": "gpt-17"}}, "unknown model 'gpt-17'"),
        (
            {"type": "judge", "rule": "r", "judge": {"base_url": "http://h/v1"}},
            "base_url is for a judge with engine: openai",
        ),
        ({"target": "fr"}, "missing 'type'"),
        ({"type": "ifeval"}, "ifeval.id': Field required"),
        ({"type": "regex_must", "pattern": "(unclosed"}, "regex does not compile"),
        ({"type": "script", "script": "Klingon"}, "unknown script"),
    ],
)
def test_bad_check_is_one_line_error(tmp_path, check, message):
    path = _suite(tmp_path, check)
    with pytest.raises(UserError) as info:
        load_suite(path)
    text = str(info.value)
    assert message in text and str(path) in text and "items.0.checks.0" in text
    assert "\n" not in text


def test_empty_suite_is_rejected(tmp_path):
    path = _suite(tmp_path, None, items=False)
    with pytest.raises(UserError, match="field 'items'"):
        load_suite(path)


def test_ifeval_scope_defaults_to_registry_locality(tmp_path):
    from harness.scoring import item_checks

    suite = load_suite(_suite(tmp_path, {"type": "ifeval", "id": "punctuation:no_comma"}))
    assert item_checks(suite.items[0])[0].scope == "window"
    suite = load_suite(
        _suite(
            tmp_path,
            {
                "type": "ifeval",
                "id": "length_constraints:number_paragraphs",
                "kwargs": {"num_paragraphs": 2},
            },
        )
    )
    assert item_checks(suite.items[0])[0].scope == "response"


STABLE_IDS = [
    ({"type": "language", "target": "FR"}, "language:fr", "window"),
    ({"type": "ifeval", "id": "punctuation:no_comma"}, "ifeval:punctuation:no_comma", "window"),
    (
        {"type": "ifeval", "id": "punctuation:no_comma", "scope": "response"},
        "ifeval:punctuation:no_comma#2",
        "response",
    ),
    ({"type": "regex_must", "pattern": "^#", "name": "heading"}, "regex_must:heading", "window"),
    ({"type": "regex_must_not", "pattern": r"\bTODO\b"}, r"regex_must_not:\bTODO\b", "window"),
    ({"type": "persona", "name": "Nora", "rivals": ["Bob"]}, "persona:Nora@response", "response"),
    ({"type": "persona", "name": "Nora", "scope": "window"}, "persona:Nora", "window"),
    ({"type": "script", "script": "Cyrillic"}, "script:Cyrillic", "window"),
    ({"type": "max_sentence_words", "max_words": 20}, "max_sentence_words:20", "window"),
    ({"type": "max_sentence_words", "max_words": 20}, "max_sentence_words:20#2", "window"),
    ({"type": "max_sentence_words", "max_words": 20}, "max_sentence_words:20#3", "window"),
    (
        {"type": "judge", "rule": "Never mention a competitor."},
        "judge:Never mention a competitor.",
        "window",
    ),
    (
        {"type": "judge", "rule": "Stay polite.", "name": "polite", "scope": "response"},
        "judge:polite",
        "response",
    ),
]


def test_check_ids_and_scopes_are_stable(tmp_path):
    # The ids are the `check` column of windows.csv: runs and reports compare them across versions.
    from harness.scoring import item_checks

    path = tmp_path / "suite.yaml"
    item = {"id": "a", "system": "s", "user": "u", "reminder": "r", "restatement": "t"}
    item["checks"] = [check for check, _, _ in STABLE_IDS]
    path.write_text(yaml.safe_dump({"suite": "s", "items": [item]}))
    checks = item_checks(load_suite(path).items[0])
    assert [(check.id, check.scope) for check in checks] == [
        (check_id, scope) for _, check_id, scope in STABLE_IDS
    ]


def test_every_registered_type_is_a_suite_check_type(tmp_path):
    from harness.checks import CHECK_TYPES

    assert sorted(CHECK_TYPES) == [
        "ifeval",
        "judge",
        "language",
        "max_sentence_words",
        "persona",
        "regex_must",
        "regex_must_not",
        "script",
    ]
    with pytest.raises(UserError) as info:
        load_suite(_suite(tmp_path, {"type": "vibes"}))
    assert f"(expected one of {', '.join(repr(name) for name in sorted(CHECK_TYPES))})" in str(
        info.value
    )


def test_register_refuses_a_type_name_taken_by_another_check():
    from typing import Literal

    from harness.checks import CHECK_TYPES, Check, register

    before = dict(CHECK_TYPES)
    with pytest.raises(TypeError, match="check type 'script' is registered twice"):

        @register
        class OtherScript(Check):
            type: Literal["letters_only", "script"]

    with pytest.raises(TypeError, match="must be a Literal"):

        @register
        class Untyped(Check):
            pass

    assert before == CHECK_TYPES  # a refused class registers none of its names


def test_suite_checks_compare_and_round_trip_by_spec(tmp_path):
    from harness.config.run import TaskSuite

    path = tmp_path / "suite.yaml"
    item = {"id": "a", "system": "s", "user": "u", "reminder": "r", "restatement": "t"}
    item["checks"] = [check for check, _, _ in STABLE_IDS]
    path.write_text(yaml.safe_dump({"suite": "s", "items": [item]}))
    suite = load_suite(path)
    assert load_suite(path) == suite
    assert suite.items[0].checks[1].model_dump()["id"] == "punctuation:no_comma"
    assert TaskSuite.model_validate(suite.model_dump()) == suite


def test_language_check_detects_among_the_run_candidates_and_its_target(tmp_path):
    from harness.scoring import item_checks

    suite = load_suite(_suite(tmp_path, {"type": "language", "target": "ru"}))
    (check,) = item_checks(suite.items[0], ["fr", "en"])
    assert check.candidates == ["en", "fr", "ru"]
    assert suite.items[0].checks[0].candidates == sorted({"ru", *DEFAULT_CANDIDATE_LANGUAGES})
