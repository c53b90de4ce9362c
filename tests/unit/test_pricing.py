"""Cost bounds and the budget (harness/engines/pricing.py): the arithmetic by hand and the
budget's refusal of a request that could cross it. A run stopped by its budget and resumed, and
the bound over a real run's spending: tests/e2e/test_chat_cli.py."""

from __future__ import annotations

from datetime import date

import pytest

from harness.config.run import BudgetConfig, ModelPrice
from harness.engines.pricing import (
    Budget,
    BudgetReached,
    TokenMaxima,
    conversation_maxima,
    cost_usd,
    max_cost,
)

PRICE = ModelPrice(input=2.5, cached_input=1.25, output=10.0, as_of=date(2026, 12, 1))


def test_conversation_maxima_resend_the_history():
    # prompt 100, user turns 10 and 20, replies <= 50: inputs 100, 160, 230
    bound = conversation_maxima(100, [10, 20], 50)
    assert bound == TokenMaxima(requests=3, input_tokens=490, output_tokens=150)
    assert conversation_maxima(100, [], 50, total_output=30).output_tokens == 30
    assert conversation_maxima(10, [5], 4, reminder_tokens=3) == TokenMaxima(2, 10 + 22, 8)


def test_max_cost_and_cost_usd():
    bounds = max_cost({"gpt": TokenMaxima(3, 1_000_000, 200_000), "free": TokenMaxima(1, 1, 1)},
                      {"gpt": PRICE})  # fmt: skip
    assert bounds["gpt"].usd == pytest.approx(2.5 + 2.0) and bounds["gpt"].as_of == "2026-12-01"
    assert bounds["free"].usd is None
    assert cost_usd(PRICE, 1_000_000, 400_000, 0) == pytest.approx(0.6 * 2.5 + 0.4 * 1.25)


def test_undated_price_is_refused():
    with pytest.raises(ValueError, match="as_of"):
        ModelPrice(input=1, output=2)


def test_budget_refuses_the_request_that_could_cross_it():
    budget = Budget(BudgetConfig(output_tokens=100), PRICE)
    budget.reserve(10, 60)
    with pytest.raises(BudgetReached, match="output tokens 120 > budget.output_tokens 100"):
        budget.reserve(10, 60)  # 60 in flight + 60: could cross
    budget.settle((10, 60), (8, 0, 20))  # the first took 20
    budget.reserve(10, 60)  # 20 spent + 60 fits
    assert budget.spent_usd() == pytest.approx(cost_usd(PRICE, 8, 0, 20))
