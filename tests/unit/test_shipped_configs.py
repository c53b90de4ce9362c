"""Every config the repository ships parses and points at real task items."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from harness.analysis.gates import evaluate_gates
from harness.config.files import load_run_config
from harness.config.gate_specs import gate_use
from harness.config.run import policy_label
from harness.stats import mean_interval
from harness.stats.sided import one_sided_bounds

ROOT = Path(__file__).resolve().parents[2]
RUN_CONFIGS = [
    "quickstart.yaml", "policies.yaml", "gpu-example.yaml", "judge-calibration.yaml", "replay.yaml",
    "equilibrium.yaml",
]  # fmt: skip


@pytest.mark.parametrize("name", RUN_CONFIGS)
def test_run_configs_load(name, monkeypatch):
    monkeypatch.chdir(ROOT)
    config = load_run_config(ROOT / "configs" / name)
    assert config.samples > 0 and config.policies


@pytest.fixture
def quickstart(monkeypatch):
    """(config, the items it selects) of configs/quickstart.yaml, as `harness run` reads it."""
    from harness.config.files import load_run_config_and_suites
    from harness.units.plan import select_items

    monkeypatch.chdir(ROOT)
    config, suites = load_run_config_and_suites(ROOT / "configs" / "quickstart.yaml")
    return config, [sel.item for sel in select_items(config, suites)]


def test_quickstart_fills_every_section_of_the_report(quickstart):
    """What `make demo` promises: trained vs untrained alpha, single replies under the
    reminder policies, a conversation under between-turn policies, forks, the theory."""
    config, items = quickstart
    assert len(items) == len(config.items)  # every item it names exists in its suites
    assert config.probe.enabled and config.probe.untrained_twin
    assert any(i.is_conversation for i in items) and any(not i.is_conversation for i in items)
    names = {p.name for p in config.policies}
    assert {"none", "restate"} < names and names & {"periodic", "adaptive"}
    assert config.conversation_policies and config.forks
    assert config.theory.relay and config.theory.bias_lams


def test_quickstart_stays_inside_its_budgets(quickstart):
    """Every number fits the others: no fork falls past a record, every forked and
    bias-probed sample is probed, each reply gets its whole turn, the adherence curve has
    several windows, and the longest prompt + budget + reminders fit the context."""
    config, items = quickstart
    gen, forks, probe = config.generation, config.forks, config.probe
    labels = [policy_label(p) for p in config.policies]
    # replies end where the model ends them: no "Continue." turns, a single reply's budget
    # above what its request needs (a fork position past a record's end is skipped)
    assert not gen.continue_on_eos and max(forks.at) < gen.single_budget
    assert set(forks.policies) <= set(labels)
    assert forks.records <= probe.samples <= config.samples  # KL at each fork is known
    assert config.theory.bias_samples <= probe.samples  # lam = 0 reuses the plain curves
    assert gen.single_budget >= 4 * config.scoring.window  # "final": the last quarter of windows
    talks = [i for i in items if i.is_conversation]
    assert all(i.n_turns * gen.turn_tokens <= gen.max_tokens for i in talks)
    # a byte-level BPE token covers at least one UTF-8 byte: bytes bound the tokens, with
    # 16 tokens of chat markup per turn
    for item in items:
        texts = [item.system, item.user, *(t.user for t in item.turns or [])]
        prompt = sum(len(t.encode()) + 16 for t in texts)
        reminder = len((item.reminder or item.system).encode()) + 16
        budget = gen.max_tokens if item.is_conversation else gen.single_budget
        reminders = max(budget // p.every for p in config.policies if hasattr(p, "every"))
        restated = len((item.restatement or "").encode())
        need = prompt + budget + reminders * reminder + restated
        assert need <= gen.max_model_len, item.id


def test_quickstart_forks_at_4_positions_and_gates_one_condition_twice(quickstart):
    config, _ = quickstart
    # forks at 4 positions, each with its arm's tokens inside a single reply's budget
    assert len(config.forks.at) >= 4
    assert max(config.forks.at) + config.forks.tokens <= config.generation.single_budget
    # two gates on one condition: a bound its samples can decide and one they cannot
    assert [(g.metric, g.policy, g.min, gate_use(g)) for g in config.gates] == [
        ("auc", "restate", 0.25, "interval"), ("auc", "restate", 0.8, "interval"),
    ]  # fmt: skip


def test_quickstart_gates_decide_one_and_not_the_other_at_its_samples(quickstart):
    """The verdicts the quickstart's gates get when restate's 8 samples all comply (as the
    embedded model's nearly do): the exact binomial interval [0.63, 1] at n = 8 and its
    one-sided lower bound 0.05^(1/8) = 0.69 pass 0.25 on lowercase-tale and cannot pass 0.8
    on fr-tale (14 samples could)."""
    config, _ = quickstart
    interval = mean_interval([1.0] * config.samples)
    bounds = one_sided_bounds([1.0] * config.samples, level=0.95)
    summary = pd.DataFrame([{
        "model": config.models[0], "item": item, "policy": "restate",
        "auc": 1.0, "auc_low": interval.low, "auc_high": interval.high, "auc_n": config.samples,
        "auc_lcb": bounds.lcb, "auc_ucb": bounds.ucb, "auc_method": "clopper-pearson",
    } for item in ("lowercase-tale", "fr-tale")])  # fmt: skip
    assert [(g.min, g.items) for g in config.gates] == [
        (0.25, ["lowercase-tale"]),
        (0.8, ["fr-tale"]),
    ]
    gates = evaluate_gates(config.gates, summary, config.items, config.models)
    assert gates["verdict"].tolist() == ["pass", "undecided"]
    assert gates["samples_needed"].iloc[1] == 14  # 0.05 ** (1 / 14) >= 0.8 > 0.05 ** (1 / 13)


def test_conversation_suite_covers_the_issue(monkeypatch):
    from harness.config.files import load_suite

    suite = load_suite(ROOT / "tasks" / "conversations.yaml")
    assert len(suite.items) >= 12 and all(item.is_conversation for item in suite.items)
    assert all(5 <= item.n_turns <= 8 for item in suite.items)
    assert sum(any(t.pressure for t in item.turns or []) for item in suite.items) >= 4
    assert sum(item.user_simulator is not None for item in suite.items) >= 2


def test_judge_calibration_pairs_every_judge_rule_with_a_code_check(monkeypatch):
    from harness.config.files import load_run_config_and_suites

    monkeypatch.chdir(ROOT)
    config, (suite,) = load_run_config_and_suites(ROOT / "configs" / "judge-calibration.yaml")
    assert config.probe.enabled is False and [policy_label(p) for p in config.policies] == ["none"]
    for item in suite.items:
        judges = [c for c in item.checks if c.type == "judge"]
        code = [c for c in item.checks if c.type != "judge"]
        assert len(judges) == 1 and len(code) == 1, item.id
        assert judges[0].scope == code[0].scope == "window", item.id  # they meet on windows
        assert judges[0].judge.model is None  # the run's own model judges


def test_paper_pairs_load():
    from harness.probes.pairs import load_pairs

    pairs = load_pairs(ROOT / "configs" / "paper.yaml")
    assert len(pairs) >= 10 and len({p.name for p in pairs}) == len(pairs)
