"""Bad check specs fail at suite load with one line naming the file and the field."""

from __future__ import annotations

import pytest
import yaml

from harness.config import load_suite
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
        ({"type": "language", "target": "kl"}, "not supported by the language detector"),
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
