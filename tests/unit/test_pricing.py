"""Cost and the budget (harness/engines/pricing.py): the arithmetic by hand and the budget's
refusal of a request that could cross it. The plan's bound on a hosted run
(harness/units/budgets.py): tests/unit/test_plan_bounds.py; a run stopped by its budget and
resumed, and the plan's bound over a real run's spending: tests/e2e/test_chat_cli.py."""

from __future__ import annotations

from datetime import date

import pytest

from harness.config.run import BudgetConfig, ModelPrice
from harness.engines.pricing import Budget, BudgetReached, cost_usd

PRICE = ModelPrice(input=2.5, cached_input=1.25, output=10.0, as_of=date(2026, 12, 1))


def test_cost_usd_prices_cached_input_apart():
    assert cost_usd(PRICE, 1_000_000, 0, 200_000) == pytest.approx(2.5 + 2.0)
    assert cost_usd(PRICE, 1_000_000, 400_000, 0) == pytest.approx(0.6 * 2.5 + 0.4 * 1.25)
    no_cache_price = ModelPrice(input=2.5, output=10.0, as_of=date(2026, 12, 1))
    assert cost_usd(no_cache_price, 100, 100, 0) == pytest.approx(100 * 2.5 / 1e6)


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
