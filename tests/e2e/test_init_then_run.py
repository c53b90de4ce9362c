"""The before-deployment workflow as a new user runs it: `harness init` from a prompt file,
then `harness run` of the written config (shortened so the test stays quick: fewer samples and
tokens, the rest as written), with its gate verdict, junit.xml and the two conversations in
turns.csv. English on the embedded model; German and French (the language check the prompt
asks for, the requests in that language) on the tiny test model, probe off."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pandas as pd
import pytest
import yaml

# whole runs (the module's fixtures count against its first test's limit)
pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(1500)]


def _harness(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "harness", *argv]
    return subprocess.run(command, capture_output=True, text=True, timeout=1500, cwd=cwd)


@pytest.fixture
def init_here(tmp_path, monkeypatch, run_cli):
    """`harness init ARGV...` in tmp_path, in this process through the real entry point (a
    subprocess would add ~4 s of start-up to each test); returns (exit code, stderr)."""
    monkeypatch.chdir(tmp_path)

    def init(*argv: str) -> tuple[int, str]:
        code, _, err = run_cli(["init", *argv])
        return code, err

    return init


def _init_and_run(
    tmp_path: Path, init_here, prompt: str, generation: dict, *model: str, probe: bool = True
) -> dict:
    """init from a prompt file, shorten the written config (1 sample, `generation`; the probe
    off unless `probe`), run it; returns the written config and suite and the run's files."""
    (tmp_path / "prompt.txt").write_text(prompt, encoding="utf-8")
    code, err = init_here("acme", "--system", "@prompt.txt", *model)
    assert code == 0, err
    config = yaml.safe_load((tmp_path / "acme.yaml").read_text())
    suite = yaml.safe_load((tmp_path / "acme.suite.yaml").read_text(encoding="utf-8"))
    config.update(samples=1, generation={**config["generation"], **generation})
    if not probe:
        config["probe"] = {**config["probe"], "enabled": False}
    if config["scoring"]["window"] > config["generation"]["max_tokens"]:
        config["scoring"]["window"] = config["generation"]["turn_tokens"]
    (tmp_path / "acme.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    done = _harness("run", "acme.yaml", "--out", "run", cwd=tmp_path)
    assert done.returncode in (0, 1), done.stderr[-2000:]  # 1: a gate failed, as reported
    return {"config": config, "suite": suite, "done": done, "run": tmp_path / "run"}


def _check_run(result: dict, language: str) -> None:
    config, suite, run = result["config"], result["suite"], result["run"]
    items = suite["items"]
    languages = {c["target"] for item in items for c in item["checks"] if c["type"] == "language"}
    assert languages == {language}
    talks = [item["id"] for item in items if "turns" in item]
    assert len(talks) == 2 and all(len(i["turns"]) == 4 for i in items if "turns" in i)
    assert [t.get("pressure") for t in items[5]["turns"] if isinstance(t, dict)] == [True]
    records = [line for line in (run / "generations.jsonl").read_text().splitlines() if line]
    singles = len(items) - len(talks)
    assert len(records) == singles * len(config["policies"]) + 2 * len(
        config["conversation_policies"]
    )
    turns = pd.read_csv(run / "turns.csv")
    assert set(turns["item"]) == set(talks)  # turns.csv: the conversations' replies only
    assert f"language:{language}" in set(turns["check"])
    for item in talks:  # every policy's conversation has rows, from turn 1 on
        rows = turns[turns["item"] == item]
        assert set(rows["policy"]) == {
            "none", "periodic-turns2-system", "adaptive-turn-system"
        }  # fmt: skip
        assert rows["turn"].min() == 1 and rows["turn"].max() <= 5
    pressure = turns[turns["pressure"]]
    assert set(pressure["item"]) == {talks[1]} and set(pressure["turn"]) <= {3}
    gates = pd.read_csv(run / "gates.csv")
    assert len(gates) == len(items)  # the one gate, on every item
    assert result["done"].returncode == (1 if (~gates["passed"]).any() else 0)
    cases = ET.parse(run / "junit.xml").getroot().iter("testcase")
    assert len(list(cases)) == len(gates)
    assert (run / "report.html").is_file()


def test_init_then_run_on_the_embedded_model(tmp_path, init_here, embedded_model_path):
    prompt = "You are Ava, a support agent for Acme: answer in English, politely.\n"
    # 5 replies x 12 tokens fit max_tokens 64 (a conversation's total budget)
    # the probe is off: its written settings are validated by the plan before the first
    # token, and the probe has its own tests (on the embedded model it is most of this run)
    generation = {"max_tokens": 64, "turn_tokens": 12}
    result = _init_and_run(tmp_path, init_here, prompt, generation, probe=False)
    assert result["config"]["models"] == ["smollm2-135m-instruct"] and result["config"]["gates"]
    # a support agent: a service's customer questions; Ava kept as a persona
    assert [i["id"] for i in result["suite"]["items"]][4:] == ["conv-account", "conv-login"]
    checks = result["suite"]["items"][0]["checks"]
    assert [(c["type"], c["rule"]) for c in checks] == [
        ("language", "language-en"),
        ("persona", "persona-ava"),
    ]
    _check_run(result, "en")


@pytest.mark.parametrize(
    ("prompt", "language", "first"),
    [
        (
            "Du bist der Support-Assistent von Nordwind, einem Fahrradladen in Hamburg. "
            "Antworte immer auf Deutsch.\n",
            "de",
            "Ich bin Anfänger und brauche eine ausführliche Beratung zum Thema Fahrrad",
        ),
        (
            "Tu es l'assistant de Vélo Rapide, un magasin de vélos. Réponds toujours en "
            "français.\n",
            "fr",
            "Je débute et j'ai besoin de conseils détaillés en matière de vélos",
        ),
    ],
    ids=["de", "fr"],
)
def test_init_then_run_german_and_french_on_the_tiny_model(
    tmp_path, init_here, tiny_model_path, prompt, language, first
):
    generation = {"engine": "hf", "max_tokens": 40, "turn_tokens": 8, "temperature": 0}
    model = ("--model", "tiny-random-llama")
    result = _init_and_run(tmp_path, init_here, prompt, generation, *model, probe=False)
    assert result["suite"]["items"][0]["user"].startswith(first)
    _check_run(result, language)
