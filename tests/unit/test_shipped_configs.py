"""Every config the repository ships parses and points at real task items."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from harness.analysis.gates import evaluate_gates
from harness.config import gate_use, load_run_config, policy_label
from harness.stats import mean_interval

ROOT = Path(__file__).resolve().parents[2]
RUN_CONFIGS = ["quickstart.yaml", "policies.yaml", "gpu-example.yaml", "judge-calibration.yaml"]


@pytest.mark.parametrize("name", RUN_CONFIGS)
def test_run_configs_load(name, monkeypatch):
    monkeypatch.chdir(ROOT)
    config = load_run_config(ROOT / "configs" / name)
    assert config.samples > 0 and config.policies


def test_quickstart_is_the_main_job(monkeypatch):
    monkeypatch.chdir(ROOT)
    config = load_run_config(ROOT / "configs" / "quickstart.yaml")
    assert config.models == ["smollm2-135m-instruct"] and config.probe.untrained_twin
    assert [policy_label(p).split("-")[0] for p in config.policies] == [
        "none", "restate", "periodic", "adaptive",
    ]  # fmt: skip
    assert config.samples == 4 and config.generation.max_tokens == 320
    prefixes = {item.split("-")[0] for item in config.items or []}
    assert prefixes == {"lang", "fmt", "persona", "conv"}
    # the conversation item runs under the three between-turn policies only
    assert [policy_label(p) for p in config.conversation_policies] == [
        "none", "periodic-turns2-system", "adaptive-turn-system",
    ]  # fmt: skip
    assert config.generation.turn_tokens == 48
    # forks at 4 positions, each with its arm's tokens inside the 320 generated ones
    assert len(config.forks.at) >= 4
    assert max(config.forks.at) + config.forks.tokens <= config.generation.max_tokens
    # two gates on one condition: a bound 4 samples can decide and one they cannot
    assert [(g.metric, g.policy, g.min, gate_use(g)) for g in config.gates] == [
        ("auc", "restate", 0.25, "interval"), ("auc", "restate", 0.8, "interval"),
    ]  # fmt: skip


def test_quickstart_gates_decide_one_and_not_the_other_at_4_samples(monkeypatch):
    """The verdicts the quickstart's gates get when restate's 4 samples all comply (as the
    embedded model's do): the exact binomial interval [0.40, 1] at n = 4."""
    monkeypatch.chdir(ROOT)
    config = load_run_config(ROOT / "configs" / "quickstart.yaml")
    interval = mean_interval([1.0] * config.samples)
    summary = pd.DataFrame([{
        "model": config.models[0], "item": "fmt-lowercase-story", "policy": "restate",
        "auc": 1.0, "auc_low": interval.low, "auc_high": interval.high, "auc_n": 4,
    }])  # fmt: skip
    gates = evaluate_gates(config.gates, summary, config.items, config.models)
    assert gates["verdict"].tolist() == ["pass", "undecided"]
    assert gates["samples_needed"].iloc[1] == 17  # 0.025 ** (1 / 17) >= 0.8 > 0.025 ** (1 / 16)


def test_conversation_suite_covers_the_issue(monkeypatch):
    from harness.config import load_suite

    suite = load_suite(ROOT / "tasks" / "conversations.yaml")
    assert len(suite.items) >= 12 and all(item.is_conversation for item in suite.items)
    assert all(5 <= item.n_turns <= 8 for item in suite.items)
    assert sum(any(t.pressure for t in item.turns or []) for item in suite.items) >= 4
    assert sum(item.user_simulator is not None for item in suite.items) >= 2


def test_judge_calibration_pairs_every_judge_rule_with_a_code_check(monkeypatch):
    from harness.config import load_run_config_and_suites

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
