"""The batched byte scan (harness.checks.langid_scan) gives py3langid's own values, exactly."""

from __future__ import annotations

import functools
from pathlib import Path

import yaml
from py3langid.langid import MODEL_FILE, LanguageIdentifier, visit_counts

from harness.checks import langid_scan
from harness.checks.langid_scan import SCANNER_DEPTH, BatchIdentifier, scanner_depth

DATA = Path(__file__).parents[1] / "data" / "scoring" / "language_windows.yaml"
LANGS = ["de", "en", "es", "fr", "it", "nl", "pl", "pt", "ru", "sv", "tr", "zh"]


@functools.cache
def _plain() -> LanguageIdentifier:
    plain = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    plain.set_languages(LANGS)
    return plain


def _pair() -> tuple[LanguageIdentifier, BatchIdentifier]:
    """py3langid's identifier and a batched one, both restricted."""
    batch = BatchIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    batch.set_languages(LANGS)
    return _plain(), batch


def _texts() -> list[str]:
    windows = [w["text"] for w in yaml.safe_load(DATA.read_text())["windows"]]
    # cuts at odd offsets: words and contexts cut mid-word and mid-character run
    cuts = [w[k:] for w in windows for k in (1, 3, 7, 40)]
    cuts += [w[:k] for w in windows for k in (5, 90)]
    odd = ["", " ", "  ", "a", "a b", "  double  spaces  ", "tab\tand\nnewline"]
    odd += ["ÉTÉ EN FRANCE", "日本語のテキスト。", "x" * 300, "ça va ? très bien !", "🙂 ok 🙂"]
    return windows + cuts + odd + [" ".join(windows[:6])]


def test_the_packaged_scanner_is_as_deep_as_the_batch_walk_assumes():
    # each byte's state is walked from its SCANNER_DEPTH - 1 bytes before: a deeper model would
    # need more, and the pad between texts must send every state back to the start
    plain = LanguageIdentifier.from_model_file(MODEL_FILE)
    assert scanner_depth(plain) == SCANNER_DEPTH
    assert BatchIdentifier.from_model_file(MODEL_FILE).pad_resets()


def test_probabilities_are_py3langid_s_own_on_texts_words_and_odd_input():
    plain, batch = _pair()
    texts = _texts()
    expected = [dict(plain.rank(t)) for t in texts]
    assert batch.probabilities_many(texts) == expected
    assert [dict(batch.rank(t)) for t in texts] == expected  # py3langid's rank, one text
    assert batch.probabilities_many(texts[::-1]) == expected[::-1]  # other neighbours
    assert batch.probabilities_many([]) == []
    assert batch.probabilities_many(["", " "]) == [dict(plain.rank("")), dict(plain.rank(" "))]


def test_the_full_model_with_its_aliased_labels_gives_the_same_values():
    # unrestricted, py3langid's labels include aliases (two columns, one label): merged as
    # its rank merges them
    plain = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    batch = BatchIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    assert batch._alias_pairs
    texts = _texts()[:60]
    assert batch.probabilities_many(texts) == [dict(plain.rank(t)) for t in texts]


def test_undecodable_bytes_with_0xff_are_walked_as_py3langid_walks_them():
    # 0xFF, the pad between texts, is a real byte here: py3langid's own transition on it
    plain, batch = _pair()
    data = b"le chat noir" + b"\xff\xfe" + b"der Hund" + b"\xff"
    assert batch.rank(data) == plain.rank(data)


def test_small_chunks_give_the_same_values(monkeypatch):
    monkeypatch.setattr(langid_scan, "CHUNK_BYTES", 64)
    plain, batch = _pair()
    texts = _texts()[:40]
    assert batch.probabilities_many(texts) == [dict(plain.rank(t)) for t in texts]


def test_the_counts_are_the_plain_walk_s_in_its_order():
    plain, batch = _pair()
    texts = ["le chat", "der Hund", "el perro y el gato y el perro", " x", "ab  ", "", "🙂"]
    datas = [LanguageIdentifier._encode(text) for text in texts]
    for data, found in zip(datas, batch.feature_counts(datas), strict=True):
        walked = visit_counts(plain.tk_nextmove, plain._rowbase, plain.tk_output, data)
        if walked is None:
            assert found is None
        else:
            assert list(zip(found[0].tolist(), found[1].tolist(), strict=True)) == list(
                walked.items()
            )


def _features(batch: BatchIdentifier, text: str) -> int:
    found = batch.feature_counts([LanguageIdentifier._encode(text)])[0]
    return 0 if found is None else len(found[0])


def test_texts_of_every_size_of_product_give_py3langid_s_values():
    # a chunk's texts are multiplied stacked by their number of features: none (py3langid's
    # own featureless scores), one (numpy's non-BLAS product), a few, one count repeated
    # hundreds of times, and more than 768 (12 classes: OpenBLAS's threaded gemv)
    plain, batch = _pair()
    windows = _texts()[:40]
    long = " ".join(windows)
    texts = ["", "a", "xx", "é", "xx", "a" * 10, "ab" * 400, "la " * 500, long, long[::-1]]
    texts += [w.split()[0] for w in windows] + windows  # many with as many features
    sizes = [_features(batch, t) for t in texts]
    assert {0, 1} <= set(sizes) and max(sizes) > 768
    assert len(set(sizes)) < len(sizes)
    assert batch.probabilities_many(texts) == [dict(plain.rank(t)) for t in texts]


def test_a_batch_over_several_chunks_gives_py3langid_s_values():
    plain, batch = _pair()
    texts = _texts()
    batch_texts = []
    while sum(len(t.encode()) for t in batch_texts) < 2.5 * langid_scan.CHUNK_BYTES:
        batch_texts += [t[len(batch_texts) % 11 :] for t in texts]
    expected = {t: dict(plain.rank(t)) for t in set(batch_texts)}
    assert batch.probabilities_many(batch_texts) == [expected[t] for t in batch_texts]


def test_raw_scores_without_normalising_are_py3langid_s():
    # without norm_probs a featureless text gets py3langid's floor, the others its raw sums
    plain = LanguageIdentifier.from_model_file(MODEL_FILE)
    batch = BatchIdentifier.from_model_file(MODEL_FILE)
    for text in ["", "a", "xx", "le chat noir et le chien", "x" * 300]:
        assert batch.rank(text) == plain.rank(text)
