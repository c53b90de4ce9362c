"""Every unit's token budget: a generation unit's (its samples' requests, each re-sending
what the endpoint must see again) and the units the run makes of its records: single-turn
twins, forks, probe pairs, judge calls and simulated users' turns.

Budgets are counted in the `ChatFormat` the plan gives: the model's tokenizer for a local
model; for a hosted one (`harness.units.plan`) a bound on any provider's count of the
harness's own text (`harness.engines.positions.ByteBound`), with what the model writes counted at
its `max_tokens`. So the plan's totals are the one bound of a run's requests and tokens: the
dry run, its most cost and the pricing tests read them.
"""

from __future__ import annotations

from harness.capabilities import Capability
from harness.checks.judge import (
    JUDGE_MAX_TOKENS,
    RUBRIC_SYSTEM,
    VERDICT_PREFILL,
    JudgeCheck,
    rubric_user_message,
)
from harness.config.run import RunConfig
from harness.engines.kinds import engine_can
from harness.engines.pricing import single_reply_rounds
from harness.models import ResolvedModel
from harness.policies import policy_run
from harness.policies.base import SampleSpec
from harness.policies.conversation import conversation_floor
from harness.text.chat import TEMPLATE_DEFAULT, ChatFormat
from harness.units.run_units import TokenBudget, Unit


class SampleLengths:
    """Per sample: its prompt, the tokens its record may hold and each request's budget."""

    def __init__(self, config: RunConfig, chat: ChatFormat, policy, spec: SampleSpec) -> None:
        gen = config.generation
        self.prompt = len(chat.prompt_ids(spec.system, spec.user))
        if spec.conversation:
            reply = gen.turn_tokens or gen.max_tokens
            floor = conversation_floor(chat, policy, spec) + sum(
                len(chat.encode(text)) for text in spec.logged
            )
            if spec.simulator:  # the floor counts one token a simulated message: at most its max
                floor += spec.simulator.turns * (spec.simulator.max_tokens - 1)
            n = spec.n_turns
            # reply k re-sends everything before it: the floor and k - 1 replies
            self.requests = [TokenBudget(requests=1, input_tokens=floor + k * reply,
                                         output_tokens=reply) for k in range(n)]  # fmt: skip
            self.record = floor + n * reply
            self.replies = n
        else:
            reply = gen.single_budget
            extra = policy.injection_budget(chat, spec, reply)
            # a local engine writes the reply in one call; a chat endpoint takes a request per
            # reminder round or continuation, each re-sending the text so far (every reminder
            # counted in each: a bound) and each billed for its share of the reply
            rounds = 1
            if engine_can(gen, Capability.METERED):
                rounds = single_reply_rounds(policy.spec, reply, gen.continue_on_eos)[0]
            step = -(-reply // rounds)
            self.requests = [
                TokenBudget(requests=1, input_tokens=self.prompt + extra + r * step,
                            output_tokens=min(step, reply - r * step))
                for r in range(rounds)
            ]  # fmt: skip
            self.record = self.prompt + extra + reply
            self.replies = 1

    @property
    def total(self) -> TokenBudget:
        return sum(self.requests, TokenBudget())


def with_budgets(
    config: RunConfig, chat: ChatFormat, model: ResolvedModel, units: list[Unit], twin: str | None
) -> list[Unit]:
    """The generation units with their budgets, then the single-turn twins, forks and probe
    pairs the run makes of their records (`twin`: the untrained twin the probe runs too)."""
    out, later = [], []
    for unit in units:
        policy = policy_run(unit.policy_spec, config.generation.continue_on_eos, lambda *_: False)
        lengths = [SampleLengths(config, chat, policy, spec) for spec in unit.specs]
        unit.budget = sum((one.total for one in lengths), TokenBudget())
        out.append(unit)
        later += _after(config, chat, unit, lengths, [model.name] + ([twin] if twin else []))
    return out + later


def _after(config, chat, unit: Unit, lengths: list[SampleLengths], probe_models) -> list[Unit]:
    """The units made of this generation unit's records, counted per record."""
    pairs = list(zip(unit.specs, lengths, strict=True))
    made = []

    def add(stage, model, chosen, budget):
        if chosen and budget.requests:
            items = list(dict.fromkeys(spec.meta["item"] for spec, _ in chosen))
            made.append(Unit(stage=stage, model=model, policy=unit.policy, items=items,
                             samples=len(chosen), budget=budget))  # fmt: skip

    forks = config.forks
    if forks is not None and (forks.policies is None or unit.policy in forks.policies):
        chosen = [(s, n) for s, n in pairs if s.meta["sample"] < forks.records]
        add("forks", unit.model, chosen, sum((_fork(config, chat, s, n) for s, n in chosen),
                                             TokenBudget()))  # fmt: skip
    if config.probe.enabled:
        limit = config.probe.samples or (config.first_samples if config.sequential else None)
        chosen = [(s, n) for s, n in pairs if limit is None or s.meta["sample"] < limit]
        budget = sum((_probe_pair(config, chat, s, n) for s, n in chosen), TokenBudget())
        for name in probe_models:
            add("probe", name, chosen, budget)
    twins = config.conversations is not None and config.conversations.twin
    if twins and unit.policy == "none":
        chosen = [(s, n) for s, n in pairs if s.turns and s.history is None]
        reply = config.generation.turn_tokens or config.generation.max_tokens
        budget = sum((TokenBudget(requests=len(n.requests) - 1,
                                  input_tokens=sum(r.input_tokens for r in n.requests[1:]),
                                  output_tokens=reply * (len(n.requests) - 1))
                      for _, n in chosen), TokenBudget())  # fmt: skip
        add("single-turn", unit.model, chosen, budget)
    return made + _simulated_users(chat, unit, pairs) + _judge_units(config, chat, unit, pairs)


def _baseline(chat: ChatFormat, spec: SampleSpec, baseline: str, text: str | None) -> int:
    system = {"none": None, "default": TEMPLATE_DEFAULT}.get(baseline, text)
    return len(chat.prompt_ids(system, spec.user))


def _fork(config: RunConfig, chat: ChatFormat, spec: SampleSpec, n: SampleLengths) -> TokenBudget:
    """Every position x draw x arm of one record; arm prompts: the record's prompt (or the
    baseline's, the longer) plus the first t continuation tokens."""
    forks = config.forks
    assert forks is not None
    prompt = max(n.prompt, _baseline(chat, spec, forks.baseline, forks.baseline_text))
    arms = 2 * forks.draws
    if forks.at is None:  # at turn boundaries (`at_turns`): each arm re-sends at most the record
        reply = max(forks.tokens, config.generation.turn_tokens or 0)
        count = arms * len(forks.at_turns or [])
        return TokenBudget(requests=count, input_tokens=count * (prompt + n.record),
                           output_tokens=count * reply)  # fmt: skip
    draws = TokenBudget(
        requests=arms * len(forks.at),
        input_tokens=arms * sum(prompt + t for t in forks.at),
        output_tokens=arms * len(forks.at) * forks.tokens,
    )
    if not engine_can(config.generation, Capability.PREFIX_CACHE) or arms * len(forks.at) < 4:
        return draws
    # `forks.prime_prefixes`: one 1-token request per arm for a prefix-caching engine
    primes = TokenBudget(requests=2, input_tokens=2 * (prompt + forks.at[-1]), output_tokens=2)
    return draws + primes


def _probe_pair(
    config: RunConfig, chat: ChatFormat, spec: SampleSpec, n: SampleLengths
) -> TokenBudget:
    """Two forwards: the record, and its continuation after the baseline prompt."""
    base = _baseline(chat, spec, config.probe.baseline, config.probe.baseline_text)
    return TokenBudget(requests=2, input_tokens=n.record + (n.record - n.prompt + base))


def _simulated_users(chat: ChatFormat, unit: Unit, pairs) -> list[Unit]:
    """A user simulator's requests on this unit's conversations, on the model that plays the
    user (the run's own where the simulator names none): one per simulated turn, each sending
    its system prompt and at most the whole conversation, each writing at most `max_tokens`."""
    by_item = {sel.item.id: sel.item for sel in unit.selected}
    budgets: dict[str, tuple[TokenBudget, list[SampleSpec]]] = {}
    for spec, n in pairs:
        sim = by_item[spec.meta["item"]].user_simulator
        if spec.simulator is None or sim is None:
            continue
        system = len(chat.prompt_ids(sim.system, ""))
        turns = TokenBudget(requests=sim.turns, input_tokens=sim.turns * (system + n.record),
                            output_tokens=sim.turns * sim.max_tokens)  # fmt: skip
        budget, specs = budgets.get(sim.model or unit.model, (TokenBudget(), []))
        budgets[sim.model or unit.model] = (budget + turns, [*specs, spec])
    return [
        Unit(
            stage="simulated-user",
            model=model,
            policy=unit.policy,
            items=list(dict.fromkeys(s.meta["item"] for s in specs)),
            samples=len(specs),
            budget=budget,
        )  # fmt: skip
        for model, (budget, specs) in budgets.items()
    ]


def _judge_units(config, chat: ChatFormat, unit: Unit, pairs) -> list[Unit]:
    """Judge checks' calls on this unit's records: one per window (at most the record's length
    over 3/4 of a window, sentence-aligned windows being that short) or per reply, each
    re-asked once when malformed; a conversation's window checks also judge each reply
    (turns.csv). On a chat endpoint they count in its model's totals and most cost."""
    by_item = {sel.item.id: sel.item for sel in unit.selected}
    window = config.scoring.window
    shortest = max(1, (3 * window) // 4)
    budgets: dict[str, TokenBudget] = {}
    for spec, n in pairs:
        for check in by_item[spec.meta["item"]].checks:
            if not isinstance(check, JudgeCheck):
                continue
            judge = check.judge.model or config.models[0]
            # in the run model's tokens: the judge's template is near enough for a budget
            rubric = len(chat.prompt_ids(RUBRIC_SYSTEM, rubric_user_message(check.criterion, "")))
            rubric += len(chat.encode(VERDICT_PREFILL))
            texts = -(-n.record // shortest) if check.scope == "window" else n.replies
            text = (3 * window) // 2 if check.scope == "window" else n.record
            calls = TokenBudget(requests=2 * texts, input_tokens=2 * texts * (rubric + text),
                                output_tokens=2 * texts * JUDGE_MAX_TOKENS)  # fmt: skip
            if spec.conversation and check.scope == "window":  # turns.csv: each reply too
                k = 2 * n.replies
                reply = config.generation.turn_tokens or config.generation.max_tokens
                calls += TokenBudget(requests=k, input_tokens=k * (rubric + reply),
                                     output_tokens=k * JUDGE_MAX_TOKENS)  # fmt: skip
            budgets[judge] = budgets.get(judge, TokenBudget()) + calls
    return [
        Unit(
            stage="judge",
            model=judge,
            policy=unit.policy,
            items=unit.items,
            samples=len(pairs),
            budget=budget,
        )  # fmt: skip
        for judge, budget in budgets.items()
    ]
