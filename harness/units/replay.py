"""Replay: a suite item's logged conversations (`log:`), answered again by the model
(docs/architecture.md, "Replay").

For each logged conversation and each of its assistant turns k, `reference` regenerates reply
k given the logged history before it (logged user AND assistant turns), under the item's
system prompt and the policy; `own` runs free from turn 1 on the logged user turns, its own
replies becoming the history. The logged conversation itself is a record too (policy and
history `logged`, its replies segments of kind `logged`), so its replies are scored beside
the replays. Everything here is read and checked before the run (`check_replays`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.config.run import RunConfig, TaskItem
from harness.errors import UserError, notice
from harness.policies import NonePolicy, policy_run
from harness.policies.base import Policy, SampleSpec, SampleState
from harness.policies.conversation import conversation_floor, prefill_history
from harness.policies.driver import state_record
from harness.text.chat import ChatFormat
from harness.text.chatlogs import LoggedConversation, read_chat_logs
from harness.text.records import GenerationRecord
from harness.units.selection import Selected, policy_units, sample_seed, sample_specs

LOGGED = "logged"  # the policy label and history of a logged conversation's own record


class LogError(UserError):
    """A problem of a log, named by its own `PATH:LINE` (not prefixed with the config's)."""


@dataclass(frozen=True)
class LoggedTalk:
    """A logged conversation cut into turns: user message k and the logged reply to it."""

    id: str
    where: str  # "PATH:LINE" of the conversation in its log
    users: tuple[str, ...]
    replies: tuple[str, ...]  # len(replies) = the turns a replay answers
    tool_messages: int = 0  # tool calls and results, in `users` as text


def _talk(conv: LoggedConversation) -> LoggedTalk:
    """The reader has checked the roles (a user turn first, at least one reply); a trailing
    user turn without a logged reply has nothing to compare with and is not replayed. A
    turn's tool calls and results are written as text after its user message, and a turn
    the assistant answered with tool calls only is joined to the next one
    (`LoggedConversation.exchanges`): the replayed replies are numbered 1.. in order."""
    turns = [(user, reply) for user, reply in conv.exchanges() if reply is not None]
    users, replies = zip(*turns, strict=True)
    tools = sum(len(turn.tools) for turn in conv.turns())
    return LoggedTalk(conv.id, conv.where, tuple(users), tuple(replies), tools)


def logged_talks(item: TaskItem) -> list[LoggedTalk]:
    """The item's logged conversations, in file order (read again on every call: the log is
    streamed, never held beside its parsed form)."""
    try:
        talks = [_talk(conv) for conv in read_chat_logs(Path(item.log))]
    except LogError:
        raise
    except UserError as exc:  # the reader's own `PATH:LINE: problem`
        raise LogError(str(exc)) from None
    if not talks:
        raise LogError(f"{item.log}: no conversation in the log")
    return talks


def _spec(
    config: RunConfig, model: str, sel: Selected, run_id: str, talk: LoggedTalk, history: str,
    k: int, sample: int, index: int,
) -> SampleSpec:  # fmt: skip
    """Reference: turns 1..k, the logged replies before k as history; own: every turn."""
    item = sel.item
    last = k if history == "reference" else len(talk.replies)
    # own shares reference's turn-1 seed: both answer turn 1 from the same prompt, so their
    # first replies are one and the same draw, and they part only where the histories do
    tag = f"{item.id}/{talk.id}/{k if history == 'reference' else 1}"
    return SampleSpec(
        system=item.system,
        user=talk.users[0],
        reminder=item.reminder or item.system,
        restatement=item.restatement or "",
        seed=sample_seed(config.generation.seed, tag, sample),
        meta={
            "model": model,
            "task": sel.suite,
            "item": item.id,
            "sample": index,
            "run_id": run_id,
            "conversation_id": talk.id,
        },
        history=history,
        turns=[(text, False) for text in talk.users[1:last]],
        logged=list(talk.replies[: k - 1]) if history == "reference" else [],
    )


def replay_specs(
    config: RunConfig,
    model: str,
    sel: Selected,
    run_id: str,
    samples: range,
    talks: list[LoggedTalk] | None = None,
) -> list[SampleSpec]:
    """Every sample of a replay item, in `replay` order, then conversation, then (reference)
    turn, then sample; `sample` numbers them, so (item, policy, sample) names one record."""
    talks = logged_talks(sel.item) if talks is None else talks
    specs = []
    for history in sel.item.replay:
        for talk in talks:
            turns = range(1, len(talk.replies) + 1) if history == "reference" else [0]
            for k in turns:
                for sample in samples:
                    args = (talk, history, k, sample, len(specs))
                    specs.append(_spec(config, model, sel, run_id, *args))
    return specs


def run_specs(
    config: RunConfig, model: str, items: list[Selected], run_id: str, samples: range | None = None
) -> list[SampleSpec]:
    """Every sample of `items` for one model (`samples`, default the first
    `config.first_samples`): `selection.sample_specs` for scripted items, `replay_specs` for
    replay items, in item order."""
    samples = samples or range(config.first_samples)
    out: list[SampleSpec] = []
    for sel in items:
        if sel.item.is_replay:
            out += replay_specs(config, model, sel, run_id, samples)
        else:
            out += sample_specs(config, model, [sel], run_id, samples)
    return out


def logged_records(
    chat: ChatFormat, sel: Selected, model: str, run_id: str, engine: str
) -> list[GenerationRecord]:
    """One record per logged conversation: the item's system prompt and the logged turns as
    they are (no policy), the replies kind `logged`; sample = the conversation's index."""
    out = []
    policy = policy_run(NonePolicy(), False, None)
    for index, talk in enumerate(logged_talks(sel.item)):
        spec = SampleSpec(
            system=sel.item.system,
            user=talk.users[0],
            meta={"model": model, "task": sel.suite, "item": sel.item.id, "sample": index,
                  "run_id": run_id, "conversation_id": talk.id},
            turns=[(text, False) for text in talk.users[1:]],
            logged=list(talk.replies),
            history=LOGGED,
        )  # fmt: skip
        state = SampleState(spec=spec, prompt_ids=chat.prompt_ids(spec.system, spec.user))
        state.counts.prompt = len(state.prompt_ids)
        prefill_history(state, chat, policy, 1 << 62)  # checked against the context before
        state.finish_reason = "stop"
        record = state_record(state, chat, policy, engine)
        out.append(record.model_copy(update={"policy": LOGGED, "seed": 0}))
    return out


def check_replays(config: RunConfig, chat: ChatFormat, items: list[Selected], context: int):
    """Before the run: every replay item's log parses and each conversation is usable, no
    policy prefills the reply (`restate`), and under every policy the longest history (the
    logged turns before the last reply, a reminder before each user turn where the policy
    may remind, and one token per reply) fits the context; one line `PATH:LINE: ...`."""
    replays = [sel for sel in items if sel.item.is_replay]
    for sel in replays:
        with_tools = sum(talk.tool_messages > 0 for talk in logged_talks(sel.item))
        if with_tools:
            notice(
                f"{sel.item.log}: {with_tools} conversation{'s' * (with_tools != 1)} with "
                "tool calls: each turn's tool calls and results are replayed as text after its "
                "user message (the chat template's tool role is not used)"
            )
    if replays and config.sequential is not None:
        raise UserError(
            f"item '{replays[0].item.id}': a replay item cannot sample until decided "
            "(`samples: {min, max}`): give `samples` a number"
        )
    for spec, unit_items in policy_units(config, items):
        policy = policy_run(spec, config.generation.continue_on_eos, violates=lambda *_: False)
        for sel in unit_items:
            if not sel.item.is_replay:
                continue
            if spec.name == "restate":
                raise UserError(
                    f"item '{sel.item.id}', policy 'restate': a replay's first reply is "
                    "answered from the log's history, not prefilled: drop the policy"
                )
            for talk in logged_talks(sel.item):
                _check_talk(config, chat, policy, sel, talk, context)


def _check_budget(config: RunConfig, sel: Selected, talk: LoggedTalk) -> None:
    """Under `own` every reply of a conversation must get `turn_tokens` within `max_tokens`
    (as for scripted conversations: refused rather than cut short); a reference replay
    writes one reply."""
    gen = config.generation
    replies = len(talk.replies)
    if "own" in sel.item.replay and gen.turn_tokens and replies * gen.turn_tokens > gen.max_tokens:
        need = replies * gen.turn_tokens
        raise LogError(
            f"{talk.where}: conversation '{talk.id}': {replies} replies x "
            f"generation.turn_tokens {gen.turn_tokens} = {need} tokens exceed "
            f"generation.max_tokens {gen.max_tokens}, so its own-history replay would be cut "
            f"short: raise max_tokens to {need} or lower turn_tokens"
        )


def _check_talk(config, chat, policy: Policy, sel: Selected, talk: LoggedTalk, context: int):
    _check_budget(config, sel, talk)
    need = 0
    for history in sel.item.replay:
        k = len(talk.replies)
        spec = _spec(config, "", sel, "", talk, history, k, 0, 0)
        floor = conversation_floor(chat, policy, spec)
        if history == "reference":  # the logged replies before the last one are history
            floor += sum(len(chat.encode(text)) for text in spec.logged)
        need = max(need, floor)
    if need > context:
        raise LogError(
            f"{talk.where}: conversation '{talk.id}': its history needs at least {need} tokens "
            f"(prompt, the logged turns, reminders under policy '{policy.label}', one token "
            f"per reply) but the model's context is {context}"
        )
