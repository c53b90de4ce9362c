"""score_records on real token ids (the embedded model's tokenizer, via tiny-random-llama)."""

from __future__ import annotations

import pytest

from harness.config.files import load_suite
from harness.config.run import ScoringConfig
from harness.scoring import rows_frame, score_records, split_windows
from harness.text.records import GenerationRecord

pytestmark = pytest.mark.integration

FRENCH = (
    "Le vieux gardien du phare regardait la mer chaque soir. Cette nuit-là, une baleine immense "
    "s'approcha du rivage et chanta doucement. Il descendit l'escalier, une lanterne à la main. "
)
ENGLISH = (
    "Then he went back up the stairs and wrote a long letter to his brother about the whale, "
    "the storm and the strange songs that kept him awake all night long. "
)


@pytest.fixture(scope="module")
def tokenizer(tiny_model_path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_path)


def _ids(tokenizer, text):
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def test_restate_and_periodic_record_scored_on_generated_tokens_only(tokenizer):
    restate = _ids(tokenizer, "Bien sûr ! Voici une histoire complète, entièrement en français :")
    french = _ids(tokenizer, FRENCH * 2)
    reminder = _ids(tokenizer, "\nRappel : réponds uniquement en français.\n")
    english = _ids(tokenizer, ENGLISH * 2)
    ids = restate + french + reminder + english
    a, b, c = len(restate), len(restate) + len(french), len(restate) + len(french) + len(reminder)
    record = GenerationRecord.from_transcript(
        {
            "item": "lang-fr-story",
            "model": "smollm2-135m-instruct",
            "policy": "periodic-64-user",
            "continuation_ids": ids,
            "segments": [
                {"kind": "restatement", "start": 0, "end": a},
                {"kind": "generated", "start": a, "end": b},
                {"kind": "injected", "start": b, "end": c},
                {"kind": "generated", "start": c, "end": len(ids)},
            ],
        }
    )
    windows = split_windows(record, tokenizer, size=32)
    assert windows[0].t_start == a + 1 and windows[0].t_gen_start == 1
    assert all("Rappel" not in w.text and "Voici" not in w.text for w in windows)
    n_generated = len(french) + len(english)
    assert sum(w.n_tokens for w in windows) == n_generated
    after = [w for w in windows if w.t_start > c]
    assert after and after[0].t_gen_start - 1 >= len(french)

    suite = load_suite("tasks/languages.yaml")
    frame = rows_frame(score_records([record], suite, tokenizer, ScoringConfig(window=32)))
    first, last = frame.sort_values("window").iloc[0], frame.sort_values("window").iloc[-1]
    assert first["passed"] and not last["passed"] and first["task"] == "languages"


def test_sentence_aligned_windows_end_on_sentence_boundaries(tokenizer):
    record = GenerationRecord.from_transcript(
        {"item": "lang-fr-story", "continuation_ids": _ids(tokenizer, FRENCH * 6)}
    )
    windows = split_windows(record, tokenizer, size=24, sentence_aligned=True)
    assert len(windows) >= 4
    for window in windows[:-1]:
        assert window.text.rstrip().endswith((".", "!", "?")), window.text
        assert 18 <= window.n_tokens <= 36
