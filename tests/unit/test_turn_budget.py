"""No silent truncation: a conversation whose replies cannot all get `turn_tokens` within
`max_tokens` (the conversation's total budget) is refused before the run, in one line naming
the item and the fix, exit code 2, nothing written; one whose replies fit runs as before."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from harness.config.files import load_run_config_and_suites
from harness.errors import UserError
from harness.units.plan_checks import check_turn_budget
from harness.units.selection import select_items

CONFIGS = Path(__file__).parent.parent.parent / "configs"
SUITE = {
    "suite": "talk",
    "description": "one 5-turn conversation",
    "items": [
        {
            "id": "talk-de",
            "system": "Antworte immer auf Deutsch.",
            "user": "Hallo!",
            "turns": ["Wie geht es?", "Und dann?", {"user": "English please.", "pressure": True},
                      "Danke."],
            "checks": [{"type": "language", "target": "de"}],
        },
        {"id": "single", "system": "Be brief.", "user": "Hi.",
         "checks": [{"type": "language", "target": "en"}]},
    ],
}  # fmt: skip


def _config(tmp_path: Path, max_tokens: int, turn_tokens: int, **extra) -> Path:
    (tmp_path / "talk.yaml").write_text(yaml.safe_dump(SUITE))
    config = {
        "name": "talk",
        "models": ["tiny-random-llama"],
        "suites": ["talk.yaml"],
        "policies": ["none"],
        "conversation_policies": ["none"],
        "samples": 1,
        "generation": {"engine": "hf", "max_tokens": max_tokens, "turn_tokens": turn_tokens},
        "scoring": {"window": min(16, max_tokens)},
        **extra,
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_five_replies_of_64_in_192_are_refused_before_the_run(tmp_path, run_cli):
    path = _config(tmp_path, max_tokens=192, turn_tokens=64)
    out = tmp_path / "out"
    code, stdout, stderr = run_cli(["run", str(path), "--out", str(out)])
    assert code == 2 and stdout == ""
    assert stderr == (
        f"error: {path}: item 'talk-de': 5 replies x generation.turn_tokens 64 = 320 tokens "
        "exceed generation.max_tokens 192, so its last replies would be cut short or never "
        "run: raise max_tokens to 320 or lower turn_tokens to 38\n"
    )
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == [
        "config.yaml", "talk.yaml"
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("max_tokens", "turn_tokens", "fits"),
    [(320, 64, True), (319, 64, False), (190, 38, True), (4, 1, False)],
)
def test_the_rule_is_replies_times_turn_tokens_within_max_tokens(
    tmp_path, max_tokens, turn_tokens, fits
):
    config, suites = load_run_config_and_suites(_config(tmp_path, max_tokens, turn_tokens))
    items = select_items(config, suites)
    if fits:
        check_turn_budget(config, items)
        return
    with pytest.raises(UserError, match="item 'talk-de': 5 replies") as info:
        check_turn_budget(config, items)
    # below one token per reply only a larger max_tokens fits
    assert ("lower turn_tokens" in str(info.value)) == (max_tokens >= 5)


def test_an_item_outside_the_run_is_not_checked(tmp_path):
    config, suites = load_run_config_and_suites(_config(tmp_path, 64, 32, items=["single"]))
    check_turn_budget(config, select_items(config, suites))


@pytest.mark.parametrize(
    "name", ["quickstart.yaml", "policies.yaml", "gpu-example.yaml", "judge-calibration.yaml"]
)
def test_the_shipped_run_configs_keep_their_meaning(name, monkeypatch):
    # the quickstart: 6 turns x 80 = 480 <= 480; every shipped run config passes unchanged
    monkeypatch.chdir(CONFIGS.parent)
    config, suites = load_run_config_and_suites(CONFIGS / name)
    check_turn_budget(config, select_items(config, suites))
