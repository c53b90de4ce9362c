"""The labelled test set (tests/data/scoring): every constraint check is right on every case,
and the language check is >= 95 % accurate on determinable windows in >= 8 languages."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml
from pydantic import TypeAdapter

from harness.checks import Check, CheckSpec
from harness.checks.language import LanguageCheck

DATA = Path(__file__).parents[1] / "data" / "scoring"
CASES = yaml.safe_load((DATA / "check_cases.yaml").read_text())["cases"]
WINDOWS = yaml.safe_load((DATA / "language_windows.yaml").read_text())["windows"]
SPEC = TypeAdapter(CheckSpec)


def _build(raw: dict) -> Check:
    return SPEC.validate_python(raw)


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c['check']['type']}:{c['text'][:25]}")
def test_constraint_check_on_labelled_case(case):
    check = _build(case["check"])
    result = check.score(case["text"])
    assert check.passed(result) is case["expected"], result.reason
    assert math.isnan(result.value) == (case["expected"] is None)


def test_every_check_type_has_positive_and_negative_cases():
    kinds: dict[str, set] = {}
    for case in CASES:
        kind = case["check"]["type"]
        kind = "regex" if kind.startswith("regex") else kind
        kinds.setdefault(kind, set()).add(case["expected"])
    for kind in ("regex", "persona", "script", "max_sentence_words", "ifeval"):
        assert {True, False} <= kinds[kind], kind


def _language_verdicts():
    checks: dict[str, LanguageCheck] = {}
    verdicts = []  # (window id, target, expected, got)
    for window in WINDOWS:
        lang = window["lang"]
        if lang is None:
            continue
        other = window.get("other") or ("fr" if lang == "en" else "en")
        for target, expected in ((lang, True), (other, False)):
            check = checks.setdefault(
                target,
                LanguageCheck(type="language", target=target),
            )
            verdicts.append(
                (window["id"], target, expected, check.passed(check.score(window["text"])))
            )
    return verdicts


def test_language_check_accuracy_on_labelled_windows():
    verdicts = _language_verdicts()
    languages = {w["lang"] for w in WINDOWS if w["lang"]}
    assert len(languages) >= 8
    wrong = [v for v in verdicts if v[2] != v[3]]
    accuracy = 1 - len(wrong) / len(verdicts)
    assert accuracy >= 0.95, wrong


def test_language_check_undetermined_below_abstain_below():
    check = LanguageCheck(type="language", target="fr")
    for window in WINDOWS:
        if window["lang"] is None:
            result = check.score(window["text"])
            assert math.isnan(result.value) and check.passed(result) is None, window["id"]


def test_language_check_batch_matches_single():
    check = LanguageCheck(type="language", target="de")
    texts = [w["text"] for w in WINDOWS[:10]]
    batch = check.score_many(texts)
    single = [check.score(t) for t in texts]
    assert [r.value for r in batch] == pytest.approx([r.value for r in single], nan_ok=True)


def test_language_detector_is_built_once():
    from harness.checks.language import detector

    assert detector(["fr", "en"]) is detector(["en", "fr"])
