"""Gates: config validation (one line naming the gate, exit 2, nothing written), evaluation on
summary.csv (bounds, CI bounds, censored half-life, undetermined values), junit.xml as CI
systems read it, the terminal and report verdicts, and `harness gate` on a finished folder."""

from __future__ import annotations

import copy
import json
import math
import xml.etree.ElementTree as ET
from pathlib import Path

import pandas as pd
import pytest
import yaml

from harness.analysis.gates import evaluate_gates, junit_xml, read_summary
from harness.config import GateSpec, load_run_config
from harness.errors import UserError
from harness.store import write_csv

DATA = Path(__file__).parent.parent / "data" / "configs"
VALID = yaml.safe_load((DATA / "valid.yaml").read_text())
ITEMS = ["mini-fr", "mini-lower"]


def _write_config(tmp_path: Path, gates: list, **changes) -> Path:
    config = {**copy.deepcopy(VALID), "suites": [str(DATA / "mini-suite.yaml")], "gates": gates}
    config.update(changes)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


BAD_GATES = {
    "unknown metric": (
        [{"metric": "auc", "policy": "none", "min": 0.5}, {"metric": "aucc", "policy": "none"}],
        "gates[1]: unknown metric 'aucc' (expected one of auc, half_life, final",
    ),
    "min above max": (
        [{"metric": "auc", "policy": "none", "min": 0.9, "max": 0.5}],
        "gates[0]: min 0.9 is greater than max 0.5",
    ),
    "no bound": ([{"metric": "auc", "policy": "none"}], "gates[0]: needs min, max or both"),
    "policy not in config": (
        [{"metric": "auc", "policy": "periodic-128-user", "min": 0.5}],
        "gates[0]: policy 'periodic-128-user' is not in the config's policies "
        "(none, restate, periodic-64-user)",
    ),
    "ci of a metric without one": (
        [{"metric": "token_overhead", "policy": "none", "max": 0.5, "use": "ci_high"}],
        "gates[0]: metric 'token_overhead' has no CI, so use: ci_high is impossible",
    ),
    "item not in the run": (
        [{"metric": "auc", "policy": "none", "min": 0.5, "items": ["mini-de"]}],
        "gates[0]: item 'mini-de' is not in the run",
    ),
    "model not in config": (
        [{"metric": "auc", "policy": "none", "min": 0.5, "model": "tiny-random-llama"}],
        "gates[0]: model 'tiny-random-llama' is not in the config's models",
    ),
    "alpha without the probe": (
        [{"metric": "alpha_mean", "policy": "none", "max": 1}],
        "gates[0]: metric 'alpha_mean' needs probe.enabled: true",
    ),
    "unknown use": (
        [{"metric": "auc", "policy": "none", "min": 0.5, "use": "median"}],
        "field 'gates.0.use'",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_GATES))
def test_bad_gate_one_line_naming_it_exit_2_nothing_written(case, tmp_path, run_cli):
    gates, expected = BAD_GATES[case]
    probe = {"enabled": case != "alpha without the probe"}
    path = _write_config(tmp_path, gates, probe=probe)
    out_dir = tmp_path / "out"
    code, _, stderr = run_cli(["run", str(path), "--out", str(out_dir)])
    assert code == 2
    assert stderr.count("\n") == 1 and "Traceback" not in stderr
    assert stderr.startswith(f"error: {path}:") and expected in stderr, stderr
    assert not out_dir.exists()


def test_item_subset_of_the_config_limits_what_a_gate_may_name(tmp_path):
    gates = [{"metric": "auc", "policy": "none", "min": 0.5, "items": ["mini-lower"]}]
    with pytest.raises(UserError, match=r"gates\[0\]: item 'mini-lower' is not in the run"):
        load_run_config(_write_config(tmp_path, gates, items=["mini-fr"]))
    assert load_run_config(_write_config(tmp_path, gates)).gates[0].items == ["mini-lower"]


def test_gates_do_not_change_the_run_id(tmp_path):
    gate = {"metric": "auc", "policy": "none", "min": 0.5}
    bare = load_run_config(_write_config(tmp_path, []))
    gated = load_run_config(_write_config(tmp_path, [gate]))
    stricter = load_run_config(_write_config(tmp_path, [{**gate, "min": 0.9}]))
    assert bare.run_id() == gated.run_id() == stricter.run_id()
    assert load_run_config(_write_config(tmp_path, [gate], samples=3)).run_id() != bare.run_id()


# ------------------------------------------------------------------------- evaluation
def _summary(overrides: dict | None = None) -> pd.DataFrame:
    """Two items x two policies of one model, written and read back as summary.csv is."""
    rows = []
    for item in ITEMS:
        for policy, auc, overhead in (("none", 0.6, 0.0), ("periodic-64-user", 0.9, 0.12)):
            rows.append({
                "model": "m", "item": item, "policy": policy,
                "alpha_mean": 0.6, "alpha_mean_low": 0.5, "alpha_mean_high": 0.7,
                "auc": auc, "auc_low": auc - 0.2, "auc_high": auc + 0.05,
                "half_life": 193.0, "half_life_low": 129.0, "half_life_high": 321.0,
                "half_life_censored": False, "final": auc - 0.1,
                "survival_median": 257.0, "survival_censored_share": 0.25,
                "tokens_generated": 512, "tokens_injected": int(512 * overhead),
                "tokens_restated": 0, "token_overhead": overhead,
            })  # fmt: skip
    frame = pd.DataFrame(rows)
    for (item, policy, column), value in (overrides or {}).items():
        frame.loc[(frame["item"] == item) & (frame["policy"] == policy), column] = value
    return frame


def _evaluate(tmp_path, gates: list[dict], summary: pd.DataFrame | None = None, models=("m",)):
    write_csv(_summary() if summary is None else summary, tmp_path / "summary.csv")
    specs = [GateSpec.model_validate(g) for g in gates]
    return evaluate_gates(specs, read_summary(tmp_path / "summary.csv"), ITEMS, list(models))


def test_a_gate_is_checked_per_item_and_passes_or_fails_on_its_bound(tmp_path):
    summary = _summary({("mini-lower", "none", "auc"): 0.4})
    out = _evaluate(tmp_path, [{"metric": "auc", "policy": "none", "min": 0.5}], summary)
    assert out["item"].tolist() == ITEMS and out["passed"].tolist() == [True, False]
    assert out["value"].tolist() == pytest.approx([0.6, 0.4])
    assert out["detail"].tolist() == ["auc = 0.6, >= 0.5", "auc = 0.4, below min 0.5"]
    assert out["gate"].tolist() == [0, 0] and out["use"].tolist() == ["value", "value"]
    assert math.isnan(out["max"][0]) and out["min"][0] == 0.5


def test_max_bound_and_an_interval(tmp_path):
    gates = [
        {"metric": "token_overhead", "policy": "periodic-64-user", "max": 0.10},
        {"metric": "token_overhead", "policy": "periodic-64-user", "min": 0.05, "max": 0.2},
    ]
    out = _evaluate(tmp_path, gates)
    assert out["passed"].tolist() == [False, False, True, True]
    assert out["detail"][0] == "token_overhead = 0.12, above max 0.1"
    assert out["detail"][2] == "token_overhead = 0.12, in [0.05, 0.2]"


def test_use_ci_low_reads_the_lower_bound(tmp_path):
    gates = [
        {"metric": "auc", "policy": "periodic-64-user", "min": 0.8},
        {"metric": "auc", "policy": "periodic-64-user", "min": 0.8, "use": "ci_low"},
        {"metric": "half_life", "policy": "none", "min": 150, "use": "ci_low"},
    ]
    out = _evaluate(tmp_path, gates)
    assert out["passed"].tolist() == [True, True, False, False, False, False]
    assert out["value"][2] == pytest.approx(0.7) and out["value"][4] == 129
    assert out["detail"][2] == "auc ci_low = 0.7, below min 0.8"


def test_censored_half_life_never_fell_so_it_passes_a_min_and_fails_a_max(tmp_path):
    summary = _summary(
        {
            ("mini-fr", "none", "half_life"): math.nan,
            ("mini-fr", "none", "half_life_censored"): True,
            ("mini-lower", "none", "half_life"): math.nan,  # censored, nothing ever adhered to
            ("mini-lower", "none", "half_life_censored"): True,
            ("mini-lower", "none", "auc"): 0.0,
        }
    )
    gates = [
        {"metric": "half_life", "policy": "none", "min": 1024},
        {"metric": "half_life", "policy": "none", "max": 1024},
    ]
    out = _evaluate(tmp_path, gates, summary)
    assert out["passed"].tolist() == [True, False, False, False]
    assert math.isinf(out["value"][0]) and math.isnan(out["value"][1])
    assert out["detail"][0] == (
        "half_life = inf, >= 1024 (half_life never halved within the run (censored), so it "
        "counts as infinite)"
    )
    assert out["detail"][1].startswith("half_life adherence was 0 from the start")
    assert out["detail"][2].startswith("half_life = inf, above max 1024")


def test_undetermined_or_missing_values_fail(tmp_path):
    summary = _summary({("mini-fr", "none", "final"): math.nan})
    summary = summary[~((summary["item"] == "mini-lower") & (summary["policy"] == "none"))]
    out = _evaluate(tmp_path, [{"metric": "final", "policy": "none", "min": 0}], summary)
    assert out["passed"].tolist() == [False, False]
    assert out["detail"].tolist() == [
        "final undetermined (NaN): fails",
        "final no summary.csv row for this model, item and policy: fails",
    ]


def test_items_and_model_narrow_a_gate(tmp_path):
    gates = [{"metric": "auc", "policy": "none", "min": 0.5, "items": ["mini-lower"]}]
    out = _evaluate(tmp_path, gates, models=("m", "other"))
    assert list(zip(out["model"], out["item"], strict=True)) == [
        ("m", "mini-lower"), ("other", "mini-lower"),
    ]  # fmt: skip
    assert out["passed"].tolist() == [True, False]  # "other" has no row: unverified fails
    gates[0]["model"] = "m"
    assert _evaluate(tmp_path, gates, models=("m", "other"))["model"].tolist() == ["m"]


def test_a_summary_without_the_column_is_one_line(tmp_path):
    old = _summary().drop(columns=["half_life_low", "half_life_high"])
    gate = [{"metric": "half_life", "policy": "none", "min": 1, "use": "ci_low"}]
    with pytest.raises(UserError, match=r"gates\[0\]: summary.csv has no column 'half_life_low'"):
        _evaluate(tmp_path, gate, old)


# ------------------------------------------------------------------------- junit.xml
def test_junit_xml_has_one_testcase_per_check_and_failures_naming_metric_value_bound(tmp_path):
    summary = _summary({("mini-lower", "none", "auc"): 0.4})
    gates = [
        {"metric": "auc", "policy": "none", "min": 0.5},
        {"metric": "token_overhead", "policy": "periodic-64-user", "max": 0.2},
    ]
    root = ET.fromstring(junit_xml(_evaluate(tmp_path, gates, summary), "acme"))
    assert root.tag == "testsuites" and root.get("tests") == "4" and root.get("failures") == "1"
    (suite,) = root.findall("testsuite")
    assert suite.get("tests") == "4" and suite.get("failures") == "1"
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == [
        "gates[0] auc of none >= 0.5 on mini-fr",
        "gates[0] auc of none >= 0.5 on mini-lower",
        "gates[1] token_overhead of periodic-64-user <= 0.2 on mini-fr",
        "gates[1] token_overhead of periodic-64-user <= 0.2 on mini-lower",
    ]
    assert all(c.get("classname") == "m" for c in cases)
    failed = [c for c in cases if c.find("failure") is not None]
    assert len(failed) == 1 and failed[0].get("name").endswith("on mini-lower")
    assert failed[0].find("failure").get("message") == "auc = 0.4, below min 0.5 [model m]"


def test_junit_xml_escapes_names_a_run_config_can_hold(tmp_path):
    model = 'org/m<script>&"x"\x07'
    summary = _summary().assign(model=model)
    out = _evaluate(tmp_path, [{"metric": "auc", "policy": "none", "min": 0.9}], summary, (model,))
    text = junit_xml(out, "a&b<c>")
    root = ET.fromstring(text)  # parses: escaped, and the control character replaced
    assert root.get("name") == "a&b<c>" and "<script>" not in text
    case = root.find("testsuite/testcase")
    assert case.get("classname") == 'org/m<script>&"x"\ufffd'
    assert case.find("failure").get("message").endswith('[model org/m<script>&"x"\ufffd]')


def test_no_gates_give_an_empty_suite(tmp_path):
    from harness.stages.gates import gate_outputs

    config = load_run_config(_write_config(tmp_path, []))
    out = gate_outputs(config, ITEMS, tmp_path)  # no summary.csv needed
    assert out["gates.csv"].empty and list(out["gates.csv"].columns)[:3] == [
        "gate", "metric", "policy",
    ]  # fmt: skip
    assert ET.fromstring(out["junit.xml"]).get("tests") == "0"


# ------------------------------------------------------------------------- run folder, CLI
def _finished_run(tmp_path: Path, gates: list[dict], summary: pd.DataFrame | None = None):
    """A run folder as `harness run` leaves it (summary.csv, manifest.json) and its config."""
    config_path = _write_config(tmp_path, gates)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    summary = _summary() if summary is None else summary
    write_csv(summary.assign(model="smollm2-135m-instruct"), run_dir / "summary.csv")
    config = json.loads(load_run_config(config_path).model_dump_json())
    (run_dir / "manifest.json").write_text(json.dumps({"name": "valid-mini", "config": config}))
    return run_dir, config_path


def test_harness_gate_rewrites_the_verdicts_and_exits_0_or_1(tmp_path, run_cli):
    gate = {"metric": "token_overhead", "policy": "periodic-64-user", "max": 0.1}
    run_dir, config = _finished_run(tmp_path, [gate])
    code, stdout, _ = run_cli(["gate", str(run_dir), str(config)])
    assert code == 1
    assert "Gates: 2 of 2 gate checks failed" in stdout and "FAIL gates[0] token_overhead" in stdout
    assert not pd.read_csv(run_dir / "gates.csv")["passed"].any()
    assert ET.parse(run_dir / "junit.xml").getroot().get("failures") == "2"
    _write_config(tmp_path, [{**gate, "max": 0.2}])  # a looser threshold, same run
    code, stdout, _ = run_cli(["gate", str(run_dir), str(config)])
    assert code == 0 and "every gate check passed" in stdout
    assert pd.read_csv(run_dir / "gates.csv")["passed"].all()
    assert ET.parse(run_dir / "junit.xml").getroot().get("failures") == "0"


def test_harness_gate_refuses_another_configs_folder_and_bad_input(tmp_path, run_cli):
    gate = {"metric": "auc", "policy": "none", "min": 0.5}
    run_dir, config = _finished_run(tmp_path, [gate])
    _write_config(tmp_path, [gate], samples=3)
    code, _, stderr = run_cli(["gate", str(run_dir), str(config)])
    assert stderr.count("\n") == 1 and code == 2
    assert "was run with another config (samples differ; only gates and out may)" in stderr
    _write_config(tmp_path, [])
    code, _, stderr = run_cli(["gate", str(run_dir), str(config)])
    assert code == 2 and "no `gates:` to evaluate" in stderr
    _write_config(tmp_path, [{**gate, "metric": "vibes"}])
    code, _, stderr = run_cli(["gate", str(run_dir), str(config)])
    assert code == 2 and "gates[0]: unknown metric 'vibes'" in stderr
    _write_config(tmp_path, [gate])
    code, _, stderr = run_cli(["gate", str(tmp_path / "nowhere"), str(config)])
    assert code == 2 and "no summary.csv" in stderr
    assert not (run_dir / "gates.csv").exists()  # every refusal wrote nothing


def test_terminal_shows_the_gates_before_the_table(tmp_path):
    from rich.console import Console

    from harness.report.terminal import print_summary

    summary = _summary({("mini-lower", "none", "auc"): 0.4})
    run_dir, config = _finished_run(tmp_path, [], summary)
    gates = _evaluate(tmp_path, [{"metric": "auc", "policy": "none", "min": 0.5}], summary)
    write_csv(gates, run_dir / "gates.csv")
    console = Console(record=True, width=200)
    print_summary(run_dir, console)
    text = console.export_text()
    assert text.index("Gates: 1 of 2 gate checks failed") < text.index("adherence AUC")
    assert "PASS gates[0] auc of none >= 0.5 on mini-fr: auc = 0.6, >= 0.5" in text
    assert "FAIL gates[0] auc of none >= 0.5 on mini-lower: auc = 0.4, below min 0.5" in text


def test_report_section_lists_the_checks_escaped_and_says_when_there_are_none(tmp_path):
    from harness.report.gates import gates_section
    from harness.report.load import RunData

    model = "<img src=x onerror=alert(1)>"
    gates = _evaluate(
        tmp_path, [{"metric": "auc", "policy": "none", "min": 0.7}], _summary().assign(model=model),
        (model,),
    )  # fmt: skip
    html, _ = gates_section(RunData(run_dir=tmp_path, frames={"gates.csv": gates}))
    assert "2 of 2 gate checks failed" in html and html.count('<tr class="gate-fail">') == 2
    assert "<img" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html
    empty, _ = gates_section(
        RunData(run_dir=tmp_path, problems={"gates.csv": "the file has no rows"})
    )
    assert "This run has no gates" in empty
