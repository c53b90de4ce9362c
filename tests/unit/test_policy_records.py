"""Records of the policy loop through a fake engine: token counts equal the segment lengths, and
a record handed to on_group_done is the record returned (and never changes afterwards)."""

from __future__ import annotations

from harness.engines import GenerationResult, SamplingSettings
from harness.policies import (
    ChatFormat,
    NonePolicy,
    PeriodicPolicy,
    RestatePolicy,
    SampleSpec,
    policy_run,
    run_policies,
)

WORD = ord("w")


class CharTokenizer:
    """One token per character; a chat is '<role>content' turns then '<assistant>'."""

    chat_template = "characters"
    eos_token_id = 0

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=False):
        text = "".join(f"<{m['role']}>{m['content']}" for m in messages)
        return text + ("<assistant>" if add_generation_prompt else "")

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [ord(c) for c in text]}

    def decode(self, ids, skip_special_tokens=False):
        return "".join(chr(i) for i in ids)


class FakeEngine:
    """Every request gets exactly its max_tokens WORD tokens."""

    name = "fake"
    max_model_len = 10_000

    def generate(self, requests):
        return [
            GenerationResult(
                token_ids=[WORD] * r.sampling.max_tokens,
                text="w" * r.sampling.max_tokens,
                finish_reason="length",
                prompt_tokens=len(r.prompt_ids),
            )
            for r in requests
        ]

    def close(self) -> None:
        pass


def _span_lengths(record, kind: str) -> int:
    return sum(s.end - s.start for s in record.segments if s.kind == kind)


def test_records_count_each_segment_once_and_match_what_was_stored():
    specs = [
        SampleSpec(system="Be brief.", user="Hi.", reminder="Brief!", restatement="Ok:", seed=i)
        for i in range(2)
    ]
    groups = [
        (policy_run(NonePolicy()), specs),
        (policy_run(PeriodicPolicy(every=4, placement="inline")), specs),
        (policy_run(RestatePolicy()), specs),
    ]
    stored: dict[int, list] = {}  # what a store would have written, dumped at hand-over time
    handed: dict[int, list] = {}

    def on_group_done(index, records):
        stored[index] = [r.model_dump(mode="json") for r in records]
        handed[index] = records

    returned = run_policies(
        groups,
        FakeEngine(),
        ChatFormat(CharTokenizer()),
        SamplingSettings(max_tokens=10),
        on_group_done=on_group_done,
    )

    for index, records in enumerate(returned):
        for record in records:
            assert record.tokens.generated == _span_lengths(record, "generated") == 10
            assert record.tokens.injected == _span_lengths(record, "injected")
            assert record.tokens.restated == _span_lengths(record, "restatement")
        assert [r.model_dump(mode="json") for r in records] == stored[index]
        assert [r.model_dump(mode="json") for r in handed[index]] == stored[index]
    assert returned[1][0].tokens.injected == 2 * len("\n\n[Brief!]\n\n")
    assert returned[2][0].tokens.restated == len("Ok:")
