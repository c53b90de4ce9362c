"""The language verdict: the target ranked first among the candidates by `margin` (lingua and
py3langid averaged), no verdict below `abstain_below` letters, reasons that name what was
found, and the replaced settings refused."""

from __future__ import annotations

import math

import pytest

from harness.checks.language import DEFAULT_CANDIDATE_LANGUAGES, LanguageCheck


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
