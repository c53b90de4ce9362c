"""`reminder` and `restatement` are optional in suites: reminders fall back to the system
prompt, and items that have both texts keep their generation cache keys."""

from __future__ import annotations

from pathlib import Path

import yaml

from harness.config import load_run_config_and_suites
from harness.models.zoo import ResolvedModel
from harness.selection import sample_specs, select_items
from harness.stages.generate import unit_key

DATA = Path(__file__).parent.parent / "data" / "configs"
MODEL = ResolvedModel(name="m", source="tiny", path=Path("/nonexistent"), content_key="k")


def _keys(config_path: Path) -> dict[str, str]:
    config, suites = load_run_config_and_suites(config_path)
    items = select_items(config, suites)
    specs = sample_specs(config, "m", items, "")
    return {p.name: unit_key(config, MODEL, p, specs, items) for p in config.policies}


def test_items_with_both_texts_keep_their_cache_keys(monkeypatch):
    # Computed before the texts became optional: a changed key would regenerate every
    # existing cache (and change the quickstart's outputs).
    monkeypatch.chdir(DATA)
    assert _keys(DATA / "tiny-run.yaml") == {
        "none": "c3636e9f153ef9170ea1a91ee0d68e8d",
        "restate": "248cbf193ac87345ee600b34d6108198",
        "periodic": "5efbac42f63e81605895fa6ec16e05f8",
        "adaptive": "d351f9d3beb3f38c056056e471c8f041",
    }


def test_an_item_without_texts_is_reminded_of_its_system_prompt(tmp_path):
    suite = yaml.safe_load((DATA / "mini-suite.yaml").read_text())
    for item in suite["items"]:
        del item["reminder"], item["restatement"]
    (tmp_path / "mini-suite.yaml").write_text(yaml.safe_dump(suite))
    (tmp_path / "run.yaml").write_text((DATA / "tiny-kill.yaml").read_text())
    config, suites = load_run_config_and_suites(tmp_path / "run.yaml")
    specs = sample_specs(config, "m", select_items(config, suites), "")
    assert [s.reminder for s in specs] == [s.system for s in specs]
    assert specs[0].reminder == "Always answer in French." and specs[0].restatement == ""
