"""The shipped task suites validate, cover what the issue asks, and restate in the target."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.checks.language import LanguageCheck
from harness.config.files import load_suite
from harness.scoring import item_checks, item_index

TASKS = Path(__file__).parents[2] / "tasks"
SUITES = {name: load_suite(TASKS / f"{name}.yaml") for name in ("languages", "formats", "personas")}


def test_at_least_30_items_with_unique_ids():
    index = item_index(list(SUITES.values()))
    assert len(index) >= 30


def test_languages_cover_the_required_targets():
    targets = {
        check.target
        for item in SUITES["languages"].items
        for check in item.checks
        if isinstance(check, LanguageCheck)
    }
    assert {"fr", "es", "de", "it", "pt", "ru"} <= targets


@pytest.mark.parametrize("item", SUITES["languages"].items, ids=lambda i: i.id)
def test_language_items_ask_in_english_and_restate_in_the_target(item):
    (spec,) = [c for c in item.checks if isinstance(c, LanguageCheck)]
    check = LanguageCheck(type="language", target=spec.target)
    assert check.passed(check.score(item.restatement)), item.restatement
    assert check.passed(check.score(item.reminder)), item.reminder
    english = LanguageCheck(type="language", target="en")
    assert english.passed(english.score(item.user)), item.user


def test_formats_cover_each_kind():
    ids = {check.id for item in SUITES["formats"].items for check in item_checks(item)}
    assert "ifeval:change_case:english_lowercase" in ids
    assert "ifeval:punctuation:no_comma" in ids
    assert "ifeval:keywords:forbidden_words" in ids
    assert "regex_must_not:paragraphs-start-tip" in ids
    assert "regex_must_not:bullet-lines-only" in ids


@pytest.mark.parametrize("item", SUITES["formats"].items, ids=lambda i: i.id)
def test_format_restatement_follows_its_own_window_checks(item):
    # The restatement is the start of the answer, written in the format it asks for.
    for check in item_checks(item):
        if check.scope == "window":
            assert check.passed(check.score(item.restatement)) is not False, check.id


@pytest.mark.parametrize("item", SUITES["personas"].items, ids=lambda i: i.id)
def test_persona_items_have_name_rival_and_sign_off(item):
    ids = [check.id for check in item_checks(item)]
    assert any(i.startswith("persona:") and "@" not in i for i in ids)
    assert "ifeval:startend:end_checker" in ids
    end = next(c for c in item.checks if c.id == "ifeval:startend:end_checker")
    assert end.kwargs["end_phrase"] in item.system and end.kwargs["end_phrase"] in item.reminder
    rivals = next(c for c in item.checks if c.type == "persona" and c.scope == "window").rivals
    assert not any(re.search(re.escape(r), item.restatement) for r in rivals)


def test_every_item_has_long_form_request():
    for suite in SUITES.values():
        for item in suite.items:
            assert len(item.user.split()) >= 15, item.id
