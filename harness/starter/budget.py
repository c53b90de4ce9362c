"""The token budget `harness init` writes for a prompt's rules.

A prompt whose rules judge whole replies (a length, a sign-off, a format) needs replies that
end on their own: a reply cut off at the token limit can keep no sign-off and says nothing
about the word limit. Such a prompt gets `continue_on_eos: false` and a per-reply budget of
twice its word limit in tokens (`TOKENS_PER_WORD`: SmolLM2's tokenizer on the starter's own
requests, 1.20 / 2.47 / 2.02 tokens per IFEval word in English / German / French, rounded
up; tokenizers with more non-English vocabulary need fewer), so a reply that breaks the
limit by up to 2x is judged as too long, not cut off; with no word limit,
`WHOLE_REPLY_TOKENS`. A conversation's total is its 5 replies' budgets
(`plan_checks.check_turn_budget`). Other prompts keep the long-answer setting: 256 tokens a single
reply (continued past EOS) and 48 a conversation reply.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from harness.starter.rules import StatedRule, needs_whole_replies, word_limit

TOKENS_PER_WORD = {"en": 1.2, "de": 2.5, "fr": 2.1}
OTHER_LANGUAGE_TOKENS_PER_WORD = 3.0  # no measurement: on the safe side of the three
WHOLE_REPLY_TOKENS = 256
MIN_REPLY_TOKENS = 128
TURNS = 5  # replies per starter conversation
MARGIN = 2.0


@dataclass(frozen=True)
class Budget:
    max_tokens: int  # a single reply; a conversation's total
    turn_tokens: int  # a conversation's reply
    continue_on_eos: bool
    whole_replies: bool  # the requests must be answerable briefly
    why: str  # the comment beside turn_tokens in the config


def _round_up(tokens: float, step: int = 32) -> int:
    return int(math.ceil(tokens / step) * step)


def budget_for(rules: list[StatedRule], language: str) -> Budget:
    """The generation budget for a prompt stating `rules`, replies in `language`."""
    if not needs_whole_replies(rules):
        return Budget(256, 48, True, False, "tokens per reply of a conversation (5 x 48 <= 256)")
    limit = word_limit(rules)
    if limit is None:
        turn = WHOLE_REPLY_TOKENS
        why = "room for a whole reply: its sign-off or format is judged at its end"
    else:
        per_word = TOKENS_PER_WORD.get(language, OTHER_LANGUAGE_TOKENS_PER_WORD)
        turn = max(MIN_REPLY_TOKENS, _round_up(MARGIN * limit * per_word))
        why = (
            f"2 x the {limit}-word limit at {per_word} tokens a word: a reply too long is "
            "judged too long, not cut off"
        )
    return Budget(TURNS * turn, turn, False, True, why)
