"""examples/plugin, installed as a user installs it (pip, entry points), adds a check, a policy
and an engine that a config uses through `harness run`, with no file of harness/ changed; and
without it installed, the same config is refused in one line that names what is unknown."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

# a pip install and a whole run on the tiny model's tokenizer (no weights load)
pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "examples" / "plugin"


def _harness(folder: Path, *paths: Path) -> subprocess.CompletedProcess:
    # the tree under test first, then the plugin's install folder: entry points are read from
    # the dist-info pip wrote there, as from any site-packages
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(p) for p in (ROOT, *paths))}
    argv = [sys.executable, "-m", "harness", "run", "config.yaml", "--out", "run"]
    return subprocess.run(argv, capture_output=True, text=True, timeout=600, cwd=folder, env=env)


@pytest.fixture(scope="module")
def plugin_run(tmp_path_factory, tiny_model_path):
    """The plugin pip-installed into a folder of its own (the shared venv stays as it is), and
    its example config run with it, and without it."""
    target = tmp_path_factory.mktemp("site")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
         "--no-build-isolation", "--target", str(target), str(PLUGIN)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    assert list(target.glob("harness_example_plugin-*.dist-info/entry_points.txt"))
    folders = {}
    for name, paths in (("with", [target]), ("without", [])):
        folder = tmp_path_factory.mktemp(name)
        for file in ("config.yaml", "suite.yaml"):
            shutil.copy(PLUGIN / file, folder / file)
        folders[name] = (folder, _harness(folder, *paths))
    return folders


def test_the_installed_plugins_check_policy_and_engine_run_in_one_config(plugin_run):
    folder, done = plugin_run["with"]
    assert done.returncode == 0, done.stderr[-3000:]
    run = folder / "run"
    records = [json.loads(line) for line in (run / "generations.jsonl").read_text().splitlines()]
    assert {r["engine"] for r in records} == {"canned"}  # the plugin's engine served them all
    prefaced = [r for r in records if r["policy"].startswith("preface-")]
    assert len(prefaced) == 2  # samples: 2
    for record in prefaced:  # the plugin's policy started each reply with its text
        assert record["text"].startswith("Here is the story, told without numbers. The lighthouse")
    with (run / "windows.csv").open() as handle:
        rows = [row for row in csv.DictReader(handle) if row["check"] == "no_digits"]
    policies = {row["policy"] for row in rows}
    assert policies == {"none", prefaced[0]["policy"]}
    # the canned reply holds the digit 3 in every 16-token window: the plugin's check fails it
    assert rows and all(row["passed"] == "False" and "digit" in row["reason"] for row in rows)


def test_without_the_plugin_the_config_is_refused_in_one_line(plugin_run):
    folder, done = plugin_run["without"]
    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    assert "field 'policies.1': unknown policy: 'preface'" in line
    assert not (folder / "run").exists()
