"""A gate judges the units that exist: with no `items:`, the items where its policy runs (single
replies run `policies`, conversations `conversation_policies`), where its rule is checked and,
for a turn metric, the conversations; it is refused before the run only when it judges none, or
when an item it names holds no unit of it."""

from __future__ import annotations

import pandas as pd
import pytest
import yaml

from harness.config.gate_specs import GateSpec, gate_unit_problem, gate_units
from harness.config.run import RunConfig, TaskSuite
from harness.report.load import run_files
from harness.stages.gates import gate_outputs

SUITE = {
    "suite": "mixed",
    "items": [
        {"id": "story", "system": "S", "user": "Tell a story.",
         "checks": [{"type": "regex_must_not", "pattern": "x", "rule": "no-x"}]},
        {"id": "talk", "system": "S", "user": "U1", "turns": ["U2", "U3"],
         "checks": [{"type": "regex_must_not", "pattern": "x", "rule": "no-x"},
                    {"type": "regex_must", "pattern": "bye$", "scope": "response",
                     "rule": "sign-off"}]},
    ],
}  # fmt: skip
SINGLE = ["none", "periodic-64-user"]
TALKS = ["none", "adaptive-turn-system"]
ITEMS = TaskSuite.model_validate(SUITE).items


def _units(**gate) -> list[str]:
    spec = GateSpec(min=0.5, **gate)
    return [i.id for i in gate_units(spec, ITEMS, SINGLE, TALKS)]


def test_a_gate_judges_the_items_that_hold_a_unit_of_it():
    assert _units(metric="auc", policy="periodic-64-user") == ["story"]  # single replies only
    assert _units(metric="auc", policy="adaptive-turn-system") == ["talk"]  # conversations only
    assert _units(metric="auc", policy="none") == ["story", "talk"]
    assert _units(metric="a_turn", turn=2, policy="none") == ["talk"]  # over turns
    assert _units(metric="auc", policy="none", rule="sign-off") == ["talk"]  # its rule's item


def test_refused_only_when_it_judges_nothing_or_a_named_item_holds_no_unit():
    def problem(**gate) -> str:
        spec = GateSpec(min=0.5, **gate)
        named = [i for i in ITEMS if i.id in (spec.items or [i.id for i in ITEMS])]
        return gate_unit_problem(spec, named, SINGLE, TALKS)

    assert problem(metric="auc", policy="periodic-64-user") == ""  # judges `story`
    assert "runs on none of its items" in problem(metric="auc", policy="restate")
    assert problem(metric="auc", policy="periodic-64-user", items=["talk"]) == (
        "item 'talk' holds no unit of it: policy 'periodic-64-user' does not run on it (a "
        "conversation: the config's conversation_policies)"
    )
    assert "it is a single reply" in problem(metric="a_turn", turn=2, policy="none",
                                              items=["story", "talk"])  # fmt: skip


@pytest.fixture
def run_dir(tmp_path):
    """A finished run's summary.csv: every condition the config runs, and none other."""
    rows = [("story", "none", 0.9), ("story", "periodic-64-user", 0.95), ("talk", "none", 0.7),
            ("talk", "adaptive-turn-system", 0.8)]  # fmt: skip
    summary = pd.DataFrame(
        [{"model": "tiny-random-llama", "item": i, "policy": p, "auc": a} for i, p, a in rows]
    )
    summary.to_csv(tmp_path / "summary.csv", index=False)
    return tmp_path


def _config(tmp_path, gates: list[dict]) -> RunConfig:
    (tmp_path / "suite.yaml").write_text(yaml.safe_dump(SUITE))
    return RunConfig.model_validate({
        "name": "g", "models": ["tiny-random-llama"], "suites": [str(tmp_path / "suite.yaml")],
        "policies": ["none", {"name": "periodic", "every": 64, "placement": "user"}],
        "conversation_policies": ["none", {"name": "adaptive", "on": "turn",
                                           "placement": "system"}],
        "generation": {"engine": "hf", "max_tokens": 120, "turn_tokens": 40},
        "gates": gates,
    })  # fmt: skip


def test_a_policy_that_runs_on_some_items_is_judged_there_and_passes(run_dir):
    gates = [
        {"metric": "auc", "policy": "periodic-64-user", "min": 0.9, "use": "value"},
        {"metric": "auc", "policy": "adaptive-turn-system", "min": 0.75, "use": "value"},
        {"metric": "auc", "policy": "none", "min": 0.75, "use": "value"},
    ]
    out = gate_outputs(_config(run_dir, gates), list(ITEMS), run_files(run_dir))["gates.csv"]
    got = list(zip(out["gate"], out["item"], out["verdict"], strict=True))
    # gates 0 and 1 judge the one item where their policy runs (they used to fail the other:
    # "no summary.csv row"); gate 2 runs on both and fails on the conversation
    assert got == [(0, "story", "pass"), (1, "talk", "pass"), (2, "story", "pass"),
                   (2, "talk", "fail")]  # fmt: skip


def test_a_gate_naming_an_item_without_its_unit_is_refused_before_the_run(tmp_path, run_cli):
    (tmp_path / "suite.yaml").write_text(yaml.safe_dump(SUITE))
    config = _config(tmp_path, []).model_dump(mode="json", exclude_none=True)
    config["gates"] = [{"metric": "auc", "policy": "periodic-64-user", "min": 0.5,
                        "items": ["talk"]}]  # fmt: skip
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(config))
    out = tmp_path / "out"
    code, _, stderr = run_cli(["run", str(tmp_path / "run.yaml"), "--out", str(out)])
    assert code == 2 and stderr.count("\n") == 1, stderr
    assert "gates[0]: item 'talk' holds no unit of it: policy 'periodic-64-user'" in stderr
    assert not out.exists()
