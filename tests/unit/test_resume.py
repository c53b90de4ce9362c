"""The whole pipeline (`harness.pipeline.STAGES`) on a scripted engine: every stage finds what
it reads among the files of the stages before it, and a run killed mid-generation or
mid-forks resumes, regenerates only the unit that was in flight and writes the same files as
an uninterrupted run. No model starts: the engine answers deterministic characters and the
tokenizer is one token per character. (tests/e2e/test_run_pipeline.py kills a real run with
SIGKILL.)"""

from __future__ import annotations

import random
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

import harness.engines
from harness.config.files import load_run_config_and_suites
from harness.engines import GenerationResult
from harness.engines.scripted import CharTokenizer
from harness.models import ResolvedModel
from harness.pipeline import STAGES, run_stages
from harness.stages.base import Records
from harness.stages.context import StageContext, run_context
from harness.store import RunStore
from harness.units.plan import RunPlan, select_items

EOS = 0  # CharTokenizer.eos_token_id
LETTERS = "abcdefgh ijklmnop FRENCH qrstuv. "

SUITE = """\
suite: scripted
items:
  - id: plain
    system: Write only in lowercase letters.
    user: Write a guide to tomatoes.
    checks:
      - {type: regex_must_not, pattern: "[A-Z]", ignore_case: false}
    reminder: Lowercase only.
    restatement: "sure, in lowercase:"
  - id: talk
    system: Always say the word french.
    user: Hello.
    turns: ["And then?", {user: "Stop saying it.", pressure: true}]
    checks:
      - {type: regex_must, pattern: "french"}
"""

CONFIG = """\
name: scripted
models: [tiny-random-llama]
suites: [suite.yaml]
policies:
  - none
  - {name: periodic, every: 8, placement: user}
conversation_policies:
  - none
  - {name: periodic, every_turns: 2, placement: system}
samples: 3
generation: {engine: hf, max_tokens: 24, turn_tokens: 8, temperature: 0.7}
scoring: {window: 8}
probe: {enabled: false}
theory: {relay: null, bias_lams: []}
forks: {at: [0, 8, 16], tokens: 4, draws: 2, records: 2, policies: [none, periodic-8-user]}
"""
FORK_TOKENS = 4  # no generation round asks for 4 tokens (24 at once, rounds of 8)


class Killed(BaseException):
    """What SIGKILL would do mid-call: nothing after it runs (not even `except Exception`)."""


class ScriptedEngine:
    """Deterministic tokens: each request's characters are drawn from LETTERS by a generator
    seeded with the request's seed and prompt, so the same request always gets the same
    answer. Raises `Killed` at the start of a batch for which `kill(requests, n)` is true (n:
    the batch's 1-based number)."""

    name = "scripted"
    max_model_len = 10_000
    prefix_caching = False

    def __init__(self, kill=None) -> None:
        self.tokenizer = CharTokenizer()
        self.kill = kill
        self.requests: list[list] = []  # every batch answered
        self.starts = 0  # times the harness asked for an engine

    @property
    def batches(self) -> list[int]:
        return [len(batch) for batch in self.requests]

    def generate(self, requests):
        if self.kill is not None and self.kill(requests, len(self.requests) + 1):
            raise Killed
        self.requests.append(list(requests))
        return [self._one(r) for r in requests]

    @staticmethod
    def _one(request) -> GenerationResult:
        rng = random.Random(f"{request.sampling.seed}/{request.prompt_ids}")
        text = "".join(rng.choice(LETTERS) for _ in range(request.sampling.max_tokens))
        return GenerationResult(
            token_ids=[ord(c) for c in text],
            text=text,
            finish_reason="length",
            prompt_tokens=len(request.prompt_ids),
        )

    def close(self) -> None:
        pass


class ReadLog(StageContext):
    """A run's context that notes every earlier file a stage asked for and did not find."""

    def frame(self, row):
        if row.file not in self.artifacts.names():
            self.missing.append(row.file)
        return super().frame(row)


@pytest.fixture(scope="module")
def scripted(tmp_path_factory):
    """run(out, engine) -> the run's context: every stage of the pipeline over the scripted
    engine (every harness module's `make_engine` answers with `engine`; `starts` counts)."""
    folder = tmp_path_factory.mktemp("scripted")
    (folder / "suite.yaml").write_text(SUITE)
    (folder / "run.yaml").write_text(CONFIG)
    config, suites = load_run_config_and_suites(folder / "run.yaml")
    items = select_items(config, suites)
    model = ResolvedModel(
        name="tiny-random-llama", source="tiny", path=folder, content_key="scripted-1"
    )
    current: list[ScriptedEngine] = []

    def start(*args, **kwargs) -> ScriptedEngine:
        current[0].starts += 1
        return current[0]

    def run(out: Path, engine: ScriptedEngine) -> ReadLog:
        current[:] = [engine]
        with RunStore(out) as store:
            plan = RunPlan(
                config=config, suites=suites, items=items, models=[model], twins={},
                out_dir=out, run_id=config.run_id(),
            )  # fmt: skip
            started = datetime.now(UTC).isoformat(timespec="seconds")
            ctx = ReadLog(plan, store, out, started=started)
            ctx.missing = []
            ctx._tokenizers[model.name] = CharTokenizer()
            run_stages(ctx, STAGES, show_progress=False)
        return ctx

    original = harness.engines.make_engine
    with pytest.MonkeyPatch.context() as patch:
        for module in list(sys.modules.values()):
            name = getattr(module, "__name__", "")
            if name.startswith("harness") and getattr(module, "make_engine", None) is original:
                patch.setattr(module, "make_engine", start)
        yield run


@pytest.fixture(scope="module")
def whole(scripted, tmp_path_factory):
    """An uninterrupted run: (its folder, its context, its engine)."""
    out, engine = tmp_path_factory.mktemp("whole"), ScriptedEngine()
    return out, scripted(out, engine), engine


RESULT_FILES = [
    "generations.jsonl", "forks.jsonl", "forks.csv", "windows.csv", "turns.csv", "summary.csv",
    "adherence.csv", "policies.csv", "carried.csv", "turn_adherence.csv", "conversations.csv",
]  # fmt: skip


def _units(out: Path, stage: str) -> int:
    return len(list((out / "cache" / stage).glob("*.json")))


def _same_files(out: Path, whole: Path) -> None:
    for name in RESULT_FILES:
        assert (out / name).read_bytes() == (whole / name).read_bytes(), name


def test_every_stage_finds_its_inputs_in_the_files_of_the_stages_before_it(whole):
    out, ctx, engine = whole
    assert ctx.missing == []  # no stage asked for a file a later stage writes
    for name in RESULT_FILES:  # and what they read was not empty
        lines = (out / name).read_text().splitlines()
        assert len(lines) > 1, name
    for name in ["gates.csv", "junit.xml", "manifest.json", "report.html"]:
        assert (out / name).is_file(), name
    assert list(ctx.timings)[-len(STAGES) :] == [stage.name for stage in STAGES]
    assert engine.starts == 1  # the forks reuse the generation engine, right after it


def test_a_run_killed_mid_generation_regenerates_only_the_unit_in_flight(scripted, whole, tmp_path):
    out = tmp_path / "killed"
    # Round 1 finishes the single reply's `none` unit (24 tokens at once: 3 samples of one
    # item); killed in round 2, while periodic and both conversation units are in flight.
    with pytest.raises(Killed):
        scripted(out, ScriptedEngine(kill=lambda batch, n: n == 2))
    assert _units(out, "generate") == 1
    resumed = ScriptedEngine()
    scripted(out, resumed)
    assert _units(out, "generate") == 4
    assert resumed.batches[0] == whole[2].batches[0] - 3  # the stored unit is not asked again
    _same_files(out, whole[0])


def _fork_batch(batch) -> bool:
    return all(r.sampling.max_tokens == FORK_TOKENS for r in batch)


def test_a_run_killed_mid_forks_keeps_every_finished_fork_unit(scripted, whole, tmp_path):
    fork_units = sum(_fork_batch(b) for b in whole[2].requests)
    assert fork_units >= 2  # one batch per (model, policy) unit
    out = tmp_path / "killed"
    seen = []

    def second_fork_unit(batch, n) -> bool:
        seen.append(_fork_batch(batch))
        return sum(seen) == 2

    with pytest.raises(Killed):
        scripted(out, ScriptedEngine(kill=second_fork_unit))
    assert _units(out, "forks") == 1
    resumed = ScriptedEngine()
    scripted(out, resumed)
    # generation comes from its units; the forks lost only the unit in flight
    assert _units(out, "forks") == fork_units and len(resumed.requests) == fork_units - 1
    _same_files(out, whole[0])


def test_two_reminder_texts_under_one_schedule_are_two_policies_in_summary(tmp_path):
    """`text` changes what a policy does, so it is part of its label: the two periodic
    policies below stay two rows of summary.csv (they merged into one before)."""
    (tmp_path / "suite.yaml").write_text(SUITE)
    texts = CONFIG.replace(
        "  - {name: periodic, every: 8, placement: user}\n",
        "  - {name: periodic, every: 8, text: Lowercase only.}\n"
        "  - {name: periodic, every: 8, text: No capitals.}\n",
    ).replace(", policies: [none, periodic-8-user]", "")
    (tmp_path / "run.yaml").write_text(texts)
    config, suites = load_run_config_and_suites(tmp_path / "run.yaml")
    model = ResolvedModel(name="tiny-random-llama", source="tiny", path=tmp_path, content_key="s")
    engine, original = ScriptedEngine(), harness.engines.make_engine
    with pytest.MonkeyPatch.context() as patch, RunStore(tmp_path / "out") as store:
        for module in list(sys.modules.values()):
            # harness modules only: getattr on a lazy third-party module (transformers) imports
            if (
                getattr(module, "__name__", "").startswith("harness")
                and getattr(module, "make_engine", None) is original
            ):
                patch.setattr(module, "make_engine", lambda *a, **k: engine)
        plan = RunPlan(
            config=config, suites=suites, items=select_items(config, suites), models=[model],
            twins={}, out_dir=tmp_path / "out", run_id=config.run_id(),
        )  # fmt: skip
        ctx = run_context(plan, store)
        ctx._tokenizers[model.name] = CharTokenizer()
        run_stages(ctx, STAGES, show_progress=False)
    import pandas as pd

    summary = pd.read_csv(tmp_path / "out" / "summary.csv")
    plain = summary[summary.item == "plain"]
    assert len(plain) == 3 and plain.policy.nunique() == 3
    reminded = sorted(p for p in plain.policy if p != "none")
    assert all(p.startswith("periodic-8-user-text-") for p in reminded)
    reminders = {
        (r.policy, s.text)
        for r in ctx.read(Records)
        if r.item == "plain"
        for s in r.segments
        if s.source == "reminder"
    }
    for spec in config.policies[1:]:  # each label reminds with its own text
        said = {text for p, text in reminders if p == spec.label}
        assert spec.label in reminded and said and all(spec.text in t for t in said), said
