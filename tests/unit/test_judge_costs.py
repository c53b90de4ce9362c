"""Hosted judges cost what generation costs: their calls are in the dry run's totals and most
cost, they spend from the run's `budget` (one guard per model, shared with generation) and keep
their answers in the run's request cache, and the manifest's cost per condition counts them
(each verdict once). Against the in-process chat-completions stand-in (tests/chat_server.py):
no model is started."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from harness.units.run_units import TokenBudget

MODEL = "hosted-judge-test"
PRICE = {"input": 2.0, "cached_input": 1.0, "output": 8.0, "as_of": "2026-12-01"}


def _write(tmp_path: Path, url: str = "http://127.0.0.1:9/v1", **extra) -> Path:
    suite = {
        "suite": "j",
        "items": [
            {"id": "one", "system": "Be brief.", "user": "Hi",
             "checks": [{"type": "judge", "rule": "The reply is brief."}]},
            {"id": "talk", "system": "Be brief.", "user": "Hi", "turns": ["And then?"],
             "checks": [{"type": "judge", "rule": "The reply is brief."}]},
        ],
    }  # fmt: skip
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(suite))
    config = {
        "name": "j", "models": [MODEL], "suites": [str(tmp_path / "s.yaml")],
        "policies": ["none"], "samples": 2,
        "generation": {"engine": "chat", "base_url": url, "max_tokens": 48, "turn_tokens": 16},
        "scoring": {"window": 16}, "probe": {"enabled": False},
        "pricing": {MODEL: PRICE}, **extra,
    }  # fmt: skip
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_hosted_judge_calls_are_in_the_plans_totals_and_most_cost(tmp_path):
    from harness.commands.run import most_cost
    from harness.engines.pricing import cost_usd
    from harness.units.plan import plan_run

    plan = plan_run(_write(tmp_path), tmp_path / "out")
    judge = [u for u in plan.units if u.stage == "judge"]
    generate = [u for u in plan.units if u.stage == "generate"]
    assert judge and {u.model for u in judge} == {MODEL}
    budget = sum((u.budget for u in judge + generate), TokenBudget())
    totals = plan.totals.of(MODEL)
    assert totals.planned == budget and totals.to_send == budget  # nothing cached yet
    price = plan.config.pricing[MODEL]
    usd = cost_usd(price, budget.input_tokens, 0, budget.output_tokens)
    assert most_cost(plan)[MODEL].startswith(f"{usd:,.4f} ")
    without = sum((u.budget for u in generate), TokenBudget())
    assert usd > cost_usd(price, without.input_tokens, 0, without.output_tokens)


def test_a_conversations_window_judge_is_planned_for_each_reply_too(tmp_path):
    """turns.csv judges every reply with every check: 2 asks per reply beside the windows'."""
    from harness.units.plan import plan_run

    path = _write(tmp_path)
    config = yaml.safe_load(path.read_text())
    config["items"] = ["talk"]
    path.write_text(yaml.safe_dump(config))
    plan = plan_run(path, tmp_path / "out")
    [generate] = [u for u in plan.units if u.stage == "generate"]
    [judge] = [u for u in plan.units if u.stage == "judge"]
    # 2 replies of <= 16: the inputs re-send the floor, then the floor and one reply
    floor = (generate.budget.input_tokens // 2 - 16) // 2
    windows = -(-(floor + 2 * 16) // 12)  # the record over 3/4 of a 16-token window
    assert judge.budget.requests == 2 * 2 * (windows + 2)


def _judge_runner(tmp_path, url, budget_of):
    from harness.config.files import load_run_config
    from harness.scoring.judge import JudgeDefaults, JudgeRunner
    from harness.store import RunStore

    config = load_run_config(_write(tmp_path, url, budget={"output_tokens": 400}))
    store = RunStore(tmp_path / "out")
    defaults = JudgeDefaults(MODEL, config.generation)
    runner = JudgeRunner(store, defaults, budget_of=budget_of(config),
                         request_cache=store.cache / "requests")  # fmt: skip
    return config, store, runner


def test_a_hosted_judge_spends_from_the_runs_budget_and_its_cache(tmp_path, stand_in):
    from harness.checks.judge import JudgeCheck
    from harness.engines.pool import EnginePool
    from harness.engines.pricing import BudgetReached

    pool = EnginePool()
    config, store, runner = _judge_runner(
        tmp_path, stand_in.url, lambda c: lambda model: pool.budget(c, model)
    )
    budget = pool.budget(config, MODEL)
    assert budget is pool.budget(config, MODEL)  # one guard per model for the whole run
    check = JudgeCheck(type="judge", rule="The reply is brief.")
    with runner:
        results = runner.verdicts(check, ["Short.", "Also short."])
    assert len(results) == 2
    sent = stand_in.requests.total()
    assert sent >= 2 and budget.output_tokens > 0  # the judge's tokens are the run's
    assert len(list((store.cache / "requests").rglob("*.json"))) == sent
    verdicts = [store.get("judge", k) for k in _keys(runner, check, ["Short.", "Also short."])]
    assert all(len(v["api_tokens"]) == 3 and v["api_tokens"][2] > 0 for v in verdicts)
    # generation spent (almost) all of it: the next judge call's worst case crosses the limit
    budget.output_tokens = 400 - 50
    with pytest.raises(BudgetReached, match="budget reached"), runner:
        runner.verdicts(check, ["A third text."])
    assert stand_in.requests.total() == sent


def _keys(runner, check, texts):
    from harness.scoring.judge import verdict_key

    return [verdict_key(runner.target(check.judge), check.rule, t) for t in texts]


def test_condition_costs_count_each_verdict_once_at_the_judges_price(tmp_path):
    from harness.checks.judge import JudgeCheck
    from harness.engines.pricing import cost_usd
    from harness.scoring.judge import judge_spend
    from harness.stages.report import condition_costs

    config, store, runner = _judge_runner(tmp_path, "http://127.0.0.1:9/v1", lambda c: None)
    check = JudgeCheck(type="judge", rule="The reply is brief.")
    a, b = _keys(runner, check, ["first", "second"])
    store.put("judge", a, {"pass": True, "reason": "", "attempts": 1, "api_tokens": [30, 10, 5]})
    store.put("judge", b, {"pass": True, "reason": "", "attempts": 2, "api_tokens": [70, 0, 9]})
    where = {"model": MODEL, "item": "one", "policy": "none"}
    other = {**where, "policy": "periodic"}
    # "first" is judged in both conditions: paid once, counted under the first
    jobs = [(check, where, "first"), (check, where, "second"), (check, other, "first")]
    spend = judge_spend(runner, jobs)
    assert spend == {(MODEL, "one", "none"): {MODEL: [3, 100, 10, 14]}}
    [row] = condition_costs(config, [], spend)
    assert row["judge_requests"] == 3 and row["judge_output_tokens"] == 14
    assert row["samples"] == 0 and row["input_tokens"] == 0
    usd = round(cost_usd(config.pricing[MODEL], 100, 10, 14), 6)
    assert row["judge_cost_usd"] == usd and row["cost_usd"] == usd
