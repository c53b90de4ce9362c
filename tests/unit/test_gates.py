"""Gates: config validation (one line naming the gate, exit 2, nothing written), evaluation on
summary.csv (bounds, CI bounds, censored half-life, undetermined values), junit.xml as CI
systems read it, the terminal and report verdicts, and `harness gate` on a finished folder."""

from __future__ import annotations

import copy
import json
import math
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from harness.analysis.gate_junit import junit_xml
from harness.analysis.gate_rows import undecided_conditions
from harness.analysis.gates import evaluate_gates, read_summary
from harness.config.files import load_run_config
from harness.config.gate_specs import GateSpec
from harness.errors import UserError
from harness.report.load import run_files
from harness.stats import mean_interval
from harness.stats.sided import one_sided_bounds
from harness.store import write_csv

DATA = Path(__file__).parent.parent / "data" / "configs"
VALID = yaml.safe_load((DATA / "valid.yaml").read_text())
ITEMS = ["mini-fr", "mini-lower"]
CP = "(one-sided 95 % clopper-pearson bounds)"  # what an auc gate's detail says it read


def _task_items() -> list:
    """The items of mini-suite.yaml (ITEMS), as gate_outputs takes them."""
    from harness.config.files import load_suite

    return list(load_suite(DATA / "mini-suite.yaml").items)


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
    "interval of a metric without one": (
        [{"metric": "token_overhead", "policy": "none", "max": 0.5, "use": "interval"}],
        "gates[0]: metric 'token_overhead' has no interval, so use: interval is impossible "
        "(auc, half_life, final, survival_median, pass_1, pass_3, pass_5, aptitude, "
        "unreliability, alpha_mean, a_turn, survival_turn, first_fail_turn have one); drop `use` "
        "or write `use: value`",
    ),
    "retired ci_low": (
        [{"metric": "auc", "policy": "none", "min": 0.8, "use": "ci_low"}],
        "gates[0]: use: ci_low is retired: gates read the interval by default (min against its "
        "lower bound, max against its upper one; an interval across the bound is undecided), so "
        "drop `use`, or write `use: value` to compare the point estimate",
    ),
    "retired ci_high": (
        [{"metric": "half_life", "policy": "none", "max": 300, "use": "ci_high"}],
        "gates[0]: use: ci_high is retired",
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
    """Two items x two policies of one model, 4 samples each, written and read back as
    summary.csv is."""
    rows = []
    for item in ITEMS:
        for policy, auc, overhead in (("none", 0.6, 0.0), ("periodic-64-user", 0.9, 0.12)):
            rows.append({
                "model": "m", "item": item, "policy": policy, "n": 4,
                "alpha_mean": 0.6, "alpha_mean_low": 0.5, "alpha_mean_high": 0.7,
                "auc": auc, "auc_low": auc - 0.2, "auc_high": auc + 0.05,
                "half_life": 193.0, "half_life_low": 129.0, "half_life_high": 321.0,
                "half_life_censored": False, "final": auc - 0.1,
                "final_low": auc - 0.3, "final_high": auc + 0.05,
                "survival_median": 257.0, "survival_median_low": 129.0,
                "survival_median_high": math.inf, "survival_censored_share": 0.25,
                "tokens_generated": 512, "tokens_injected": int(512 * overhead),
                "tokens_restated": 0, "token_overhead": overhead,
            })  # fmt: skip
    frame = pd.DataFrame(rows)
    for (item, policy, column), value in (overrides or {}).items():
        frame.loc[(frame["item"] == item) & (frame["policy"] == policy), column] = value
    for metric in ("auc", "final"):  # the one-sided bounds the gates read: the ends, here
        for bound, end in (("lcb", "low"), ("ucb", "high")):
            if f"{metric}_{bound}" not in frame.columns:
                frame[f"{metric}_{bound}"] = frame[f"{metric}_{end}"]
        frame[f"{metric}_method"] = frame.get(f"{metric}_method", "clopper-pearson")
    return frame


def _evaluate(tmp_path, gates: list[dict], summary: pd.DataFrame | None = None, models=("m",)):
    write_csv(_summary() if summary is None else summary, tmp_path / "summary.csv")
    specs = [GateSpec.model_validate(g) for g in gates]
    return evaluate_gates(specs, read_summary(tmp_path / "summary.csv"), ITEMS, list(models))


def test_min_reads_the_lower_bound_max_the_upper_and_a_straddle_is_undecided(tmp_path):
    # none: auc 0.6 [0.4, 0.65]; periodic-64-user: auc 0.9 [0.7, 0.95]; n = 4
    gates = [
        {"metric": "auc", "policy": "periodic-64-user", "min": 0.7},  # 0.7 >= 0.7: pass
        {"metric": "auc", "policy": "none", "min": 0.7},  # 0.65 < 0.7: fail
        {"metric": "auc", "policy": "none", "min": 0.5},  # 0.4 < 0.5 <= 0.65: undecided
        {"metric": "auc", "policy": "periodic-64-user", "max": 0.95},  # pass
        {"metric": "auc", "policy": "periodic-64-user", "max": 0.6},  # 0.7 > 0.6: fail
        {"metric": "auc", "policy": "none", "max": 0.5},  # undecided
        {"metric": "auc", "policy": "none", "min": 0.3, "max": 0.7},  # inside both: pass
        {"metric": "auc", "policy": "none", "min": 0.5, "max": 0.99},  # straddles min
    ]
    out = _evaluate(tmp_path, gates, _summary({("mini-lower", "none", "auc_high"): 0.45}))
    first = out[out["item"] == "mini-fr"]
    assert first["verdict"].tolist() == [
        "pass", "fail", "undecided", "pass", "fail", "undecided", "pass", "undecided",
    ]  # fmt: skip
    assert first["passed"].tolist() == [v == "pass" for v in first["verdict"]]
    assert set(out["use"]) == {"interval"} and set(out["n"]) == {4}
    assert first["value_low"].tolist()[:3] == pytest.approx([0.7, 0.4, 0.4])
    assert first["value_high"].tolist()[:3] == pytest.approx([0.95, 0.65, 0.65])
    assert first["detail"].tolist()[:3] == [
        f"auc 0.9 [0.7, 0.95], n = 4 {CP}: lower bound 0.7 >= min 0.7",
        f"auc 0.6 [0.4, 0.65], n = 4 {CP}: upper bound 0.65 below min 0.7",
        f"auc 0.6 [0.4, 0.65], n = 4 {CP}: the interval straddles min 0.5: undecided; about "
        f"{int(first['samples_needed'].iloc[2])} samples would decide it if the observed rate "
        "stays",
    ]
    assert (
        first["detail"].iloc[4] == f"auc 0.9 [0.7, 0.95], n = 4 {CP}: lower bound 0.7 above max 0.6"
    )
    # each bound tested one-sided at the full level (gates.csv's level)
    assert set(out["level"]) == {0.95}
    # mini-lower's none interval is [0.4, 0.45]: wholly below min 0.5, a fail now
    assert out[out["item"] == "mini-lower"]["verdict"].iloc[2] == "fail"
    decided = out["verdict"] != "undecided"
    assert out.loc[decided, "samples_needed"].isna().all()
    assert (out.loc[~decided, "samples_needed"] > 4).all()


def test_four_of_four_passing_samples_no_longer_pass_auc_at_0_8(tmp_path, run_cli):
    """The issue's case: 4 samples that each pass every window. The old `use: ci_low` gate
    passed on the percentile bootstrap's [1, 1]; the stored interval now holds at n = 4, so the
    gate is undecided, exits 1, and says how many samples would decide it."""
    interval = mean_interval([1.0, 1.0, 1.0, 1.0], level=0.95, lower=0.0, upper=1.0)
    assert interval.low < 0.8 <= interval.high == pytest.approx(1.0)
    summary = _summary(
        {(i, "none", c): v for i in ITEMS for c, v in
         (("auc", 1.0), ("auc_low", interval.low), ("auc_high", interval.high))}
    )  # fmt: skip
    out = _evaluate(tmp_path, [{"metric": "auc", "policy": "none", "min": 0.8}], summary)
    assert out["verdict"].tolist() == ["undecided", "undecided"] and not out["passed"].any()
    needed = int(out["samples_needed"][0])
    assert needed > 4
    # at that many samples, all passing, the one-sided bound clears the bound; one fewer not
    assert one_sided_bounds([1.0] * needed, level=0.95).lcb >= 0.8
    assert one_sided_bounds([1.0] * (needed - 1), level=0.95).lcb < 0.8
    retired = _write_config(tmp_path, [{"metric": "auc", "policy": "none", "min": 0.8,
                                        "use": "ci_low"}])  # fmt: skip
    code, _, stderr = run_cli(["run", str(retired), "--out", str(tmp_path / "out")])
    assert code == 2 and "use: ci_low is retired" in stderr and not (tmp_path / "out").exists()
    run_dir, config = _finished_run(
        tmp_path, [{"metric": "auc", "policy": "none", "min": 0.8}], summary
    )
    code, stdout, _ = run_cli(["gate", str(run_dir), str(config)])
    assert code == 1
    assert "Gates: 0 of 2 gate checks passed, 2 undecided" in stdout
    assert "UNDECIDED gates[0] auc (all rules) of none >= 0.8 on mini-fr: auc 1 [" in stdout


def test_samples_needed_holds_the_mean_and_is_never_the_current_n(tmp_path):
    """The issue's case: 24 of 32 samples pass, gated auc >= 0.8. The old projection put the
    passes first, its running intersection rejected 0.75 itself, and it printed 32; holding
    the mean, the one-sided bound needs hundreds (order-neutral: only mean and n enter)."""
    gate = [{"metric": "auc", "policy": "none", "min": 0.8}]
    for method, anytime in (
        ("clopper-pearson", False),
        ("beta-binomial-cs", True),
        ("beta-binomial-cs+betting-cs", True),
    ):
        value_type = "binary" if method == "beta-binomial-cs" else "fraction"
        summary = _summary({(i, "none", c): v for i in ITEMS for c, v in (
            ("n", 32), ("auc", 0.75), ("auc_lcb", 0.62), ("auc_ucb", 0.86),
            ("auc_method", method))})  # fmt: skip
        needed = int(_evaluate(tmp_path, gate, summary)["samples_needed"][0])
        assert needed > 32
        # fixed n: about that many values of mean 0.75 (evenly ordered) put the upper bound
        # below 0.8, a tenth fewer do not: the projection is where the same bound decides.
        # Anytime: the n by which half the paths decide, which is before the evenly ordered
        # (mean) path decides (a path running ahead crosses first), but not by 1.35x
        factors = (1.05, 1.35) if anytime else (0.9, 1.05)
        sizes = [4 * round(needed * f / 4) for f in factors]  # whole [1, 1, 1, 0] blocks
        ucb = [one_sided_bounds(np.resize([1, 1, 1, 0], size), level=0.95, anytime=anytime,
                                value_type=value_type).ucb for size in sizes]  # fmt: skip
        assert ucb[0] >= 0.8 > ucb[1], (method, needed, ucb)
        if anytime:
            # a fixed design needs ~ 100: valid at every look costs (675 binary, 780 fraction)
            assert 600 < needed < 1024
        else:
            assert 100 < needed < 300


def test_samples_needed_of_closer_calls_on_the_bound_and_other_metrics(tmp_path):
    out = _evaluate(tmp_path, [{"metric": "auc", "policy": "none", "min": 0.5}])
    needed = int(out["samples_needed"][0])  # auc 0.6 at n = 4, straddling 0.5
    assert needed > 4
    # a closer call needs more samples
    closer = _evaluate(tmp_path, [{"metric": "auc", "policy": "none", "min": 0.55}])
    assert closer["samples_needed"][0] > needed
    # the estimate on the bound: no number of samples decides it
    on = _evaluate(tmp_path, [{"metric": "auc", "policy": "none", "min": 0.6}])
    assert math.isnan(on["samples_needed"][0])
    assert on["detail"][0].endswith("not decided within 1024 samples at this estimate")
    # not a bounded mean: no estimate, and the detail says why
    half = _evaluate(tmp_path, [{"metric": "half_life", "policy": "none", "min": 150}])
    assert half["verdict"][0] == "undecided" and math.isnan(half["samples_needed"][0])
    assert half["detail"][0].endswith("half_life is not a bounded mean")


def test_a_sequential_runs_interval_projects_with_a_confidence_sequence(tmp_path):
    summary = _summary({(i, "none", "auc_method"): "beta-binomial-cs" for i in ITEMS})
    gate = [{"metric": "auc", "policy": "none", "min": 0.5}]
    fixed = _evaluate(tmp_path, gate)["samples_needed"][0]
    anytime = _evaluate(tmp_path, gate, summary)["samples_needed"][0]
    assert anytime > fixed  # valid at every look costs samples


def test_no_interval_at_n_1_is_undecided_not_a_pass(tmp_path):
    summary = _summary({("mini-fr", "none", c): v for c, v in
                        (("n", 1), ("auc_low", math.nan), ("auc_high", math.nan))})  # fmt: skip
    out = _evaluate(tmp_path, [{"metric": "auc", "policy": "none", "min": 0.1}], summary)
    assert out["verdict"].tolist() == ["undecided", "pass"]
    assert out["detail"][0].startswith(f"auc 0.6, n = 1 {CP}: no interval: undecided")


def test_use_value_is_a_point_comparison_and_says_so(tmp_path):
    summary = _summary({("mini-lower", "none", "auc"): 0.4})
    out = _evaluate(tmp_path, [{"metric": "auc", "policy": "none", "min": 0.5, "use": "value"}],
                    summary)  # fmt: skip
    assert out["verdict"].tolist() == ["pass", "fail"] and out["passed"].tolist() == [True, False]
    assert out["value"].tolist() == pytest.approx([0.6, 0.4])
    assert out["detail"].tolist() == [
        "auc = 0.6 (point value, its interval ignored), >= 0.5",
        "auc = 0.4 (point value, its interval ignored), below min 0.5",
    ]
    assert out["gate"].tolist() == [0, 0] and out["use"].tolist() == ["value", "value"]
    assert math.isnan(out["max"][0]) and out["min"][0] == 0.5
    assert out["samples_needed"].isna().all()


def test_a_metric_without_an_interval_compares_its_value(tmp_path):
    gates = [
        {"metric": "token_overhead", "policy": "periodic-64-user", "max": 0.10},
        {"metric": "token_overhead", "policy": "periodic-64-user", "min": 0.05, "max": 0.2},
    ]
    out = _evaluate(tmp_path, gates)
    assert out["verdict"].tolist() == ["fail", "fail", "pass", "pass"]
    assert set(out["use"]) == {"value"}
    assert out["detail"][0] == "token_overhead = 0.12 (point value), above max 0.1"
    assert out["detail"][2] == "token_overhead = 0.12 (point value), in [0.05, 0.2]"


def test_censored_half_life_never_fell_so_it_passes_a_min_and_fails_a_max(tmp_path):
    summary = _summary(
        {
            ("mini-fr", "none", "half_life"): math.nan,
            ("mini-fr", "none", "half_life_censored"): True,
            ("mini-fr", "none", "half_life_low"): math.inf,  # no draw halved
            ("mini-fr", "none", "half_life_high"): math.inf,
            ("mini-lower", "none", "half_life"): math.nan,  # censored, nothing ever adhered to
            ("mini-lower", "none", "half_life_censored"): True,
            ("mini-lower", "none", "auc"): 0.0,
        }
    )
    gates = [
        {"metric": "half_life", "policy": "none", "min": 1024},
        {"metric": "half_life", "policy": "none", "max": 1024, "use": "value"},
    ]
    out = _evaluate(tmp_path, gates, summary)
    assert out["verdict"].tolist() == ["pass", "fail", "fail", "fail"]
    assert math.isinf(out["value"][0]) and math.isnan(out["value"][1])
    assert out["detail"][0] == (
        "half_life inf [inf, inf], n = 4: lower bound inf >= min 1024 (half_life never halved "
        "within the run (censored), so it counts as infinite)"
    )
    assert out["detail"][1].startswith("half_life adherence was 0 from the start")
    assert out["detail"][2].startswith("half_life = inf (point value, its interval ignored), above")


def test_undetermined_or_missing_values_fail(tmp_path):
    summary = _summary({("mini-fr", "none", "final"): math.nan})
    summary = summary[~((summary["item"] == "mini-lower") & (summary["policy"] == "none"))]
    out = _evaluate(tmp_path, [{"metric": "final", "policy": "none", "min": 0}], summary)
    assert out["verdict"].tolist() == ["fail", "fail"]
    assert out["detail"].tolist() == [
        "final undetermined (NaN): fails",
        "final no summary.csv row for this model, item and policy: fails",
    ]


def test_items_and_model_narrow_a_gate(tmp_path):
    gates = [{"metric": "auc", "policy": "none", "min": 0.3, "items": ["mini-lower"]}]
    out = _evaluate(tmp_path, gates, models=("m", "other"))
    assert list(zip(out["model"], out["item"], strict=True)) == [
        ("m", "mini-lower"), ("other", "mini-lower"),
    ]  # fmt: skip
    assert out["verdict"].tolist() == ["pass", "fail"]  # "other" has no row: unverified fails
    gates[0]["model"] = "m"
    assert _evaluate(tmp_path, gates, models=("m", "other"))["model"].tolist() == ["m"]


def test_undecided_conditions_name_what_more_samples_could_decide(tmp_path):
    gates = [
        {"metric": "auc", "policy": "none", "min": 0.5},  # undecided on both items
        {"metric": "auc", "policy": "periodic-64-user", "min": 0.5, "items": ["mini-fr"]},
        {"metric": "auc", "policy": "periodic-64-user", "max": 0.9, "items": ["mini-lower"]},
    ]
    out = _evaluate(tmp_path, gates)
    assert out["verdict"].tolist() == ["undecided", "undecided", "pass", "undecided"]
    assert undecided_conditions(out) == {
        ("m", "mini-fr", "none"), ("m", "mini-lower", "none"),
        ("m", "mini-lower", "periodic-64-user"),
    }  # fmt: skip
    assert undecided_conditions(out.iloc[0:0]) == set()
    assert undecided_conditions(pd.DataFrame()) == set()


def test_a_summary_without_the_column_is_one_line(tmp_path):
    old = _summary().drop(columns=["half_life_low", "half_life_high"])
    gate = [{"metric": "half_life", "policy": "none", "min": 1}]
    with pytest.raises(UserError, match=r"gates\[0\]: summary.csv has no column 'half_life_low'"):
        _evaluate(tmp_path, gate, old)


# ------------------------------------------------------------------------- junit.xml
def test_junit_xml_fails_fail_and_undecided_checks_and_says_which(tmp_path):
    summary = _summary({("mini-lower", "none", "auc_high"): 0.45})
    gates = [
        {"metric": "auc", "policy": "none", "min": 0.5},  # mini-fr undecided, mini-lower fails
        {"metric": "token_overhead", "policy": "periodic-64-user", "max": 0.2},  # pass
    ]
    root = ET.fromstring(junit_xml(_evaluate(tmp_path, gates, summary), "acme"))
    assert root.tag == "testsuites" and root.get("tests") == "4" and root.get("failures") == "2"
    (suite,) = root.findall("testsuite")
    assert suite.get("tests") == "4" and suite.get("failures") == "2"
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == [
        "gates[0] auc (all rules) of none >= 0.5 on mini-fr",
        "gates[0] auc (all rules) of none >= 0.5 on mini-lower",
        "gates[1] token_overhead of periodic-64-user <= 0.2 on mini-fr",
        "gates[1] token_overhead of periodic-64-user <= 0.2 on mini-lower",
    ]
    assert all(c.get("classname") == "m" for c in cases)
    undecided, failed = (c.find("failure") for c in cases[:2])
    assert cases[2].find("failure") is None and cases[3].find("failure") is None
    assert undecided.get("type") == "gate-undecided"
    assert undecided.get("message").startswith(
        f"undecided: auc 0.6 [0.4, 0.65], n = 4 {CP}: the interval straddles min 0.5: undecided"
    )
    assert undecided.get("message").endswith(
        "samples would decide it if the observed rate stays [model m]"
    )
    assert failed.get("type") == "gate-fail"
    assert failed.get("message") == (
        f"fail: auc 0.6 [0.4, 0.45], n = 4 {CP}: upper bound 0.45 below min 0.5 [model m]"
    )


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
    out = gate_outputs(config, _task_items(), {})  # no summary.csv needed
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


def test_harness_gate_reads_only_the_files_the_run_wrote(tmp_path, run_cli):
    """A rules.csv an earlier run left in the folder (here no readable CSV) is not one the
    manifest lists, so `harness gate` never opens it; the verdicts are the run's."""
    gate = {"metric": "token_overhead", "policy": "periodic-64-user", "max": 0.1}
    run_dir, config = _finished_run(tmp_path, [gate])
    manifest = json.loads((run_dir / "manifest.json").read_text())
    (run_dir / "manifest.json").write_text(json.dumps({**manifest, "files": ["summary.csv"]}))
    (run_dir / "rules.csv").write_bytes(b"model,item\n\x80\xff an earlier run's\n")
    code, stdout, stderr = run_cli(["gate", str(run_dir), str(config)])
    assert code == 1, stderr
    assert "Gates: 0 of 2 gate checks passed, 2 failed" in stdout
    (run_dir / "manifest.json").write_text(json.dumps({**manifest, "files": []}))
    code, _, stderr = run_cli(["gate", str(run_dir), str(config)])
    assert code == 2 and "its run wrote no summary.csv" in stderr


def test_harness_score_s_gates_read_only_the_files_it_wrote(tmp_path, run_cli, monkeypatch):
    """Texts scored into a folder where a chat log's scoring left turns.csv and
    turn_adherence.csv (here no readable CSV): the rules and the gates come from this
    command's files alone, the stale ones are never opened."""
    from harness.engines.scripted import CharTokenizer

    monkeypatch.setattr("harness.scoring.io.load_tokenizer", lambda name=None: CharTokenizer())
    monkeypatch.chdir(tmp_path)
    text = {"item": "fmt-nocomma-story", "text": "The raft drifted on and on. It went far."}
    (tmp_path / "texts.jsonl").write_text(json.dumps(text) + "\n")
    (tmp_path / "gates.yaml").write_text("gates: [{metric: auc, policy: none, min: 0}]\n")
    out = tmp_path / "out"
    out.mkdir()
    for name in ("turns.csv", "turn_adherence.csv"):
        (out / name).write_bytes(b"model,item\n\x80\xff an earlier score's\n")
    suite = str(Path(__file__).parents[2] / "tasks" / "formats.yaml")
    argv = ["score", "texts.jsonl", "--suite", suite, "--out", "out", "--gates", "gates.yaml"]
    code, stdout, stderr = run_cli(argv)
    assert code == 1, stderr  # the gate's verdict (this text has no model's summary row)
    assert pd.read_csv(out / "gates.csv")["metric"].tolist() == ["auc"]
    rules = pd.read_csv(out / "rules.csv")
    assert rules["item"].tolist() == ["fmt-nocomma-story"] and rules["turns"].isna().all()


def test_harness_gate_rewrites_the_verdicts_and_exits_0_or_1(tmp_path, run_cli):
    gate = {"metric": "token_overhead", "policy": "periodic-64-user", "max": 0.1}
    run_dir, config = _finished_run(tmp_path, [gate])
    code, stdout, _ = run_cli(["gate", str(run_dir), str(config)])
    assert code == 1
    assert "Gates: 0 of 2 gate checks passed, 2 failed" in stdout
    assert "FAIL gates[0] token_overhead" in stdout
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


def test_harness_gate_reads_an_until_decided_folder_with_the_flag(tmp_path, run_cli):
    """`harness run CONFIG --until-decided` records samples {min, max}; `harness gate` given the
    same CONFIG must read it the same way, and say so when the flag is missing."""
    gate = {"metric": "auc", "policy": "none", "min": 0.5}
    run_dir, config = _finished_run(tmp_path, [gate])
    manifest = json.loads((run_dir / "manifest.json").read_text())
    samples = manifest["config"]["samples"]
    manifest["config"]["samples"] = {"min": samples, "max": 16, "batch": None}
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    code, _, stderr = run_cli(["gate", str(run_dir), str(config)])
    assert code == 2 and stderr.count("\n") == 1
    assert f"was sampled until decided (samples {samples} to 16); add --until-decided" in stderr
    code, _, stderr = run_cli(["gate", str(run_dir), str(config), "--until-decided"])
    assert code == 2 and f"this reads samples {samples} to 64: give --max-samples" in stderr
    code, stdout, _ = run_cli(
        ["gate", str(run_dir), str(config), "--until-decided", "--max-samples", "16"]
    )
    assert code in (0, 1) and "Gates:" in stdout and (run_dir / "gates.csv").is_file()
    code, _, stderr = run_cli(["gate", str(run_dir), str(config), "--max-samples", "16"])
    assert code == 2 and "--max-samples needs --until-decided" in stderr


def test_terminal_shows_the_gates_before_the_table(tmp_path):
    from rich.console import Console

    from harness.report.terminal import print_summary

    summary = _summary({("mini-lower", "none", "auc_high"): 0.45})
    run_dir, config = _finished_run(tmp_path, [], summary)
    gates = [{"metric": "auc", "policy": "none", "min": 0.5},
             {"metric": "auc", "policy": "none", "min": 0.3}]  # fmt: skip
    write_csv(_evaluate(tmp_path, gates, summary), run_dir / "gates.csv")
    console = Console(record=True, width=200)
    print_summary(run_dir, console)
    text = console.export_text()
    assert text.index("Gates: 2 of 4 gate checks passed, 1 failed, 1 undecided") < text.index(
        "adherence AUC"
    )
    assert (
        "UNDECIDED gates[0] auc (all rules) of none >= 0.5 on mini-fr: auc 0.6 [0.4, 0.65], "
        f"n = 4 {CP}: " in text
    )
    assert (
        "FAIL gates[0] auc (all rules) of none >= 0.5 on mini-lower: auc 0.6 [0.4, 0.45], "
        f"n = 4 {CP}: " in text
    )
    assert (
        "PASS gates[1] auc (all rules) of none >= 0.3 on mini-fr: auc 0.6 [0.4, 0.65], "
        f"n = 4 {CP}: " in text
    )
    assert "0.60 [0.40, 0.65] n=4" in text  # the summary table's intervals carry n too


def test_report_section_lists_the_checks_escaped_and_says_when_there_are_none(tmp_path):
    from harness.report.gates import gates_section
    from harness.report.load import RunData

    model = "<img src=x onerror=alert(1)>"
    gates = _evaluate(
        tmp_path, [{"metric": "auc", "policy": "none", "min": 0.5}], _summary().assign(model=model),
        (model,),
    )  # fmt: skip
    html, _ = gates_section(RunData(run_dir=tmp_path, frames={"gates.csv": gates}))
    assert "0 of 2 gate checks passed, 2 undecided (exit code 1)." in html
    assert html.count('<tr class="gate-undecided"><td>UNDECIDED</td>') == 2
    assert "<td>0.6 [0.4, 0.65]</td><td>4</td><td>about " in html
    assert "<img" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html
    empty, _ = gates_section(
        RunData(run_dir=tmp_path, problems={"gates.csv": "the file has no rows"})
    )
    assert "This run has no gates" in empty


def test_samples_needed_uses_the_configs_interval_level(tmp_path):
    from harness.stages.gates import gate_outputs

    gate = [{"metric": "auc", "policy": "none", "min": 0.5}]
    needed = {}
    for level in (0.9, 0.99):
        config = load_run_config(_write_config(tmp_path, gate, stats={"level": level}))
        write_csv(_summary().assign(model=config.models[0]), tmp_path / "summary.csv")
        frame = gate_outputs(config, _task_items(), run_files(tmp_path))["gates.csv"]
        needed[level] = frame["samples_needed"][0]
    assert needed[0.99] > needed[0.9] > 4


def test_family_bonferroni_tests_each_bound_at_level_over_m_and_says_the_family_error(
    tmp_path,
):
    """Item 5: with 4 checks of one bound each, stats.family: bonferroni tests each at
    1 - 0.05 / 4; gates.csv's level says so, and the terminal states the run's error."""
    from rich.console import Console

    from harness.report.terminal import print_gates
    from harness.stages.gates import gate_outputs

    gates = [{"metric": "auc", "policy": "none", "min": 0.3},
             {"metric": "final", "policy": "none", "max": 0.9}]  # fmt: skip
    for family, level in (("none", 0.95), ("bonferroni", 1 - 0.05 / 4)):
        config = load_run_config(_write_config(tmp_path, gates, stats={"family": family}))
        write_csv(_summary().assign(model=config.models[0]), tmp_path / "summary.csv")
        frame = gate_outputs(config, _task_items(), run_files(tmp_path))["gates.csv"]
        assert frame["level"].tolist() == pytest.approx([level] * 4)
        write_csv(frame, tmp_path / "gates.csv")
        console = Console(record=True, width=300)
        print_gates(tmp_path, console)
        text = console.export_text()
        assert "4 bounds tested, each wrong with probability <= " in text
        total = "5 %" if family == "bonferroni" else "20 %"
        assert f"the chance that any verdict is wrong is <= {total}" in text, text
    # a metric whose interval is two-sided only cannot join the family
    half = [{"metric": "half_life", "policy": "none", "min": 100}]
    with pytest.raises(UserError, match="stats.family: bonferroni bounds the error of every"):
        load_run_config(_write_config(tmp_path, half, stats={"family": "bonferroni"}))


def test_alpha_mean_over_fewer_than_8_pairs_is_undecided_and_names_the_method(tmp_path):
    """Item 9: alpha_mean [0.5, 0.7] clears max 0.8, but over 2 probed pairs the interval is
    one curve's noise: undecided, and the detail names the method."""
    summary = _summary().assign(alpha_mean_n=2, alpha_mean_method="percentile-bootstrap")
    gate = [{"metric": "alpha_mean", "policy": "none", "max": 0.8}]
    out = _evaluate(tmp_path, gate, summary)
    assert out["verdict"].tolist() == ["undecided", "undecided"]
    assert "over 2 probed pairs (percentile-bootstrap): fewer than 8 pairs" in out["detail"][0]
    many = _evaluate(tmp_path, gate, summary.assign(alpha_mean_n=8))
    assert many["verdict"].tolist() == ["pass", "pass"]
    assert "(percentile-bootstrap interval)" in many["detail"][0]
    assert many["level"].tolist() == pytest.approx([0.975, 0.975])  # one side of a 95 % CI
