"""Every config the repository ships parses and points at real task items."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.config import load_run_config, policy_label

ROOT = Path(__file__).resolve().parents[2]
RUN_CONFIGS = ["quickstart.yaml", "policies.yaml", "gpu-example.yaml"]


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
    assert config.samples == 4 and config.generation.max_tokens == 512
    prefixes = {item.split("-")[0] for item in config.items or []}
    assert prefixes == {"lang", "fmt", "persona"}


def test_paper_pairs_load():
    from harness.probes.pairs import load_pairs

    pairs = load_pairs(ROOT / "configs" / "paper.yaml")
    assert len(pairs) >= 10 and len({p.name for p in pairs}) == len(pairs)
