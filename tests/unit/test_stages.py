"""The stage protocol: stages run in order over one context, each returned file is written
once by the one writer, and a later stage reads what an earlier one returned."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from pydantic import BaseModel

from harness.stages.base import RunContext, write_output


class Row(BaseModel):
    a: int
    b: str


class Counts:
    name = "counts"

    def run(self, ctx):
        return {"counts.csv": pd.DataFrame({"item": ["x", "y"], "n": [3, 5]})}


class Doubled:
    name = "doubled"

    def run(self, ctx):
        counts = ctx.frame("counts.csv")
        return {
            "doubled.csv": counts.assign(n=counts["n"] * 2),
            "rows.jsonl": [
                Row(a=int(n), b=i) for i, n in zip(counts["item"], counts["n"], strict=True)
            ],
            "meta.json": {"total": int(counts["n"].sum())},
        }


def _context(tmp_path) -> RunContext:
    return RunContext(
        config=None, store=None, out_dir=tmp_path, run_id="r", suites=[], items=[], models=[],
        twins={},
    )  # fmt: skip


def test_stages_run_in_order_and_each_file_is_written_once(tmp_path):
    from harness.pipeline import run_stages

    ctx = _context(tmp_path)
    run_stages(ctx, [Counts(), Doubled()], show_progress=False)
    assert pd.read_csv(tmp_path / "doubled.csv")["n"].tolist() == [6, 10]
    lines = (tmp_path / "rows.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in lines] == [{"a": 3, "b": "x"}, {"a": 5, "b": "y"}]
    assert json.loads((tmp_path / "meta.json").read_text()) == {"total": 8}
    assert set(ctx.timings) == {"counts", "doubled"}
    assert not list(tmp_path.glob(".*.tmp"))  # atomic writes leave no temporary files


def test_a_stage_reading_a_file_nobody_wrote_gets_an_empty_frame(tmp_path):
    assert _context(tmp_path).frame("missing.csv").empty


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
    from harness.config import load_run_config_and_suites
    from harness.models.zoo import ResolvedModel
    from harness.selection import sample_specs, select_items
    from harness.stages.generate import generation_key

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
