"""A sequential run end to end through the real stages, on a scripted engine (no model: each
sample complies with its item's known pass rate, harness.engines.scripted): it stops early on
a clear condition and keeps sampling a close one, generates only what it lacks, resumes after
a kill with the same result, and refuses bad input before writing anything."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

import harness.engines
import harness.stages.generate
from harness.engines.scripted import ScriptedEngine
from harness.pipeline import run_pipeline

RATES = {"(clear)": 0.99, "(close)": 0.8}
SUITE = {
    "suite": "scripted",
    "items": [
        {
            "id": name,
            "system": "Say yes.",
            "user": f"Answer {marker}.",
            "restatement": "Yes:",
            "checks": [{"type": "regex_must_not", "pattern": r"\bno\b"}],
        }
        for name, marker in (("clear", "(clear)"), ("close", "(close)"))
    ],
}
MAX_TOKENS = 16


def _config(tmp_path: Path, **changes) -> Path:
    (tmp_path / "suite.yaml").write_text(yaml.safe_dump(SUITE))
    config = {
        "name": "scripted",
        "models": ["tiny-random-llama"],
        "suites": [str(tmp_path / "suite.yaml")],
        "policies": ["none", "restate"],
        "samples": {"min": 4, "max": 16},
        "generation": {"engine": "hf", "max_tokens": MAX_TOKENS},
        "scoring": {"window": 4},
        "probe": {"enabled": False},
        # clear (p 0.99) clears 0.5 soon; close (p 0.8) straddles 0.75 for long
        "gates": [
            {"metric": "auc", "policy": "none", "min": 0.5, "use": "ci_low", "items": ["clear"]},
            {"metric": "auc", "policy": "none", "min": 0.75, "use": "ci_low", "items": ["close"]},
        ],
        **changes,
    }
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


class Killed(RuntimeError):
    pass


@pytest.fixture
def engine(monkeypatch):
    """Puts a scripted engine in place of the generation engine; `engine(kill_at=k)` makes
    its k-th generate call raise (a run killed mid-way)."""
    from transformers import AutoTokenizer

    from harness.models import resolve_model

    tokenizer = AutoTokenizer.from_pretrained(resolve_model("tiny-random-llama").path)

    def make(kill_at: int | None = None) -> ScriptedEngine:
        scripted = ScriptedEngine(tokenizer, RATES)
        calls = []
        generate = scripted.generate

        def counted(requests):
            calls.append(len(requests))
            if len(calls) == kill_at:
                raise Killed("killed")
            return generate(requests)

        scripted.generate = counted
        factory = lambda kind, path, **options: scripted  # noqa: E731
        monkeypatch.setattr(harness.engines, "make_engine", factory)
        monkeypatch.setattr(harness.stages.generate, "make_engine", factory)
        return scripted

    return make


def _samples(out: Path) -> dict:
    rows = [json.loads(line) for line in (out / "generations.jsonl").read_text().splitlines()]
    taken: dict = {}
    for row in rows:
        taken.setdefault((row["item"], row["policy"]), []).append(row["sample"])
    return taken


def test_a_run_stops_early_on_a_clear_condition_and_samples_on_a_close_one(tmp_path, engine):
    scripted = engine()
    out = run_pipeline(_config(tmp_path), out=tmp_path / "run", show_progress=False)

    manifest = json.loads((out / "manifest.json").read_text())["sequential"]
    stopped = {
        (c["item"], c["policy"]): (c["samples"], c["stopped"]) for c in manifest["conditions"]
    }
    clear, close = stopped[("clear", "none")], stopped[("close", "none")]
    assert clear[1] == "decided" and clear[0] <= 8
    assert close == (16, "max reached")
    # restate is gated by nothing: it keeps its first 4 samples
    assert stopped[("clear", "restate")] == stopped[("close", "restate")] == (4, "not gated")
    assert manifest["looks"][:2] == [4, 8] and manifest["rule"] == "doubling"

    taken = _samples(out)
    assert {key: sorted(s) for key, s in taken.items()} == {
        key: list(range(n)) for key, (n, _) in stopped.items()
    }
    # every sample generated once: the looks reuse the earlier batches from the cache
    assert scripted.generated == MAX_TOKENS * sum(n for n, _ in stopped.values())
    gates = (out / "gates.csv").read_text()
    assert "clear,tiny-random-llama,ci_low" in gates and "verdict" in gates.splitlines()[0]


def test_a_killed_sequential_run_resumes_with_the_same_result(tmp_path, engine):
    config = _config(tmp_path)
    whole = engine()
    run_pipeline(config, out=tmp_path / "whole", show_progress=False)

    engine(kill_at=3)  # the third look's batch: the first two are stored
    with pytest.raises(Killed):
        run_pipeline(config, out=tmp_path / "killed", show_progress=False)
    again = engine()
    out = run_pipeline(config, out=tmp_path / "killed", show_progress=False)

    manifest = json.loads((out / "manifest.json").read_text())["sequential"]
    expected = json.loads((tmp_path / "whole" / "manifest.json").read_text())["sequential"]
    assert manifest == expected
    assert (out / "generations.jsonl").read_text() == (
        tmp_path / "whole" / "generations.jsonl"
    ).read_text()
    assert (out / "gates.csv").read_text() == (tmp_path / "whole" / "gates.csv").read_text()
    # what the first two looks generated (16 + 8 samples) came from the cache
    assert again.generated == whole.generated - MAX_TOKENS * (16 + 8)


@pytest.mark.parametrize(
    "samples, gates, argv, message",
    [
        ({"min": 8, "max": 4}, None, [], "field 'samples': min 8 is greater than max 4"),
        ({"min": 1, "max": 4}, None, [], "field 'samples': min: Input should be greater than"),
        ({"min": 4, "max": 8}, [], [], "samples: {min, max} samples until the gates decide"),
        (4, [], ["--until-decided"], "--until-decided: samples: {min, max} samples until"),
        (1, None, ["--until-decided"], "--until-decided: samples 1 is below 2"),
        (8, None, ["--until-decided", "--max-samples", "4"], "samples 8 is more than"),
        (8, None, ["--max-samples", "16"], "--max-samples needs --until-decided"),
    ],
)
def test_bad_sequential_input_is_one_line_and_exit_2_with_nothing_written(
    tmp_path, monkeypatch, run_cli, samples, gates, argv, message
):
    extra = {"samples": samples} | ({"gates": gates} if gates is not None else {})
    config = _config(tmp_path, **extra)
    monkeypatch.chdir(tmp_path)
    code, stdout, stderr = run_cli(["run", str(config), "--out", "run", *argv])
    assert code == 2 and stdout == ""
    assert stderr.startswith("error: ") and stderr.count("\n") == 1 and message in stderr, stderr
    assert not (tmp_path / "run").exists() and not (tmp_path / "reports").exists()
