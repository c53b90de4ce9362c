"""What a hosted run costs: the most it can cost before it starts, what it spent, and the
budget that stops it before a limit is crossed.

Pure functions over token counts and `ModelPrice`s (USD per million tokens, dated), so the
dry run (`harness run --dry-run`), the manifest and the budget share one arithmetic:

- `TokenMaxima`: the most input and output tokens one model's requests can take;
- `conversation_maxima(...)`: those maxima for one sample (a single reply or a conversation
  that re-sends its whole history with every reply);
- `max_cost(maxima, pricing)` -> `{model: CostBound}`: the most each model can cost, None
  where the config gives no price;
- `cost_usd(price, input, cached_input, output)`: the cost of tokens spent;
- `Budget`: the chat engine's guard, which refuses a request whose worst case would cross a
  limit (raising `BudgetReached`) while every answered request stays in the run's cache.

Input maxima count cached input at the full input price (a bound: cache hits only lower it).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from harness.config.run import BudgetConfig, ModelPrice
from harness.errors import UserError

MILLION = 1_000_000


class BudgetReached(UserError):
    """The run stopped before a request whose worst case would cross `budget`: not bad input,
    and nothing is lost (the answers so far are cached; raise the limit and run again)."""

    exit_code = 4


@dataclass(frozen=True)
class TokenMaxima:
    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0

    def __add__(self, other: TokenMaxima) -> TokenMaxima:
        return TokenMaxima(
            self.requests + other.requests,
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
        )


@dataclass(frozen=True)
class CostBound:
    maxima: TokenMaxima
    usd: float | None  # None: no price for the model in the config
    as_of: str | None  # the price's date


def conversation_maxima(
    prompt_tokens: int,
    user_tokens: Sequence[int],
    reply_tokens: int,
    total_output: int | None = None,
    reminder_tokens: int = 0,
) -> TokenMaxima:
    """The most one sample can send and receive: reply k (1-based) re-sends the prompt, user
    turns 2..k, the k - 1 replies before it (each at most `reply_tokens`) and a reminder per
    turn; the output is at most `reply_tokens` per reply and `total_output` in all. A single
    reply is a conversation of one turn (`user_tokens` empty)."""
    replies = 1 + len(user_tokens)
    inputs, history = 0, prompt_tokens
    for k in range(replies):
        if k > 0:
            history += reply_tokens + user_tokens[k - 1] + reminder_tokens
        inputs += history
    output = replies * reply_tokens
    if total_output is not None:
        output = min(output, total_output)
    return TokenMaxima(requests=replies, input_tokens=inputs, output_tokens=output)


def cost_usd(price: ModelPrice, input_tokens: int, cached_input: int, output_tokens: int) -> float:
    """USD for tokens spent: cached input (a part of `input_tokens`) at its own price."""
    cached_price = price.input if price.cached_input is None else price.cached_input
    fresh = max(0, input_tokens - cached_input)
    return (fresh * price.input + cached_input * cached_price + output_tokens * price.output) / (
        MILLION
    )


def max_cost(
    maxima: Mapping[str, TokenMaxima], pricing: Mapping[str, ModelPrice] | None
) -> dict[str, CostBound]:
    """The most each model's requests can cost (`usd` None where no price is given)."""
    out = {}
    for model, bound in maxima.items():
        price = (pricing or {}).get(model)
        usd = None if price is None else cost_usd(price, bound.input_tokens, 0, bound.output_tokens)
        out[model] = CostBound(bound, usd, None if price is None else price.as_of.isoformat())
    return out


class Budget:
    """The limits of `BudgetConfig` over one engine's requests (thread-safe). `reserve`
    before a request (its worst case: the input estimate and max_tokens of output), `settle`
    with what the endpoint counted, `release` when the request failed."""

    def __init__(self, limits: BudgetConfig | None, price: ModelPrice | None) -> None:
        self.limits = limits
        self.price = price
        self._lock = threading.Lock()
        self.input_tokens = self.cached_input = self.output_tokens = 0
        self._held = (0, 0)  # input, output tokens reserved by requests in flight

    def spent_usd(self) -> float | None:
        if self.price is None:
            return None
        return cost_usd(self.price, self.input_tokens, self.cached_input, self.output_tokens)

    def reserve(self, input_tokens: int, output_tokens: int) -> None:
        limits = self.limits
        if limits is None:
            return
        with self._lock:
            held_in, held_out = self._held
            total_in = self.input_tokens + held_in + input_tokens
            total_out = self.output_tokens + held_out + output_tokens
            crossed = None
            if limits.input_tokens is not None and total_in > limits.input_tokens:
                crossed = f"input tokens {total_in} > budget.input_tokens {limits.input_tokens}"
            elif limits.output_tokens is not None and total_out > limits.output_tokens:
                crossed = f"output tokens {total_out} > budget.output_tokens {limits.output_tokens}"
            elif limits.usd is not None and self.price is not None:
                worst = cost_usd(self.price, total_in, self.cached_input, total_out)
                if worst > limits.usd:
                    crossed = f"USD {worst:.4f} > budget.usd {limits.usd}"
            if crossed:
                raise BudgetReached(
                    f"budget reached before the next request (its worst case: {crossed}); "
                    "every answer so far is kept: raise the budget and run again to go on"
                )
            self._held = (held_in + input_tokens, held_out + output_tokens)

    def settle(self, reserved: tuple[int, int], spent: tuple[int, int, int]) -> None:
        """A reserved request answered: `spent` = (input, cached input, output) tokens."""
        with self._lock:
            self._release(reserved)
            self.input_tokens += spent[0]
            self.cached_input += spent[1]
            self.output_tokens += spent[2]

    def release(self, reserved: tuple[int, int]) -> None:
        with self._lock:
            self._release(reserved)

    def _release(self, reserved: tuple[int, int]) -> None:
        if self.limits is not None:
            self._held = (self._held[0] - reserved[0], self._held[1] - reserved[1])


def utf8_bytes(text: str) -> int:
    """A bound on any byte-level tokenizer's token count of `text` (no token is shorter than
    one byte): the default count of the maxima, so a maximum is never an underestimate."""
    return len(text.encode())


def single_reply_rounds(spec, max_tokens: int, continue_on_eos: bool) -> tuple[int, int]:
    """(requests, reminder insertions) of one single reply at most: one request per
    `every` tokens for a reminding policy; a reply that ends early and is continued
    (`continue_on_eos`) can take a request per generated token."""
    every = getattr(spec, "every", None)
    rounds = -(-max_tokens // every) if every else 1
    if continue_on_eos:
        rounds = max_tokens
    return rounds, rounds - 1


def run_maxima(config, units, count=utf8_bytes) -> dict[str, TokenMaxima]:
    """The most input and output tokens each model's requests can take in a run of `config`:
    `units` = `harness.units.selection.policy_units(config, items)` (policy spec, the selected items
    it runs on; each with `.item`, a suite's TaskItem), every sample of each. Single replies
    count their reminder rounds and continuations, conversations re-send the whole history
    with every reply, simulated users' requests are included at their max_tokens. `count`
    gives a text's tokens (default its UTF-8 bytes: a bound, never an underestimate). Judge
    checks' requests are not included: one per distinct window text at most, cached."""
    per_sample = TokenMaxima()
    for spec, unit_items in units:
        for sel in unit_items:
            per_sample = per_sample + _sample_maxima(config, spec, sel.item, count)
    n = config.sequential.max if config.sequential else config.samples
    total = TokenMaxima(
        n * per_sample.requests, n * per_sample.input_tokens, n * per_sample.output_tokens
    )
    return dict.fromkeys(config.models, total)


def _sample_maxima(config, spec, item, count) -> TokenMaxima:
    gen = config.generation
    reminder = count(getattr(spec, "text", None) or item.reminder or "") + 16
    base = count(item.system) + count(item.user or "") + 16  # + the messages' framing
    if spec.name == "restate":  # the prefill the reply continues (chat.protocol anthropic)
        base += count(item.restatement or "")
    if not item.is_conversation:
        reply = gen.single_budget
        rounds, reminders = single_reply_rounds(spec, reply, gen.continue_on_eos)
        per_round = base + reply + reminders * reminder
        return TokenMaxima(rounds, rounds * per_round, reply)
    sim = item.user_simulator
    users = [count(t.user) + 8 for t in item.turns or []]
    users += [sim.max_tokens + 8] * sim.turns if sim else []
    reminded = reminder if spec.name != "none" else 0
    reply = gen.turn_tokens or gen.max_tokens
    one = conversation_maxima(base, users, reply, gen.max_tokens, reminded)
    if sim is None:
        return one
    # the simulator sees the whole conversation (roles swapped) under its own system prompt
    longest = base + sum(users) + one.requests * (reply + reminded) + count(sim.system) + 16
    return one + TokenMaxima(sim.turns, sim.turns * longest, sim.turns * sim.max_tokens)
