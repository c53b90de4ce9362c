"""The language verdict: the target ranked first among the candidates by `margin` (py3langid
alone from LANGID_ALONE_FROM characters, lingua and py3langid averaged below and where
py3langid does not know a candidate; lingua built only when a text needs it), no verdict
below `abstain_below` letters, reasons that name what was found, and the replaced settings
refused."""

from __future__ import annotations

import math

import pytest

from harness.checks.language import (
    DEFAULT_CANDIDATE_LANGUAGES,
    LANGID_ALONE_FROM,
    LanguageCheck,
    _detector_for,
    _langid_for,
    candidate_probabilities,
    detector,
)
from harness.checks.text import letter_count, strip_code


def _check(target: str, **fields) -> LanguageCheck:
    spec = LanguageCheck(type="language", target=target, **fields)
    return spec.bind(spec.base_id, DEFAULT_CANDIDATE_LANGUAGES)


def test_short_english_reply_passes_among_the_twelve_defaults():
    # issue 30: it scored `en 0.34` and failed under the old `confidence >= 0.5` rule
    check = _check("en")
    assert len(check.candidates) == 12
    result = check.score("You can pay by card or bank transfer.")
    assert check.passed(result) is True
    assert result.reason.startswith("en ") and ", next " in result.reason


def test_spanish_reply_fails_french_and_the_reason_names_spanish():
    check = _check("fr")
    result = check.score("Puede pagar con tarjeta o por transferencia bancaria.")
    assert check.passed(result) is False
    assert result.reason.startswith("found es ") and "target fr 0.0" in result.reason
    assert result.value < 0.1  # the value is the target's own probability


def test_no_verdict_below_abstain_below_letters():
    check = _check("de")
    result = check.score("Ja, gut!")  # 5 letters
    assert math.isnan(result.value) and check.passed(result) is None
    assert result.reason == "5 letters < 8"
    # code and URLs are not counted: a reply that is a command is undecided too
    assert check.passed(check.score("`pip install requests` https://example.com/x")) is None
    assert check.passed(_check("de", abstain_below=3).score("Ja, gut!")) is not None


def test_margin_is_the_lead_over_the_next_candidate():
    text = "You can pay by card or bank transfer."
    result = _check("en").score(text)
    lead = float(result.reason.split()[1].rstrip(",")) - float(result.reason.split()[-1])
    assert _check("en", margin=max(lead - 0.02, 0)).passed(result) is True
    strict = _check("en", margin=min(lead + 0.05, 1.0))
    assert strict.passed(strict.score(text)) is False


@pytest.mark.parametrize("old", [{"threshold": 0.5}, {"min_letters": 20}])
def test_replaced_settings_are_refused_with_the_new_names(old):
    with pytest.raises(ValueError, match=r"'threshold' and 'min_letters' were replaced.*'margin'"):
        LanguageCheck(type="language", target="fr", **old)


def test_batch_matches_single_and_values_are_probabilities():
    check = _check("it")
    texts = ["Il pacco arriva domani mattina.", "Ok", "The parcel arrives tomorrow morning."]
    batch = check.score_many(texts)
    single = [check.score(t) for t in texts]
    assert [r.reason for r in batch] == [r.reason for r in single]
    assert [check.passed(r) for r in batch] == [True, None, False]
    assert all(0 <= r.value <= 1 for r in batch if r.determined)


LONG = "Le colis arrive demain matin, merci de votre patience."  # 54 characters
SHORT = "Le colis arrive demain."  # 23 characters


def _lingua_approx(expected: dict) -> object:
    # lingua's own values differ in the last bits from call to call (one text scored 20 times
    # gave 4 values of `fr` 0.54260352049451..., the parallel call 3 others): its n-gram sums
    # run in hash order. py3langid's are compared exactly.
    return pytest.approx(expected, rel=1e-12, abs=1e-15)


def _detectors(codes):
    return detector(codes), _langid_for(frozenset(codes))


def test_a_long_text_is_decided_by_py3langid_alone_a_short_one_by_the_mean():
    codes = sorted(DEFAULT_CANDIDATE_LANGUAGES)
    assert len(LONG) >= LANGID_ALONE_FROM > len(SHORT)
    lingua, langid = _detectors(codes)
    long_probs, short_probs = candidate_probabilities([LONG, SHORT], codes)
    assert long_probs == dict(langid.rank(LONG))  # py3langid's own values, exactly
    first = {
        v.language.iso_code_639_1.name.lower(): v.value
        for v in lingua.compute_language_confidence_values(SHORT)
    }
    second = dict(langid.rank(SHORT))
    assert short_probs == _lingua_approx({code: (first[code] + second[code]) / 2 for code in codes})
    # the check's value is the target's probability under the same rule
    check = _check("fr")
    long_result, short_result = check.score_many([LONG, SHORT])
    assert long_result.value == long_probs["fr"]
    assert short_result.value == pytest.approx(short_probs["fr"], rel=1e-12)
    # None: the mean everywhere (the rule before)
    (mean,) = candidate_probabilities([LONG], codes, langid_alone_from=None)
    lingua_long = lingua.compute_language_confidence_values(LONG)
    first = {v.language.iso_code_639_1.name.lower(): v.value for v in lingua_long}
    assert mean == _lingua_approx({code: (first[code] + long_probs[code]) / 2 for code in codes})


def test_a_candidate_py3langid_does_not_know_sends_long_texts_to_the_mean_too():
    codes = sorted({*DEFAULT_CANDIDATE_LANGUAGES, "mi"})  # Maori: lingua's, not py3langid's
    lingua, langid = _detectors(codes)
    assert "mi" not in langid.nb_classes
    (probs,) = candidate_probabilities([LONG], codes)
    first = {
        v.language.iso_code_639_1.name.lower(): v.value
        for v in lingua.compute_language_confidence_values(LONG)
    }
    second = dict(langid.rank(LONG))
    expected = {code: (first[code] + second.get(code, first[code])) / 2 for code in codes}
    assert probs == _lingua_approx(expected)


def test_lingua_is_not_built_for_long_texts_only():
    calls = lambda: _detector_for.cache_info().hits + _detector_for.cache_info().misses  # noqa: E731
    check = _check("de")
    before = calls()
    results = check.score_many([LONG, "Der Termin ist morgen um zehn Uhr im zweiten Stock."])
    assert calls() == before  # no text needed lingua: the detector was not even looked up
    assert [check.passed(r) for r in results] == [False, True]
    check.score_many([SHORT])
    assert calls() == before + 1


def test_letter_count_with_enough_is_exact_below_it_and_stops_above():
    short = "Ja, gut! 42"  # 5 letters
    long = "x" * 10 + "1" * 500 + "y" * 1000
    assert letter_count(short, 8) == letter_count(short) == 5
    assert letter_count(long) == 1010
    assert letter_count(long, 8) == 10  # the first 64-character piece already has 8
    assert letter_count("1" * 100 + "abc", 8) == 3  # every piece counted when below
    # the check's abstention reason names the exact count
    assert _check("de").score(short).reason == "5 letters < 8"


@pytest.mark.parametrize(
    ("text", "prose"),
    [
        ("Bonjour, le colis arrive demain.", "Bonjour, le colis arrive demain."),  # no marker
        ("Lancez `pip install x` puis", "Lancez   puis"),
        ("Voir https://example.com/a ici", "Voir   ici"),
        ("Voir www.example.com ici", "Voir   ici"),
        ("Code :\n~~~\nx = 1\n~~~\nfin", "Code :\n \nfin"),
        ("x = 1\n```\nSuite du texte", "\nSuite du texte"),  # a window opening mid-fence
        ("HTTP://EXAMPLE.COM reste", "HTTP://EXAMPLE.COM reste"),  # the URL pattern is lowercase
    ],
)
def test_strip_code_removes_code_and_urls_and_leaves_prose_as_it_is(text, prose):
    assert strip_code(text) == prose
