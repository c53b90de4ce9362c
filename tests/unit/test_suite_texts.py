"""`reminder` and `restatement` are optional in suites: reminders fall back to the system
prompt, and generation units are keyed by the texts the samples actually get."""

from __future__ import annotations

from pathlib import Path

import yaml

from harness.config.files import load_run_config_and_suites
from harness.models.zoo import ResolvedModel
from harness.units.run_units import generation_key
from harness.units.selection import sample_specs, select_items

DATA = Path(__file__).parent.parent / "data" / "configs"
MODEL = ResolvedModel(name="m", source="tiny", path=Path("/nonexistent"), content_key="k")


def _keys(config_path: Path) -> dict[str, str]:
    config, suites = load_run_config_and_suites(config_path)
    items = select_items(config, suites)
    specs = sample_specs(config, "m", items, "")
    return {p.name: generation_key(config, MODEL, p, specs, items) for p in config.policies}


def test_generation_units_are_keyed_by_the_reminder_the_samples_get(tmp_path):
    # a missing reminder falls back to the system prompt: the unit is the one of an item whose
    # reminder is its system prompt written out, and another reminder text is another unit
    suite = yaml.safe_load((DATA / "mini-suite.yaml").read_text())
    (tmp_path / "run.yaml").write_text((DATA / "tiny-run.yaml").read_text())

    def keys(edit) -> dict[str, str]:
        edited = yaml.safe_load(yaml.safe_dump(suite))
        for item in edited["items"]:
            edit(item)
        (tmp_path / "mini-suite.yaml").write_text(yaml.safe_dump(edited))
        return _keys(tmp_path / "run.yaml")

    written = keys(lambda item: item.update(reminder=item["system"]))
    assert keys(lambda item: item.pop("reminder")) == written
    assert len(set(written.values())) == 4  # one unit per policy
    other = keys(lambda item: item.update(reminder="Remember the rule."))
    assert all(other[name] != written[name] for name in written)


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
