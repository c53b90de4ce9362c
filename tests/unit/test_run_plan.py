"""The plan as the run's list of units (harness.units.run_units) and `harness run --dry-run`: counts
and token budgets of configs/quickstart.yaml worked out by hand, no engine started (the unit
tier's ModelGuard fails a test that starts one), nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from harness.units.run_units import ModelTotals, PlanTotals, TokenBudget, plan_totals

ROOT = Path(__file__).parent.parent.parent
QUICKSTART = ROOT / "configs" / "quickstart.yaml"
MODEL = "smollm2-135m-instruct"


@pytest.fixture(scope="module", autouse=True)
def empty_cache(tmp_path_factory):
    """An empty HARNESS_CACHE, as on a fresh machine: planning reads the embedded GGUF's
    config and tokenizer and builds no model (the unit tier's ModelGuard fails a test that
    builds one); the model cache stays without a folder."""
    cache = tmp_path_factory.mktemp("cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HARNESS_CACHE", str(cache))
        yield cache / "models"


def _model_folders(models_cache: Path) -> list[str]:
    return sorted(p.name for p in models_cache.iterdir()) if models_cache.exists() else []


@pytest.fixture(scope="module")
def quickstart_plan(tmp_path_factory):
    from harness.units.plan import plan_run

    return plan_run(QUICKSTART, tmp_path_factory.mktemp("plan") / "never-written")


def _sum(units) -> TokenBudget:
    return sum((u.budget for u in units), TokenBudget())


def test_planning_locates_the_models_and_builds_none(quickstart_plan, empty_cache):
    """The model and its twin are planned (their cache keys, their units) but not built: the
    stages build them when they need the weights; the cache holds no model folder."""
    from harness.models.build import embedded_gguf_path, file_sha256

    model, twin = quickstart_plan.models[0], quickstart_plan.twins[MODEL]
    sha = file_sha256(embedded_gguf_path())
    assert model.content_key == f"gguf-sha256:{sha}"
    assert twin.content_key == f"untrained:gguf-sha256:{sha}@0"
    assert model.path.parent == twin.path.parent == empty_cache
    assert _model_folders(empty_cache) == []


def test_generation_units_count_every_request_and_token(quickstart_plan):
    """4 single-reply policies x 3 items x 8 samples, one request of at most 256 tokens each;
    3 conversation policies x 1 item x 8 samples x 6 replies of at most 80 tokens each."""
    gen = [u for u in quickstart_plan.units if u.stage == "generate"]
    assert [u.policy.split("-")[0] for u in gen] == [
        "none", "restate", "periodic", "adaptive", "none", "periodic", "adaptive"
    ]  # fmt: skip
    assert all(u.key and u.cached is False for u in gen)  # nothing in a fresh folder
    counts = _sum(gen)
    assert counts.requests == 4 * 3 * 8 + 3 * 1 * 8 * 6
    assert counts.output_tokens == 4 * 3 * 8 * 256 + 3 * 8 * 6 * 80
    single = next(u for u in gen if u.policy == "none")
    talk = [u for u in gen if u.policy == "none"][1]
    # a reply re-sends its conversation: the input of 6 replies exceeds 6 prompts by
    # 80 * (0 + 1 + ... + 5) per sample at most
    assert talk.budget.input_tokens > 8 * 6 * 80 * 15 / 6
    assert 0 < single.budget.input_tokens < 8 * 3 * 200  # the prompts: tens of tokens each


def test_forks_and_probe_pairs_follow_the_config(quickstart_plan):
    """forks: none and restate, 2 records per condition (none also forks the conversation's
    records), 4 positions x 2 draws x 2 arms of 32 tokens, plus vLLM's 2 priming requests
    per record; probe: 2 samples per condition, two forwards each, on the model and its twin."""
    forks = [u for u in quickstart_plan.units if u.stage == "forks"]
    records = sum(u.samples for u in forks)
    assert records == 2 * 3 + 2 * 1 + 2 * 3
    assert _sum(forks).requests == records * (4 * 2 * 2 + 2)
    assert _sum(forks).output_tokens == records * (4 * 2 * 2 * 32 + 2)
    assert all(u.key is None and u.cached is None for u in forks)  # keyed by their records
    probe = [u for u in quickstart_plan.units if u.stage == "probe"]
    assert {u.model for u in probe} == {MODEL, f"untrained:{MODEL}"}
    pairs = sum(u.samples for u in probe if u.model == MODEL)
    assert pairs == 2 * (4 * 3 + 3 * 1)
    assert _sum(probe).requests == 2 * 2 * pairs and _sum(probe).output_tokens == 0


def test_plan_totals_are_per_serving_model_and_split_cached(quickstart_plan):
    totals = quickstart_plan.totals
    assert [m.model for m in totals.models] == [MODEL, f"untrained:{MODEL}"]
    mine = totals.of(MODEL)
    assert mine.planned == _sum(u for u in quickstart_plan.units if u.model == MODEL)
    assert mine.cached == TokenBudget() and mine.to_send == mine.planned
    assert PlanTotals.model_validate_json(totals.model_dump_json()) == totals


def test_cached_units_are_not_to_send():
    from harness.units.run_units import Unit

    spent = TokenBudget(requests=2, input_tokens=30, output_tokens=10)
    units = [
        Unit(stage="generate", model="m", policy="none", items=["a"], samples=2, budget=spent,
             key="k1", cached=True),
        Unit(stage="generate", model="m", policy="restate", items=["a"], samples=2,
             budget=spent, key="k2", cached=False),
        Unit(stage="probe", model="m", policy="none", items=["a"], samples=2, budget=spent),
    ]  # fmt: skip
    totals = plan_totals(units)
    assert totals.models == [
        ModelTotals(
            model="m",
            planned=TokenBudget(requests=6, input_tokens=90, output_tokens=30),
            cached=spent,
        )
    ]
    assert totals.of("m").to_send == TokenBudget(requests=4, input_tokens=60, output_tokens=20)


def test_dry_run_prints_the_plan_and_writes_nothing(tmp_path, empty_cache):
    """On an empty cache the dry run prints the totals a built model gives (measured with
    the converted folder: 552 requests, 117,706 input and 43,292 output tokens; the twin's
    60 probe forwards of 24,174 tokens) and leaves no model folder."""
    from typer.testing import CliRunner

    from harness.cli import app

    out = tmp_path / "run"
    result = CliRunner().invoke(
        app, ["run", "--dry-run", str(QUICKSTART), "--out", str(out)], env={"COLUMNS": "200"}
    )
    assert result.exit_code == 0, result.output
    assert not out.exists()
    rows = [[cell.strip() for cell in line.split("│")[1:-1]]
            for line in result.output.splitlines() if line.startswith("│")]  # fmt: skip
    # stage, model, policy, units, samples, requests, input, output, cached
    assert rows[0] == ["generate", MODEL, "none", "2", "32", "72", rows[0][6], "9,984", "0/2"]
    assert [row[0] for row in rows[:6]] == ["generate"] * 6  # in the stages' order
    forks = [row for row in rows if row[0] == "forks"]
    assert [row[2] for row in forks] == ["none", "restate"]
    assert {row[8] for row in forks} == {"after generate"}
    plan = plan_run_of(out)
    total = next(row for row in rows if row[0] == MODEL)
    mine = plan.totals.of(MODEL).planned
    assert total[1:4] == [f"{mine.requests:,}", f"{mine.input_tokens:,}", f"{mine.output_tokens:,}"]
    assert mine.requests == 552  # 240 generations, 252 fork arms and primes, 60 probe forwards
    totals = [row[:4] for row in rows if row[0] in (MODEL, f"untrained:{MODEL}")]
    assert totals == [
        [MODEL, "552", "117,706", "43,292"],
        [f"untrained:{MODEL}", "60", "24,174", "0"],
    ]
    assert _model_folders(empty_cache) == []


def plan_run_of(out: Path):
    from harness.units.plan import plan_run

    return plan_run(QUICKSTART, out)


def test_the_generate_stage_runs_the_plans_units(quickstart_plan, tmp_path):
    """The stage takes its units from the plan (not derived again), except in a sequential
    run, whose looks add batches."""
    from harness.stages.context import run_context
    from harness.store import RunStore
    from harness.units.sequential import SampleBatch

    plan = quickstart_plan
    ctx = run_context(plan, RunStore(tmp_path))
    model = plan.models[0]
    planned = [u for u in plan.units if u.stage == "generate"]
    assert all(a is b for a, b in zip(ctx.generation_units(model), planned, strict=True))
    n = plan.config.samples  # the first look is the plan's samples, the second adds two
    ctx.batches = [SampleBatch(0, n), SampleBatch(n, n + 2)]
    looks = ctx.generation_units(model)
    assert len(looks) == 2 * len(planned)
    assert [u.key for u in looks[: len(planned)]] == [u.key for u in planned]


def test_a_config_with_a_judge_check_plans_its_calls(tmp_path):
    """One call per window at most (the record over 3/4 of a window), each asked twice at most."""
    from harness.units.plan import plan_run

    suite = {
        "suite": "j",
        "items": [{"id": "a", "system": "Be brief.", "user": "Hi",
                   "checks": [{"type": "judge", "rule": "The reply is brief."}]}],
    }  # fmt: skip
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(suite))
    config = {"name": "j", "models": [MODEL], "suites": ["s.yaml"], "policies": ["none"],
              "samples": 2, "generation": {"engine": "hf", "max_tokens": 96},
              "scoring": {"window": 32}, "probe": {"enabled": False}}  # fmt: skip
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(config))
    plan = plan_run(tmp_path / "run.yaml", tmp_path / "out")
    judge = [u for u in plan.units if u.stage == "judge"]
    assert [(u.model, u.samples) for u in judge] == [(MODEL, 2)]
    record = next(u for u in plan.units if u.stage == "generate").budget.input_tokens // 2 + 96
    windows = -(-record // 24)
    assert judge[0].budget.requests == 2 * 2 * windows


def test_dry_run_json_is_the_plan_a_cost_function_reads(tmp_path):
    import json

    from typer.testing import CliRunner

    from harness.cli import app

    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["run", "--dry-run", "--json", str(QUICKSTART), "--out",
                                      str(out)])  # fmt: skip
    assert result.exit_code == 0, result.output
    plan = json.loads(result.output)
    totals = PlanTotals.model_validate(plan["totals"])
    assert totals.of(MODEL).planned.requests == 552
    assert sum(u["budget"]["requests"] for u in plan["units"] if u["model"] == MODEL) == 552
    assert {"stage", "model", "policy", "key", "cached"} <= set(plan["units"][0])
    assert "specs" not in plan["units"][0] and not out.exists()
