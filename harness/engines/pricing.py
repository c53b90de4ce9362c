"""What a hosted run costs: what it spent, and the budget that stops it before a limit is
crossed. The most it can cost before it starts is the plan's (`harness.units.budgets`: every
unit's requests and tokens, bounded; `harness run --dry-run` prices them with `cost_usd`).

- `cost_usd(price, input, cached_input, output)`: the cost of tokens at a `ModelPrice` (USD
  per million tokens, dated);
- `single_reply_rounds(spec, max_tokens, continue_on_eos)`: the requests one single reply
  takes on a chat endpoint (the plan's budgets count them);
- `Budget`: the chat engine's guard, which refuses a request whose worst case would cross a
  limit (raising `BudgetReached`) while every answered request stays in the run's cache.
"""

from __future__ import annotations

import threading

from harness.config.run import BudgetConfig, ModelPrice
from harness.errors import UserError

MILLION = 1_000_000


class BudgetReached(UserError):
    """The run stopped before a request whose worst case would cross `budget`: not bad input,
    and nothing is lost (the answers so far are cached; raise the limit and run again)."""

    exit_code = 4


def cost_usd(price: ModelPrice, input_tokens: int, cached_input: int, output_tokens: int) -> float:
    """USD for tokens spent: cached input (a part of `input_tokens`) at its own price."""
    cached_price = price.input if price.cached_input is None else price.cached_input
    fresh = max(0, input_tokens - cached_input)
    return (fresh * price.input + cached_input * cached_price + output_tokens * price.output) / (
        MILLION
    )


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


def single_reply_rounds(spec, max_tokens: int, continue_on_eos: bool) -> tuple[int, int]:
    """(requests, reminder insertions) of one single reply at most: one request per
    `every` tokens for a reminding policy; a reply that ends early and is continued
    (`continue_on_eos`) can take a request per generated token."""
    every = getattr(spec, "every", None)
    rounds = -(-max_tokens // every) if every else 1
    if continue_on_eos:
        rounds = max_tokens
    return rounds, rounds - 1
