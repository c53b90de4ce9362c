"""The memoised byte scan (harness.checks.langid_scan) gives py3langid's own values, exactly."""

from __future__ import annotations

import functools
from pathlib import Path

import yaml
from py3langid.langid import MODEL_FILE, LanguageIdentifier, visit_counts

from harness.checks import langid_scan
from harness.checks.langid_scan import SCANNER_DEPTH, MemoIdentifier, scanner_depth

DATA = Path(__file__).parents[1] / "data" / "scoring" / "language_windows.yaml"
LANGS = ["de", "en", "es", "fr", "it", "nl", "pl", "pt", "ru", "sv", "tr", "zh"]


@functools.cache
def _plain() -> LanguageIdentifier:
    plain = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    plain.set_languages(LANGS)
    return plain


def _pair() -> tuple[LanguageIdentifier, MemoIdentifier]:
    """py3langid's identifier and a fresh memoised one (an empty memo), both restricted."""
    memo = MemoIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    memo.set_languages(LANGS)
    return _plain(), memo


def _texts() -> list[str]:
    windows = [w["text"] for w in yaml.safe_load(DATA.read_text())["windows"]]
    # cuts at odd offsets: words and contexts cut mid-word and mid-character run
    cuts = [w[k:] for w in windows for k in (1, 3, 7, 40)]
    cuts += [w[:k] for w in windows for k in (5, 90)]
    odd = ["", " ", "  ", "a", "a b", "  double  spaces  ", "tab\tand\nnewline"]
    odd += ["ÉTÉ EN FRANCE", "日本語のテキスト。", "x" * 300, "ça va ? très bien !", "🙂 ok 🙂"]
    return windows + cuts + odd + [" ".join(windows[:6])]


def test_the_packaged_scanner_is_as_deep_as_the_memo_assumes():
    # the walk's context is SCANNER_DEPTH - 1 bytes: a deeper model would need more
    assert scanner_depth(LanguageIdentifier.from_model_file(MODEL_FILE)) == SCANNER_DEPTH


def test_rank_is_py3langid_s_own_on_texts_words_and_odd_input():
    plain, memo = _pair()
    texts = _texts()
    expected = [plain.rank(t) for t in texts]
    assert [memo.rank(t) for t in texts] == expected  # cold memo
    assert [memo.rank(t) for t in texts] == expected  # every word in context memoised
    assert len(memo._memo) > 100  # it did memoise (words repeat across the texts)


def test_a_full_memo_is_emptied_and_the_values_stay_exact(monkeypatch):
    monkeypatch.setattr(langid_scan, "MEMO_SIZE", 10)
    plain, memo = _pair()
    texts = _texts()[:40]
    assert [memo.rank(t) for t in texts] == [plain.rank(t) for t in texts]
    assert len(memo._memo) <= 10 + max(len(t.split()) + 1 for t in texts)


def test_the_counts_are_the_plain_walk_s_in_its_order():
    plain, memo = _pair()
    for text in ["le chat", "der Hund", "el perro y el gato y el perro", " x", "ab  "]:
        data = LanguageIdentifier._encode(text)
        walked = visit_counts(plain.tk_nextmove, plain._rowbase, plain.tk_output, data)
        assert list(memo.feature_counts(data).items()) == list(walked.items())
