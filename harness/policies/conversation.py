"""Conversations in the round loop: after each round, every conversation whose reply ended gets
its next user turn (scripted, or written by a simulated user), with the policy's reminder
before it; a conversation that reaches the context's end stops there (finish reason
`context`). Definitions: docs/architecture.md, "Conversations".
"""

from __future__ import annotations

from collections.abc import Callable

from harness.engines.base import Engine, GenerationRequest, SamplingSettings
from harness.policies.base import CONTINUE_TEXT, Policy, SampleState
from harness.text.chat import ChatFormat

# Simulated-user requests are seeded apart from the assistant's rounds (seed * 7919 + round).
SIMULATOR_SEED_OFFSET = 1_000_003


def stop_at_context(states: list[SampleState], context: int) -> None:
    """End every conversation that has no room left for one more token."""
    for state in states:
        full = len(state.prompt_ids) + len(state.continuation) >= context
        if state.spec.conversation and not state.done and full:
            state.done, state.finish_reason = True, "context"


def reply_text(state: SampleState, chat: ChatFormat, turn: int | None = None) -> str:
    """The text the model wrote in `turn` (default: the turn under way), special tokens cut;
    in a replay's history, the logged reply."""
    turn = state.turn if turn is None else turn
    ids = [
        tok
        for seg in state.segments
        if seg.kind in ("generated", "logged") and seg.turn == turn
        for tok in state.continuation[seg.start : seg.end]
    ]
    return chat.tokenizer.decode(ids, skip_special_tokens=True).strip()


def user_text(state: SampleState, turn: int) -> str:
    if turn == 1:
        return state.spec.user
    return "".join(s.text for s in state.segments if s.kind == "user" and s.turn == turn)


def next_user_turns(
    grouped: list[tuple[Policy, list[SampleState]]],
    chat: ChatFormat,
    engine: Engine,
    simulators: Simulators | None,
    sampling: SamplingSettings,
) -> None:
    """Append the next user turn to every conversation whose reply just ended. Scripted turns
    come from the spec; simulated ones are written in one batch per simulator engine."""
    pending = [
        (policy, state)
        for policy, states in grouped
        for state in states
        if state.spec.conversation and state.reply_over and not state.done
    ]
    if not pending:
        return
    # the reminder is decided on the reply that just ended, before the user speaks again
    reminders = [policy.turn_reminder(chat, state) for policy, state in pending]
    texts: list[tuple[str, str] | None] = [None] * len(pending)
    simulated = []
    for i, (_, state) in enumerate(pending):
        if state.turn <= len(state.spec.turns):
            texts[i] = (state.spec.turns[state.turn - 1][0], "user")
        else:
            simulated.append(i)
    if simulated:
        simulators = simulators or Simulators()
        written = simulators.user_turns([pending[i][1] for i in simulated], engine, chat, sampling)
        for i, text in zip(simulated, written, strict=True):
            texts[i] = None if text is None else (text, "simulator")
    for (policy, state), reminder, entry in zip(pending, reminders, texts, strict=True):
        if entry is None:  # the simulator's own context is full
            state.done, state.finish_reason = True, "context"
            continue
        _open_turn(state, chat, policy, entry, reminder, engine.max_model_len)


def prefill_history(state: SampleState, chat: ChatFormat, policy: Policy, context: int) -> None:
    """A replay's logged history before its first round: each logged reply (kind `logged`),
    then the policy's reminder (decided on that reply, as after a generated one) and the next
    logged user turn. A history that leaves no room for a reply ends the sample (`context`;
    the plan refuses such logs before the run)."""
    for reply in state.spec.logged:
        state.append(chat.encode(reply), "logged", "log", reply)
        if state.turn > len(state.spec.turns):  # the log's last reply: no user turn after it
            return
        reminder = policy.turn_reminder(chat, state)
        entry = (state.spec.turns[state.turn - 1][0], "user")
        _open_turn(state, chat, policy, entry, reminder, context)
        if state.done:
            return


def _open_turn(
    state: SampleState,
    chat: ChatFormat,
    policy: Policy,
    entry: tuple[str, str],
    reminder: str | None,
    context: int,
) -> None:
    text, source = entry
    last = state.continuation[-1] if state.continuation else None
    pieces = chat.user_turn_pieces(text, last, reminder, policy.placement, source)
    size = sum(len(ids) for _, _, ids, _ in pieces)
    # the new turn must leave room for at least one token of the reply
    if len(state.prompt_ids) + len(state.continuation) + size >= context:
        state.done, state.finish_reason = True, "context"
        return
    state.turn += 1
    for kind, src, ids, piece_text in pieces:
        state.append(ids, kind, src, piece_text)
    state.turn_generated, state.reply_over = 0, False


SimulatorFactory = Callable[[str], tuple[Engine, ChatFormat]]


class Simulators:
    """The engines that play simulated users. Key "" is the run's own engine (the simulator
    spec's `model: null`); other keys are made on first use by `factory` and closed by
    `close()`."""

    def __init__(self, factory: SimulatorFactory | None = None) -> None:
        self.factory = factory
        self.made: dict[str, tuple[Engine, ChatFormat]] = {}

    def _engine(self, key: str, engine: Engine, chat: ChatFormat) -> tuple[Engine, ChatFormat]:
        if not key:
            return engine, chat
        if key not in self.made:
            if self.factory is None:
                raise ValueError(f"no engine for the simulated user '{key}'")
            self.made[key] = self.factory(key)
        return self.made[key]

    def user_turns(
        self,
        states: list[SampleState],
        engine: Engine,
        chat: ChatFormat,
        sampling: SamplingSettings,
    ) -> list[str | None]:
        """One user message per state (None: no room left in the simulator's context)."""
        out: list[str | None] = [None] * len(states)
        by_key: dict[str, list[int]] = {}
        for i, state in enumerate(states):
            by_key.setdefault(state.spec.simulator.key, []).append(i)
        for key, indices in by_key.items():
            sim_engine, sim_chat = self._engine(key, engine, chat)
            asks = []
            for i in indices:
                prompt = sim_chat.messages_ids(simulator_view(states[i], chat))
                room = sim_engine.max_model_len - len(prompt)
                if room > 0:
                    asks.append((i, _sim_request(states[i], prompt, room, sampling)))
            results = sim_engine.generate([r for _, r in asks]) if asks else []
            for (i, _), result in zip(asks, results, strict=True):
                out[i] = result.text.strip() or CONTINUE_TEXT
        return out

    def close(self) -> None:
        for engine, _ in self.made.values():
            engine.close()
        self.made.clear()


def _sim_request(
    state: SampleState, prompt: list[int], room: int, sampling: SamplingSettings
) -> GenerationRequest:
    sim = state.spec.simulator
    seed = None if state.spec.seed is None else state.spec.seed * 7919 + SIMULATOR_SEED_OFFSET
    return GenerationRequest(
        prompt_ids=prompt,
        sampling=sampling.model_copy(
            update={
                "max_tokens": min(sim.max_tokens, room),
                "seed": None if seed is None else seed + state.turn,
            }
        ),
    )


def simulator_view(state: SampleState, chat: ChatFormat) -> list[dict]:
    """The conversation as the simulated user sees it: its own system prompt, the user's
    messages as its own (assistant) turns and the model's replies as the other side's."""
    messages = [{"role": "system", "content": state.spec.simulator.system}]
    for turn in range(1, state.turn + 1):
        messages.append({"role": "assistant", "content": user_text(state, turn)})
        messages.append({"role": "user", "content": reply_text(state, chat, turn) or "..."})
    return messages


def conversation_floor(chat: ChatFormat, policy: Policy, spec) -> int:
    """Tokens the shortest run of a conversation takes: the prompt, a restatement, every
    scripted user turn with a reminder before it (when the policy may remind), a one-token
    simulated message per simulated turn, and one token per reply. Raises UserError when a
    turn cannot be rendered (e.g. placement system without a system role)."""
    reminder = policy.reminder_text(spec) if policy.between_turns else None
    size = len(chat.prompt_ids(spec.system, spec.user)) + spec.n_turns
    size += policy.opening_tokens(chat, spec)
    texts = [text for text, _ in spec.turns]
    texts += ["x"] * (spec.simulator.turns if spec.simulator else 0)
    for text in texts:
        pieces = chat.user_turn_pieces(text, None, reminder, policy.placement)
        size += sum(len(ids) for _, _, ids, _ in pieces)
    return size
