"""Generation and the probe render chat prompts alike (the embedded model's tokenizer): the
probe's prompt A for a generated sample is the sample's prompt, and "no system prompt" is one
prompt on both paths."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.config.files import load_run_config
from harness.config.run import ProbeConfig
from harness.engines import GenerationResult, SamplingSettings
from harness.policies import NonePolicy, SampleSpec, policy_run, run_policy
from harness.probes.pairs import DEFAULT_SYSTEM, NO_SYSTEM, PairSpec, pair_prompt_ids
from harness.stages.probe import baseline_ids
from harness.text.chat import TEMPLATE_DEFAULT, ChatFormat

pytestmark = pytest.mark.integration
CONFIGS = Path(__file__).parent.parent / "data" / "configs"
SYSTEM, USER = "Always answer in French.", "Tell me a story."
# Gemma-style: only user/assistant turns; a system message is an error
NO_SYSTEM_TEMPLATE = (
    "{% for m in messages %}{% if m['role'] == 'system' %}"
    "{{ raise_exception('System role not supported') }}{% endif %}"
    "<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


class OneWordEngine:
    name = "scripted"
    max_model_len = 4096

    def generate(self, requests):
        return [
            GenerationResult(
                token_ids=[1234] * r.sampling.max_tokens,
                text="",
                finish_reason="length",
                prompt_tokens=len(r.prompt_ids),
            )
            for r in requests
        ]

    def close(self) -> None:
        pass


@pytest.fixture(scope="module")
def tokenizer(embedded_model_path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(embedded_model_path)


def _generated(tokenizer, system: str | None):
    spec = SampleSpec(system=system, user=USER, seed=0, meta={"item": "x"})
    chat = ChatFormat(tokenizer)
    return run_policy(
        policy_run(NonePolicy()), OneWordEngine(), chat, [spec], SamplingSettings(max_tokens=4)
    )[0]


def _config(baseline: str):
    return load_run_config(CONFIGS / "valid.yaml").model_copy(
        update={"probe": ProbeConfig(baseline=baseline)}
    )


def test_probe_prompts_of_a_generated_record_are_the_generation_prompts(tokenizer):
    record = _generated(tokenizer, SYSTEM)
    turns = {m["role"]: m["content"] for m in record.prompt_messages}
    pair = PairSpec(name="r", system_a=turns["system"], system_b=NO_SYSTEM, user=turns["user"])
    prompt_a, prompt_b = pair_prompt_ids(tokenizer, pair)
    assert prompt_a == record.prompt_ids
    # no system prompt: the generation path and both probe paths give one prompt, with no
    # system turn at all (not SmolLM2's default one)
    without = _generated(tokenizer, None)
    assert without.prompt_ids == prompt_b == baseline_ids(_config("none"), tokenizer, record)
    assert (
        tokenizer.decode(prompt_b) == f"<|im_start|>user\n{USER}<|im_end|>\n<|im_start|>assistant\n"
    )
    # the run's baseline is the record's prompt with the system turn removed
    assert record.prompt_ids[-len(prompt_b) :] == prompt_b


def test_template_default_is_the_templates_own_system_prompt(tokenizer):
    chat = ChatFormat(tokenizer)
    default = chat.prompt_text(TEMPLATE_DEFAULT, "hi")
    none = chat.prompt_text(None, "hi")
    assert (
        none
        == chat.prompt_text("", "hi")
        == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    )
    assert "SmolLM" in default and default.endswith(none)
    given = chat.prompt_text("Be brief.", "hi")
    assert given.startswith("<|im_start|>system\nBe brief.<|im_end|>\n") and given.endswith(none)
    record = _generated(tokenizer, SYSTEM)
    pair = PairSpec(name="d", system_a=DEFAULT_SYSTEM, system_b=NO_SYSTEM, user=USER)
    assert pair_prompt_ids(tokenizer, pair)[0] == chat.prompt_ids(TEMPLATE_DEFAULT, USER)
    assert baseline_ids(_config("default"), tokenizer, record) == chat.prompt_ids(
        TEMPLATE_DEFAULT, USER
    )


def test_template_without_system_role_probes_what_it_generated(embedded_model_path):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(embedded_model_path)
    tokenizer.chat_template = NO_SYSTEM_TEMPLATE
    record = _generated(tokenizer, SYSTEM)
    pair = PairSpec(name="g", system_a=SYSTEM, system_b=NO_SYSTEM, user=USER)
    prompt_a, prompt_b = pair_prompt_ids(tokenizer, pair)
    assert prompt_a == record.prompt_ids  # the system text at the top of the user turn
    assert (
        tokenizer.decode(prompt_b) == f"<|im_start|>user\n{USER}<|im_end|>\n<|im_start|>assistant\n"
    )
    assert baseline_ids(_config("none"), tokenizer, record) == prompt_b


TEXTS = [
    "Bonjour, ça va ? Très bien.",
    "  leading spaces and a trailing newline\n",
    "Привет, как дела? 你好。",
    "code: `x = 1`  <|im_end|> after the end token",
    "",
]


def test_fast_backend_gives_transformers_ids_and_texts(tokenizer):
    """harness.text.tokens calls the Rust backend directly: the ids, offsets and decoded texts are
    transformers' own, special tokens skipped or kept as asked."""
    from harness.text import tokens

    for text in TEXTS:
        enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        assert tokens.encode(tokenizer, text) == enc["input_ids"]
        assert tokens.encode_offsets(tokenizer, text) == (
            enc["input_ids"],
            [tuple(o) for o in enc["offset_mapping"]],
        )
    seqs = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in TEXTS]
    seqs.append([tokenizer.eos_token_id, *seqs[0], tokenizer.eos_token_id])
    for skip in (True, False):
        assert tokens.decode_many(tokenizer, seqs, skip) == tokenizer.batch_decode(
            seqs, skip_special_tokens=skip
        )
        assert [tokens.decode(tokenizer, s, skip) for s in seqs] == [
            tokenizer.decode(s, skip_special_tokens=skip) for s in seqs
        ]


def test_byte_pieces_decode_every_id_and_slice_as_the_backend(tokenizer):
    """tokens.BytePieces (a byte-level BPE decoded in Python from each id's bytes) gives the
    backend's text for every id of the vocabulary alone and for every slice (up to 70 tokens)
    of texts in 12 languages and scripts: cuts inside a multi-byte character (the backend's
    replacement characters) and special tokens, skipped or kept, included."""
    import yaml

    from harness.text import tokens

    backend = tokenizer.backend_tokenizer
    pieces = tokens._byte_pieces(backend)
    assert pieces is not None
    for i in range(backend.get_vocab_size()):
        assert pieces.decode([i]) == backend.decode([i], skip_special_tokens=True)
    windows = yaml.safe_load((CONFIGS.parent / "scoring" / "language_windows.yaml").read_text())
    texts = [*TEXTS, "emoji 😀👍🏽 et 日本語テキスト", *(w["text"] for w in windows["windows"])]
    for text in texts:
        ids = backend.encode(text, add_special_tokens=False).ids
        for a in range(len(ids)):
            for b in range(a, min(len(ids), a + 70) + 1):
                assert pieces.decode(ids[a:b]) == backend.decode(ids[a:b]), (text, a, b)
        marked = [tokenizer.eos_token_id, *ids[:10], tokenizer.eos_token_id]
        for skip in (True, False):
            assert pieces.decode(marked, skip) == backend.decode(marked, skip_special_tokens=skip)
    # the slices went through the table (their ids have bytes), not the backend's fallback
    assert sum(piece is not None for piece in pieces.table.values()) > 1000


def test_a_repeated_user_turn_has_the_pieces_of_a_first_one(tokenizer):
    """User turns are labelled once per text: the second time gives the same pieces, with the
    closing EOS dropped after a reply that closed its turn, as the first time."""
    fresh, cached = ChatFormat(tokenizer), ChatFormat(tokenizer)
    cached.user_turn_pieces("Et ensuite ?", None)
    for last in (None, tokenizer.eos_token_id, 1234):
        assert cached.user_turn_pieces("Et ensuite ?", last) == ChatFormat(
            tokenizer
        ).user_turn_pieces("Et ensuite ?", last)
    assert fresh.user_turn_pieces("Et ensuite ?", None)[0][0] == "markup"


def test_encode_many_is_the_tokenizers_own_encode(tokenizer):
    """tokens.encode_many (one batch call to the backend) gives transformers' ids of each
    text: the labelled windows in 12 languages, CJK, emoji, odd spaces and added tokens."""
    import yaml

    from harness.text import tokens

    windows = yaml.safe_load((CONFIGS.parent / "scoring" / "language_windows.yaml").read_text())
    outside = ["你好世界", "emoji 😀 ok", "prix\u00a010 €", "quoi\u202f?", "zero\u200bwidth"]
    added = ["fin <|im_end|> suite", "<|im_start|>user"]
    cases = [*(w["text"] for w in windows["windows"]), *TEXTS, *outside, *added, ""]
    expected = [tokenizer(text, add_special_tokens=False)["input_ids"] for text in cases]
    assert tokens.encode_many(tokenizer, cases) == expected
