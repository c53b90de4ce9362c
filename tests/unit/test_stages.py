"""The stage protocol: stages declare what they read and write, a list that reads before it
writes is refused before it runs, each returned file is written once by the one writer, and a
later stage reads an earlier one's CSV as a typed frame (booleans as booleans)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from pydantic import BaseModel

from harness.results import SummaryRow, WindowRow
from harness.stages.base import Manifest, Records, check_order, write_output
from harness.stages.context import StageContext, UndeclaredRead


class Row(BaseModel):
    a: int
    b: str


def _window(sample: int, passed) -> dict:
    return {
        "run_id": "r", "model": "m", "task": "t", "item": "x", "policy": "none", "seed": 1,
        "sample": sample, "window": 0, "t_start": 1, "t_end": 16, "t_gen_start": 1,
        "check": "lang", "scope": "window", "value": 1.0, "passed": passed, "reason": "",
    }  # fmt: skip


class Windows:
    name = "windows"
    reads = ()
    writes = (WindowRow,)

    def run(self, ctx):
        rows = [_window(0, True), _window(1, False), _window(2, None)]
        return {"windows.csv": pd.DataFrame(rows)}


class Passes:
    name = "passes"
    reads = (WindowRow,)
    writes = (Manifest,)

    def __init__(self) -> None:
        self.seen = None

    def run(self, ctx):
        windows = ctx.frame(WindowRow)
        self.seen = list(windows["passed"])
        return {
            "manifest.json": {"passed": int((windows["passed"] == True).sum())},  # noqa: E712
        }


def _context(tmp_path) -> StageContext[None]:
    return StageContext(None, None, tmp_path)


def test_a_later_stage_reads_a_typed_frame_and_each_file_is_written_once(tmp_path):
    from harness.pipeline import run_stages

    ctx, passes = _context(tmp_path), Passes()
    run_stages(ctx, [Windows(), passes], show_progress=False)
    assert passes.seen == [True, False, None]  # Python bools and None, not strings or NaN
    assert json.loads((tmp_path / "manifest.json").read_text()) == {"passed": 1}
    assert pd.read_csv(tmp_path / "windows.csv")["sample"].tolist() == [0, 1, 2]
    assert set(ctx.timings) == {"windows", "passes"}
    assert not list(tmp_path.glob(".*.tmp"))  # atomic writes leave no temporary files


def test_a_typed_frame_holds_bools_whatever_the_cells_were():
    from harness.results import typed_frame

    cells = pd.DataFrame([_window(0, "True"), _window(1, "false"), _window(2, float("nan"))])
    assert list(typed_frame(WindowRow, cells)["passed"]) == [True, False, None]
    with pytest.raises(ValueError, match="windows.csv: column passed: 'True' is not a bool"):
        write_output(Path("windows.csv"), pd.DataFrame([_window(0, "True")]))  # writer: bools


def test_one_parser_reads_every_boolean_cell():
    import numpy as np

    from harness.results import as_bool

    cells = [True, np.bool_(False), "True", " false ", "1", 0, 1.0, "", None, float("nan"), "x"]
    assert [as_bool(c) for c in cells] == [
        True, False, True, False, True, False, True, None, None, None, None,
    ]  # fmt: skip


def test_a_stage_list_that_reads_before_it_writes_is_refused():
    with pytest.raises(ValueError, match="stage passes reads windows.csv, which no stage before"):
        check_order([Passes(), Windows()])
    check_order([Windows(), Passes()])


def test_the_run_s_stage_lists_are_in_order():
    from harness.pipeline import LOOP, STAGES

    check_order(STAGES)
    check_order(LOOP)
    analyse = next(s for s in STAGES if s.name == "analyse")
    assert SummaryRow in analyse.writes and WindowRow in analyse.reads


def test_a_stage_may_read_only_what_it_declares(tmp_path):
    from harness.pipeline import run_stages

    class Sneaky:
        name, reads, writes = "sneaky", (), ()

        def run(self, ctx):
            return {"x": ctx.frame(WindowRow)}

    with pytest.raises(UndeclaredRead, match="stage sneaky reads windows.csv without declaring"):
        run_stages(_context(tmp_path), [Sneaky()], show_progress=False)


def test_a_product_passes_through_the_map_and_only_to_the_stages_that_declare_it(tmp_path):
    """Records (no CSV) go from the stage that writes them to the one that declares them,
    through the context's map; a stage that reads them undeclared fails, and a file-less
    product is never written to the folder."""
    from harness.pipeline import run_stages
    from harness.stages.base import Curves

    class Makes:
        name, reads, writes = "makes", (), (Records, Curves)

        def run(self, ctx):
            return {"generations.jsonl": [], "Curves": {("m", "k"): {"kl": [1.0]}}}

    class Uses:
        name, reads, writes = "uses", (Records, Curves), ()
        seen = None

        def run(self, ctx):
            Uses.seen = (ctx.read(Records), ctx.read(Curves))
            return {}

    class Hides:
        name, reads, writes = "hides", (Records,), ()

        def run(self, ctx):
            return {"x": ctx.read(Curves)}

    ctx = _context(tmp_path)
    run_stages(ctx, [Makes(), Uses()], show_progress=False)
    assert Uses.seen == ([], {("m", "k"): {"kl": [1.0]}})
    assert ctx.artifacts.files() == ["generations.jsonl"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["generations.jsonl"]
    with pytest.raises(UndeclaredRead, match="stage hides reads Curves without declaring it"):
        run_stages(_context(tmp_path), [Makes(), Hides()], show_progress=False)


def test_a_stage_may_write_only_what_it_declares(tmp_path):
    from harness.pipeline import run_stages

    class Loud:
        name, reads, writes = "loud", (), (Manifest,)

        def run(self, ctx):
            return {"summary.csv": pd.DataFrame()}

    with pytest.raises(RuntimeError, match="stage loud wrote undeclared summary.csv"):
        run_stages(_context(tmp_path), [Loud()], show_progress=False)
    assert not (tmp_path / "summary.csv").exists()


def test_a_stage_reading_a_file_nobody_wrote_gets_an_empty_frame(tmp_path):
    assert _context(tmp_path).frame(SummaryRow).empty


def test_write_output_refuses_a_value_it_has_no_writer_for(tmp_path):
    with pytest.raises(TypeError, match="x.bin: no writer for bytes"):
        write_output(tmp_path / "x.bin", b"raw")


def test_the_run_command_names_every_stage_in_pipeline_order():
    """Its docstring is where a reader of the CLI learns the stages (the order itself is
    tested by running the pipeline: tests/unit/test_resume.py)."""
    import harness.commands.run
    from harness.pipeline import STAGES

    doc = " ".join(harness.commands.run.__doc__.split())
    assert " -> ".join(stage.name for stage in STAGES) in doc


def test_adaptive_generation_units_are_keyed_by_the_checks_that_trigger_them(tmp_path):
    """Editing an item's check must redo the adaptive policy's records (its reminders depend on
    the checks) and reuse every other policy's."""
    from harness.config.files import load_run_config_and_suites
    from harness.models.zoo import ResolvedModel
    from harness.units.run_units import generation_key
    from harness.units.selection import sample_specs, select_items

    data = Path(__file__).parent.parent / "data" / "configs"
    suite = (data / "mini-suite.yaml").read_text()
    (tmp_path / "mini-suite.yaml").write_text(suite)
    config_text = (
        (data / "tiny-kill.yaml")
        .read_text()
        .replace("  - none\n", "  - none\n  - {name: adaptive, every: 16}\n")
    )
    (tmp_path / "run.yaml").write_text(config_text)
    model = ResolvedModel(name="m", source="tiny", path=tmp_path, content_key="k")

    def keys() -> dict[str, str]:
        config, suites = load_run_config_and_suites(tmp_path / "run.yaml")
        items = select_items(config, suites)
        specs = sample_specs(config, "m", items, "")
        return {p.name: generation_key(config, model, p, specs, items) for p in config.policies}

    before = keys()
    (tmp_path / "mini-suite.yaml").write_text(suite.replace("target: fr", "target: de"))
    after = keys()
    assert after["adaptive"] != before["adaptive"]
    assert after["none"] == before["none"] and after["periodic"] == before["periodic"]


STRIPPED_SUITE = """\
suite: s
items:
  - id: one
    system: SYS Answer yes.
    user: Hello.
    checks: [{type: regex_must, pattern: "yes"}]
"""
STRIPPED_CONFIG = """\
name: stripped
models: [tiny-random-llama]
suites: [suite.yaml]
policies: [none]
samples: 2
generation: {engine: hf, max_tokens: 16}
scoring: {window: 8}
probe: {enabled: false}
theory: {relay: null, bias_lams: []}
"""


@pytest.mark.parametrize(
    ("stage_name", "hidden"),
    [("score", "generations.jsonl"), ("analyse", "windows.csv"), ("laws", "Curves"),
     ("manifest", "Timings"), ("manifest", "RunFiles"), ("gates", "summary.csv"),
     ("gates", "rules.csv"), ("gates", "rule_curves.csv"), ("gates", "RunFiles"),
     ("report", "summary.csv"), ("report", "windows.csv"), ("report", "gates.csv"),
     ("report", "generations.jsonl"), ("report", "manifest.json"), ("report", "RunFiles")],
)  # fmt: skip
def test_the_run_s_own_stages_fail_on_a_read_they_do_not_declare(tmp_path, stage_name, hidden):
    """The check is on in the pipeline's own stage list: a real stage whose declaration
    leaves out one artifact it reads (in `reads` or `reads_if_written`) fails the run at that
    stage (here over the scripted engine), so no stage can lean on an undeclared artifact and
    pass its tests. Gates and report read the folder's files only through the check: what
    this run wrote (`RunFiles`), each by its declared artifact."""
    from harness.engines.scripted import ScriptedEngine
    from harness.pipeline import STAGES, run_stages
    from harness.stages.base import artifact_name, optional_reads
    from tests.scripted_run import scripted_run

    class Stripped:
        def __init__(self, stage) -> None:
            self.stage, self.name, self.writes = stage, stage.name, stage.writes
            self.reads = tuple(a for a in stage.reads if artifact_name(a) != hidden)
            optional = optional_reads(stage)
            self.reads_if_written = tuple(a for a in optional if artifact_name(a) != hidden)
            dropped = len(stage.reads) + len(optional) - len(self.reads)
            assert dropped - len(self.reads_if_written) == 1, f"{stage.name} lacks {hidden}"

        def run(self, ctx):
            return self.stage.run(ctx)

    (tmp_path / "suite.yaml").write_text(STRIPPED_SUITE)
    (tmp_path / "run.yaml").write_text(STRIPPED_CONFIG)
    index = next(i for i, s in enumerate(STAGES) if s.name == stage_name)
    stages = [*STAGES[:index], Stripped(STAGES[index])]
    engine = ScriptedEngine({"SYS": 0.5})
    refused = pytest.raises(UndeclaredRead, match=f"stage {stage_name} reads {hidden} without")
    with scripted_run(tmp_path / "run.yaml", tmp_path / "out", engine) as ctx, refused:
        run_stages(ctx, stages, show_progress=False)


def test_a_run_into_a_reused_folder_reads_none_of_an_earlier_run_s_files(tmp_path):
    """An earlier run with another config (conversations, forks) left its files in the --out
    folder: this run's gates and report, and `harness report DIR` after it, read only what
    this run wrote (manifest.json lists it). The stale files here are no readable CSV, so a
    reader that opened one would fail the run."""
    from harness.engines.scripted import ScriptedEngine
    from harness.pipeline import STAGES, run_stages
    from harness.report import render_report
    from tests.scripted_run import scripted_run

    (tmp_path / "suite.yaml").write_text(STRIPPED_SUITE)
    (tmp_path / "run.yaml").write_text(
        STRIPPED_CONFIG + "gates: [{metric: auc, policy: none, min: 0}]\n"
    )
    out = tmp_path / "out"
    out.mkdir()
    stale = ("conversations.csv", "turn_adherence.csv", "carried.csv", "forks.jsonl")
    for name in stale:
        (out / name).write_bytes(b"model,item\n\x80\xff stale\n")
    with scripted_run(tmp_path / "run.yaml", out, ScriptedEngine({"SYS": 1.0})) as ctx:
        run_stages(ctx, STAGES, show_progress=False)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["files"] == ctx.artifacts.files()[: len(manifest["files"])]
    assert {"summary.csv", "rules.csv", "gates.csv"} <= set(manifest["files"])
    assert not set(stale) & set(manifest["files"])
    assert pd.read_csv(out / "gates.csv")["verdict"].tolist() == ["pass"]
    run_report = (out / "report.html").read_text(encoding="utf-8")
    assert "carried.csv is not in this run folder" in run_report
    (out / "report.html").unlink()
    again = render_report(out).read_text(encoding="utf-8")  # `harness report DIR`
    assert "carried.csv is not in this run folder" in again
    assert all((out / name).is_file() for name in stale)  # left alone, never read


def test_the_manifest_is_written_and_read_by_one_model(tmp_path):
    """manifest.json is the dump of `RunManifest`: every key it holds is a declared field
    (none rides along untyped), and reading it back through the model gives it unchanged."""
    from harness import Run
    from harness.engines.scripted import ScriptedEngine
    from harness.pipeline import STAGES, run_stages
    from harness.results.manifest import RunManifest
    from tests.scripted_run import scripted_run

    (tmp_path / "suite.yaml").write_text(STRIPPED_SUITE)
    (tmp_path / "run.yaml").write_text(STRIPPED_CONFIG)
    out = tmp_path / "out"
    with scripted_run(tmp_path / "run.yaml", out, ScriptedEngine({"SYS": 1.0})) as ctx:
        run_stages(ctx, STAGES, show_progress=False)
    written = json.loads((out / "manifest.json").read_text())
    assert set(written) <= set(RunManifest.model_fields)
    manifest = Run(out).manifest
    assert isinstance(manifest, RunManifest) and manifest.model_extra == {}
    assert manifest.model_dump(mode="json") == written
    assert manifest.t_unit and manifest.policies == ctx.config.policy_labels()
