"""Single-turn twins on the scripted engine: `conversations.twin` sends a conversation's first
k user turns and the sample's own first k - 1 replies as one message, answers it once at about
turn k's token distance, scores it (single_turn.csv) and the report compares it with turn k;
a config that cannot have twins fails before anything is written."""

from __future__ import annotations

import random

import pandas as pd
import pytest

from harness.engines import GenerationResult
from harness.engines.scripted import CharTokenizer
from harness.pipeline import STAGES, run_stages
from harness.stages.base import Records
from tests.scripted_run import scripted_run

SUITE = """\
suite: scripted
items:
  - id: talk
    system: Always say the word french.
    user: Hello.
    turns: ["And then?", "Tell me more."]
    checks:
      - {type: regex_must, pattern: "french"}
"""
CONFIG = """\
name: twins
models: [tiny-random-llama]
suites: [suite.yaml]
policies: [none]
samples: 3
generation: {engine: hf, max_tokens: 30, turn_tokens: 10, temperature: 0.7}
scoring: {window: 10}
probe: {enabled: false}
theory: {relay: null, bias_lams: []}
conversations: {twin: true}
"""


class Engine:
    """Deterministic answers: 'french' when the prompt (characters) holds an odd number of
    'e's, else letters without it; records every batch."""

    name = "scripted"
    max_model_len = 10_000
    prefix_caching = False

    def __init__(self) -> None:
        self.tokenizer = CharTokenizer()
        self.batches: list[list] = []

    def generate(self, requests):
        self.batches.append(list(requests))
        return [self._one(r) for r in requests]

    @staticmethod
    def _one(request) -> GenerationResult:
        rng = random.Random(f"{request.sampling.seed}/{request.prompt_ids}")
        word = "french " if rng.random() < 0.5 else "abcdef "
        text = (word * 10)[: request.sampling.max_tokens]
        ids = [ord(c) for c in text]
        n = len(request.prompt_ids)
        return GenerationResult(token_ids=ids, text=text, finish_reason="length", prompt_tokens=n)

    def close(self) -> None:
        pass


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("twins")
    (folder / "suite.yaml").write_text(SUITE)
    (folder / "run.yaml").write_text(CONFIG)
    engine = Engine()
    out = folder / "out"
    with scripted_run(folder / "run.yaml", out, engine, content_key="s1") as ctx:
        run_stages(ctx, STAGES, show_progress=False)
    return out, ctx, engine


def test_every_later_turn_gets_a_twin_answered_once_at_about_its_token_distance(run):
    out, ctx, engine = run
    single = pd.read_csv(out / "single_turn.csv")
    assert sorted(zip(single["sample"], single["turn"], strict=True)) == [
        (s, k) for s in range(3) for k in (2, 3)
    ]
    twin_batch = engine.batches[-1]  # after the conversations, before nothing else generates
    assert len(twin_batch) == 6 and {r.sampling.max_tokens for r in twin_batch} == {10}
    # the twin of turn 3 holds the sample's own first two replies, and the user turns
    record = next(r for r in ctx.read(Records) if r.sample == 0)
    prompt = "".join(map(chr, max(twin_batch, key=lambda r: len(r.prompt_ids)).prompt_ids))
    replies = [s.text.strip() for s in record.segments if s.kind == "generated"]
    assert "And then?" in prompt and "Tell me more." in prompt
    assert any(reply in prompt for reply in replies[:2])
    # equal token distance, to within the transcript's labels and the chat markup
    ratio = single["twin_t"] / single["conversation_t"]
    assert ratio.between(0.7, 1.5).all(), ratio.tolist()
    assert set(single["passed"].astype(str)) <= {"True", "False"}


def test_the_report_compares_the_twin_with_turn_k(run):
    out, _, _ = run
    html = (out / "report.html").read_text()
    assert "Tokens or turns?" in html
    assert any(r in html for r in ("no drop", "follows the turns", "follows the tokens",
                                   "cannot tell"))  # fmt: skip


def test_twins_without_a_scripted_conversation_fail_before_anything_is_written(tmp_path, run_cli):
    (tmp_path / "suite.yaml").write_text(
        SUITE.replace('    turns: ["And then?", "Tell me more."]\n', "")
    )
    (tmp_path / "run.yaml").write_text(CONFIG)
    code, _, err = run_cli(["run", str(tmp_path / "run.yaml"), "--out", str(tmp_path / "o")])
    assert code == 2 and err.count("\n") == 1
    assert "conversations.twin" in err and "scripted conversation" in err
    assert not (tmp_path / "o").exists()
