"""Cost bounds and the budget (harness/engines/pricing.py): the arithmetic by hand, a bound no
real run exceeds, and a `harness run` on the chat stand-in that stops before its budget,
exits 4 with one line, and goes on from there when the budget is raised, sending no request
twice."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest
import yaml

from harness.config import BudgetConfig, ModelPrice
from harness.engines.pricing import (
    Budget,
    BudgetReached,
    TokenMaxima,
    conversation_maxima,
    cost_usd,
    max_cost,
)
from tests.chat_server import ChatStandIn
from tests.unit.test_chat_engine import _config, _run

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


def test_run_stops_before_its_budget_and_resumes(tmp_path):
    server = ChatStandIn()
    try:
        path = _config(tmp_path, server.url)
        config = yaml.safe_load(path.read_text())
        config["budget"] = {"output_tokens": 120}
        path.write_text(yaml.safe_dump(config))
        out = tmp_path / "out"
        stopped = _run(path, out)
        assert stopped.returncode == 4, stopped.stderr[-2000:]
        assert "budget reached" in stopped.stderr.strip().splitlines()[-1]
        first = server.requests.total()
        assert first > 0
        config["budget"] = {"output_tokens": 100_000}
        path.write_text(yaml.safe_dump(config))
        done = _run(path, out)
        assert done.returncode == 0, done.stderr[-2000:]
        assert max(server.requests.values()) == 1 and server.requests.total() > first
    finally:
        server.close()


def _maxima(path):
    from harness.config_files import load_run_config_and_suites
    from harness.engines.pricing import run_maxima
    from harness.plan import select_items
    from harness.selection import policy_units

    config, suites = load_run_config_and_suites(path)
    return config, run_maxima(config, policy_units(config, select_items(config, suites)))


def test_shipped_hosted_example_is_priced_and_bounded(monkeypatch):
    from harness.engines.pricing import max_cost
    from harness.engines.refusals import chat_refusals

    root = Path(__file__).resolve().parents[2]
    monkeypatch.chdir(root)
    config, maxima = _maxima(root / "configs" / "hosted-example.yaml")
    assert config.generation.engine == "chat" and chat_refusals(config) == []
    assert config.pricing["gpt-4o-mini"].as_of == date(2026, 12, 1)
    [bound] = max_cost(maxima, config.pricing).values()
    # 3 items x 3 conversation policies on conversations, 1 single reply x none; 8 samples
    assert bound.maxima.requests == 8 * (1 + 3 * 6 + 3 * 7) and bound.usd > 0


def test_maxima_bound_what_a_run_spent(tmp_path):
    import json

    server = ChatStandIn()
    try:
        path = _config(tmp_path, server.url)
        assert _run(path, tmp_path / "out").returncode == 0
        _, maxima = _maxima(path)
        spent = json.loads((tmp_path / "out" / "manifest.json").read_text())["hosted"]
        bound, used = maxima["stand-in"], spent["stand-in"]
        assert used["input_tokens"] <= bound.input_tokens
        assert used["output_tokens"] <= bound.output_tokens
        assert used["requests"] <= bound.requests
    finally:
        server.close()
