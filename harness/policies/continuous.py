"""Rounds without a barrier, on an engine that batches continuously (vLLM).

In the round loop (`run_policies`) every round is one batch, and a sample whose round ends
early (EOS, a 64-token adaptive window, a short reply in a conversation) waits until the
slowest sample of that batch ends too; the batch thins out while it waits. Here each sample
moves on alone: when its request finishes, its result is absorbed, the policy's reminder or the
conversation's next scripted user turn is appended, and its next request joins the running
batch at once. Every request is the one the round loop would have sent (same prompt ids, same
seed: seeds depend on the sample's own round count), so only the batch it shares the engine
with differs.
"""

from __future__ import annotations

from collections.abc import Callable

from harness.engines.base import Engine, GenerationRequest, GenerationResult, SamplingSettings
from harness.policies.base import (
    Policy,
    SampleState,
    absorb_result,
    inject_reminders,
    round_request,
)
from harness.policies.conversation import next_user_turns, stop_at_context
from harness.text.chat import ChatFormat


def run_continuous(
    grouped: list[tuple[Policy, list[SampleState]]],
    engine: Engine,
    chat: ChatFormat,
    sampling: SamplingSettings,
    turn_tokens: int | None,
    on_round: Callable[[int, int], None] | None,
    hand_over: Callable[[], None],
) -> None:
    """Drive every sample of `grouped` to its end; `hand_over()` runs whenever a sample ends
    (it stores the groups whose samples have all ended). `on_round(n, generated)` runs after
    each of the n requests that finish, with the tokens generated so far."""
    sent: dict[tuple[int, int], GenerationRequest] = {}
    finished_requests = 0

    def next_request(key: tuple[int, int]) -> list[tuple]:
        policy, states = grouped[key[0]]
        state = states[key[1]]
        if not state.done:
            stop_at_context([state], engine.max_model_len)
        if state.done:
            hand_over()
            return []
        context = engine.max_model_len
        sent[key] = round_request(policy, state, sampling, state.budget, turn_tokens, context)
        return [(key, sent[key])]

    def follow(key: tuple[int, int], result: GenerationResult) -> list[tuple]:
        nonlocal finished_requests
        policy, states = grouped[key[0]]
        state = states[key[1]]
        # seconds is already this request's own share of the engine: batch size 1
        absorb_result(policy, state, chat, sent.pop(key), result, state.budget, 1, turn_tokens)
        if state.spec.conversation:
            next_user_turns([(policy, [state])], chat, engine, None, sampling)
        else:
            inject_reminders(policy, chat, [state])
        finished_requests += 1
        if on_round:
            on_round(finished_requests, sum(s.generated for _, sts in grouped for s in sts))
        return next_request(key)

    first = [
        pair
        for group, (_, states) in enumerate(grouped)
        for index in range(len(states))
        for pair in next_request((group, index))
    ]
    hand_over()  # groups with nothing to generate (every sample already at the context)
    if first:
        engine.generate_continuous(first, follow)
