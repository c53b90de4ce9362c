"""A sequential run through the real stages (`harness.pipeline.run_sequential`) on a scripted
engine and a one-token-per-character tokenizer (harness.engines.scripted: no model, each sample
complies with its item's known pass rate): it stops early on a clear condition and keeps
sampling a close one, generates each sample once, resumes after a kill with the same result,
and refuses bad input before writing anything."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from harness.engines.scripted import ScriptedEngine
from harness.pipeline import run_sequential
from harness.report.terminal import sampling_line
from tests.scripted_run import scripted_run

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
            {"metric": "auc", "policy": "none", "min": 0.5, "items": ["clear"]},
            {"metric": "auc", "policy": "none", "min": 0.75, "items": ["close"]},
        ],
        **changes,
    }
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


class Killed(BaseException):
    """What SIGKILL would do mid-call: nothing after it runs."""


class Counted(ScriptedEngine):
    """The scripted engine, raising `Killed` at its `kill_at`-th generate call."""

    def __init__(self, kill_at: int | None = None) -> None:
        super().__init__(RATES)
        self.kill_at, self.calls = kill_at, 0

    def generate(self, requests):
        self.calls += 1
        if self.calls == self.kill_at:
            raise Killed
        return super().generate(requests)


@pytest.fixture
def scripted(tmp_path):
    """run(out, engine) -> out: the sequential driver over every stage, with `engine` as every
    engine the harness makes and a model that needs no folder (tests/scripted_run.py)."""
    path = _config(tmp_path)

    def run(out: Path, engine: ScriptedEngine) -> Path:
        with scripted_run(path, out, engine) as ctx:
            run_sequential(ctx, show_progress=False)
        return out

    return run


def _samples(out: Path) -> dict:
    rows = [json.loads(line) for line in (out / "generations.jsonl").read_text().splitlines()]
    taken: dict = {}
    for row in rows:
        taken.setdefault((row["item"], row["policy"]), []).append(row["sample"])
    return taken


def test_a_run_stops_early_on_a_clear_condition_and_samples_on_a_close_one(tmp_path, scripted):
    engine = Counted()
    out = scripted(tmp_path / "run", engine)

    manifest = json.loads((out / "manifest.json").read_text())["sequential"]
    stopped = {
        (c["item"], c["policy"]): (c["samples"], c["stopped"]) for c in manifest["conditions"]
    }
    clear, close = stopped[("clear", "none")], stopped[("close", "none")]
    assert clear[1] == "decided" and clear[0] <= 8
    assert close == (16, "max reached")
    # restate is gated by nothing: it keeps its first 4 samples
    assert stopped[("clear", "restate")] == stopped[("close", "restate")] == (4, "not gated")
    assert manifest["looks"] == [4, 5, 7, 9, 11, 15, 16] and manifest["rule"] == "x1.3 per look"

    taken = _samples(out)
    assert {key: sorted(s) for key, s in taken.items()} == {
        key: list(range(n)) for key, (n, _) in stopped.items()
    }
    # every sample generated once: the looks reuse the earlier batches from the cache
    assert engine.generated == MAX_TOKENS * sum(n for n, _ in stopped.values())
    gates = (out / "gates.csv").read_text()
    assert "verdict" in gates.splitlines()[0] and ",close,tiny-random-llama," in gates
    assert sampling_line(out) == (
        "Sampled until decided (looks at 4, 5, 7, 9, 11, 15, 16 samples): "
        f"1 decided at {clear[0]}; 1 still undecided at max 16; 2 not gated (kept 4)"
    )
    report = (out / "report.html").read_text()  # the gates section shows how it sampled
    assert sampling_line(out) in report and "(x1.3 per look)." in report
    assert "<td>close</td><td>none</td><td>16</td><td>max reached</td>" in report


def test_a_killed_sequential_run_resumes_with_the_same_result(tmp_path, scripted):
    whole = Counted()
    scripted(tmp_path / "whole", whole)
    # the third look's batch is killed: the first two are stored (4 conditions x 4 samples,
    # then one more sample, 4 -> 5, of each of the two gated conditions)
    with pytest.raises(Killed):
        scripted(tmp_path / "killed", Counted(kill_at=3))
    again = Counted()
    out = scripted(tmp_path / "killed", again)

    def sequential(folder: Path) -> dict:
        return json.loads((folder / "manifest.json").read_text())["sequential"]

    assert sequential(out) == sequential(tmp_path / "whole")
    for name in ("generations.jsonl", "windows.csv", "summary.csv", "gates.csv"):
        assert (out / name).read_bytes() == (tmp_path / "whole" / name).read_bytes(), name
    assert again.generated == whole.generated - MAX_TOKENS * (16 + 2)


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
