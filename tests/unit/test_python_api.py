"""harness.load_config / plan from Python (harness/api.py), without a model: configs from a
file, a dict or a model; one-line errors; no process-wide patch installed by the library."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import harness
from harness.config.run import RunConfig

ROOT = Path(__file__).parent.parent.parent
DATA = ROOT / "tests" / "data" / "configs"
CONFIG = {"name": "api", "models": ["smollm2-135m-instruct"], "suites": ["mini-suite.yaml"],
          "policies": ["none"], "samples": 2}  # fmt: skip


def test_a_dict_config_resolves_its_suites_against_base():
    config = harness.load_config(CONFIG, base=DATA)
    assert isinstance(config, RunConfig)
    assert config.suites == [(DATA / "mini-suite.yaml").resolve()]
    assert harness.load_config(config) == config  # a model is taken as it is


def test_a_file_config_is_the_clis_with_absolute_suites():
    from harness.config.files import load_run_config

    config = harness.load_config(DATA / "tiny-run.yaml")
    cli = load_run_config(DATA / "tiny-run.yaml")
    assert config.suites == [(DATA / "mini-suite.yaml").resolve()]
    assert config.model_copy(update={"suites": cli.suites}) == cli


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"samples": 0}, "<config>: field 'samples': Input should be greater than 0"),
        ({"suites": ["nowhere.yaml"]}, "<config>: field 'suites': nowhere.yaml: file not found"),
        ({"colour": "red"}, "<config>: field 'colour': unknown key"),
    ],
)
def test_a_bad_dict_config_is_one_line_naming_the_field(change, message):
    with pytest.raises(harness.UserError) as caught:
        harness.load_config({**CONFIG, **change}, base=DATA)
    assert str(caught.value) == message


def test_plan_from_python_lists_units_and_writes_nothing(tmp_path):
    plan = harness.plan(harness.load_config(CONFIG, base=DATA), tmp_path / "out")
    generated = [u for u in plan.units if u.stage == "generate"]
    assert [u.policy for u in generated] == ["none"] and generated[0].samples == 2
    assert plan.totals.models[0].model == "smollm2-135m-instruct"
    assert not (tmp_path / "out").exists()


def test_harness_plan_is_the_api_function(tmp_path):
    """The plan module lives in harness/units/plan.py, so `harness.plan` is only the API's."""
    import harness.units.plan

    assert harness.plan is harness.api.plan and harness.units.plan.plan_run
    assert harness.plan(CONFIG | {"suites": [str(DATA / "mini-suite.yaml")]}).units


def test_importing_and_planning_patch_nothing_process_wide():
    """Only the CLI binds every multiprocessing child to the process (harness.cli.main)."""
    code = (
        "from multiprocessing.process import BaseProcess\n"
        "before = BaseProcess.start\n"
        "import harness, sys\n"
        "assert 'harness.api' not in sys.modules  # import harness stays light\n"
        f"harness.load_config({CONFIG!r}, base={str(DATA)!r})\n"
        "import harness.pipeline, harness.engines.vllm_engine\n"
        "assert BaseProcess.start is before\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"continuation": "generate"}, "probe: tokens: Field required"),
        ({"continuation": "generate", "tokens": 0},
         "--tokens and --t-min must be positive, --chunk 0 or positive"),
    ],
)  # fmt: skip
def test_a_bad_probe_from_python_is_one_line_and_writes_nothing(tmp_path, flags, message):
    with pytest.raises(harness.UserError, match=f"^{message}$"):
        harness.probe(tmp_path / "out", model="smollm2-135m-instruct", **flags)
    assert not (tmp_path / "out").exists()


def test_a_run_folder_reads_as_typed_frames_records_and_manifest(tmp_path):
    """The whole pipeline on test_resume's scripted engine (no model), then the folder read
    through `harness.Run`."""
    import pandas as pd

    from harness.pipeline import STAGES, run_stages
    from harness.results import SummaryRow, WindowRow
    from tests.scripted_run import scripted_run
    from tests.unit.test_resume import CONFIG, SUITE, ScriptedEngine

    (tmp_path / "suite.yaml").write_text(SUITE)
    (tmp_path / "run.yaml").write_text(CONFIG)
    out = tmp_path / "run"
    with scripted_run(tmp_path / "run.yaml", out, ScriptedEngine()) as ctx:
        run_stages(ctx, STAGES, show_progress=False)

    run = harness.Run(out)
    summary = run.frame(SummaryRow)
    assert sorted(summary["policy"]) == sorted(["none", "periodic-8-user", "none",
                                                "periodic-turns2-system"])  # fmt: skip
    assert pd.api.types.is_float_dtype(summary["auc"]) and summary["auc"].between(0, 1).all()
    windows = run.frame(WindowRow)
    # booleans as Python bools (None where undecided), not "True" strings
    assert {type(v) for v in windows["passed"]} <= {bool, type(None)} and len(windows)
    assert len(run.records) == 2 * 3 * 2  # 2 items x 3 samples x 2 policies each
    assert {r.item for r in run.records} == {"plain", "talk"}
    assert run.manifest.name == "scripted" and run.manifest.timings["generate"] >= 0
    assert run.manifest.models["tiny-random-llama"].content_key == "scripted-1"
    assert {"generations.jsonl", "summary.csv", "gates.csv"} <= set(run.manifest.files)
    assert harness.Run(tmp_path / "nothing").frame(SummaryRow).empty
    # a file the manifest does not list is not this run's (an earlier run's, in a reused
    # folder): not read, though it is there
    import json

    manifest = json.loads((out / "manifest.json").read_text())
    manifest["files"].remove("summary.csv")
    (out / "manifest.json").write_text(json.dumps(manifest))
    assert (out / "summary.csv").is_file() and harness.Run(out).frame(SummaryRow).empty


def test_a_file_plans_through_the_api_as_the_cli_plans_it(tmp_path, monkeypatch):
    """One planning path: `harness.plan(file)` resolves the file's relative paths against its
    folder, as `harness run` does (it plans through it), whatever the working directory; a
    config loaded first and planned from elsewhere keeps them too."""
    from .test_gates import _write_config

    folder = tmp_path / "configs"
    folder.mkdir()
    good = '{"text": "Bonjour à vous.", "check": {"type": "language", "target": "fr"}, '
    (folder / "labels.jsonl").write_text(good + '"expected": true}\n')
    path = _write_config(folder, [], scoring={"window": 64, "validation": "labels.jsonl"})
    monkeypatch.chdir(tmp_path)  # not the config's folder
    labels = (folder / "labels.jsonl").resolve()
    assert harness.plan(path, tmp_path / "out").config.scoring.validation == labels
    loaded = harness.load_config(path)
    monkeypatch.chdir(ROOT)
    assert harness.plan(loaded, tmp_path / "out").config.scoring.validation == labels
