"""The token budget `harness init` writes for a prompt's rules.

A prompt whose rules judge whole replies (a length, a sign-off, a format) needs replies that
end on their own: a reply cut off at the token limit can keep no sign-off and says nothing
about a word limit it had not reached yet. Such a prompt gets `continue_on_eos: false` and a
budget per reply, single replies (`single_reply_tokens`) and a conversation's replies
(`turn_tokens`) alike, a bit above its word limit in tokens: `MARGIN` x the limit x
`TOKENS_PER_WORD` (SmolLM2's tokenizer on the starter's own requests, 1.20 / 2.47 / 2.02
tokens per IFEval word in English / German / French, rounded up; tokenizers with more
non-English vocabulary need fewer), rounded up to 32, at least `MIN_REPLY_TOKENS`. A reply cut
off there has already broken the limit or is within a quarter of it: the word limit's verdict
on it stands where it is over (`Check.when_cut_off`), the rest say "no verdict (cut off)" and
the report counts them. With no word limit, `WHOLE_REPLY_TOKENS`. `max_tokens` is a
conversation's total: its 5 replies' budgets (`plan_checks.check_turn_budget`). Other prompts keep
the long-answer setting: 256 tokens a single reply (continued past EOS) and 48 a conversation
reply.

The run stays a few minutes on 2 CPU cores: at most 24 single replies and 12 conversations of
5 replies (policies none and adaptive between turns; periodic is written commented out), each
at most one reply's budget (`harness run --dry-run` prints the token maxima).
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
MARGIN = 1.25  # a reply's budget over its word limit's tokens


@dataclass(frozen=True)
class Budget:
    max_tokens: int  # a single reply's (unless single_tokens); a conversation's total
    turn_tokens: int  # a conversation's reply
    single_tokens: int | None  # a single reply's, where it is not max_tokens
    continue_on_eos: bool
    whole_replies: bool  # the requests must be answerable briefly
    why: str  # the comment beside turn_tokens in the config


def _round_up(tokens: float, step: int = 32) -> int:
    return int(math.ceil(tokens / step) * step)


def budget_for(rules: list[StatedRule], language: str) -> Budget:
    """The generation budget for a prompt stating `rules`, replies in `language`."""
    if not needs_whole_replies(rules):
        why = "tokens per reply of a conversation (5 x 48 <= 256)"
        return Budget(256, 48, None, True, False, why)
    limit = word_limit(rules)
    if limit is None:
        turn = WHOLE_REPLY_TOKENS
        why = "room for a whole reply: its sign-off or format is judged at its end"
    else:
        per_word = TOKENS_PER_WORD.get(language, OTHER_LANGUAGE_TOKENS_PER_WORD)
        turn = max(MIN_REPLY_TOKENS, _round_up(MARGIN * limit * per_word))
        why = (
            f"{MARGIN} x the {limit}-word limit at {per_word} tokens a word: a reply cut "
            "off here is over the limit or near it"
        )
    return Budget(TURNS * turn, turn, turn, False, True, why)
