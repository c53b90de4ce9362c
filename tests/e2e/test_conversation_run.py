"""`harness run` on conversations as a user runs it: turns.csv holds every turn of every
sample, windows never span a user turn; on the embedded model with tasks/conversations.yaml
(scripted, pressure and simulated users) the report's Conversations section renders in
headless Chromium. (A run killed mid-way, its
conversation units included, resumes to the same files: tests/unit/test_resume.py with a
scripted engine, tests/e2e/test_run_pipeline.py with SIGKILL.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

# whole runs (the module's fixtures count against its first test's limit)
pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(1800)]

ROOT = Path(__file__).parents[2]
CONFIGS = ROOT / "tests" / "data" / "configs"
CHROMIUM = Path("/usr/bin/chromium")


def _cmd(config: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "harness", "run", str(config), "--out", str(out)]


def _run(config: Path, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run(_cmd(config, out), capture_output=True, text=True, timeout=1800)


@pytest.fixture(scope="module")
def talk(tmp_path_factory, tiny_model_path) -> Path:
    out = tmp_path_factory.mktemp("talk") / "whole"
    done = _run(CONFIGS / "tiny-talk.yaml", out)
    assert done.returncode == 0, done.stderr[-2000:]
    return out


def _records(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "generations.jsonl").open()]


def test_turns_csv_has_every_turn_of_every_sample(talk):
    records = _records(talk)
    # 2 items x 3 conversation policies x 2 samples; `policies` has no single-reply item
    assert len(records) == 12
    assert {r["policy"] for r in records} == {
        "none",
        "periodic-turns2-system",
        "adaptive-turn-user",
    }
    turns = pd.read_csv(talk / "turns.csv")
    for r in records:
        replies = sorted({s["turn"] for s in r["segments"] if s["kind"] == "generated"})
        assert replies == [1, 2, 3, 4], (r["item"], r["policy"])  # 1 + 3 scripted, 1 + 1 + 2
        mine = turns[(turns.item == r["item"]) & (turns.policy == r["policy"])]
        assert sorted(set(mine[mine["sample"] == r["sample"]].turn)) == [1, 2, 3, 4]
        sim = [s for s in r["segments"] if s["source"] == "simulator"]
        assert len(sim) == (2 if r["item"] == "talk-sim" else 0)
    pressure = turns[turns.pressure]
    assert set(pressure.item) == {"talk-fr"} and set(pressure.turn) == {3}
    # windows stay inside one reply: [t_start, t_end] within one turn's positions
    windows = pd.read_csv(talk / "windows.csv")
    spans = turns.groupby(["item", "policy", "sample", "turn"])[["t_start", "t_end"]].first()
    for w in windows[windows.window >= 0].itertuples():
        inside = spans.loc[(w.item, w.policy, w.sample)]
        assert ((inside.t_start <= w.t_start) & (w.t_end <= inside.t_end)).any(), w
    curve = pd.read_csv(talk / "turn_adherence.csv")
    # a turn where no reply got a verdict keeps its row, with a = NaN and n = 0 (not a 0)
    decided = curve[curve["n"] > 0]
    assert decided.a.between(0, 1).all() and curve[curve["n"] == 0].a.isna().all()
    assert set(curve.turn) <= {1, 2, 3, 4}
    # the regex check decides every reply; the language check needs 8 letters, so a turn
    # where no sample had enough is left out of a(k)
    assert len(curve[curve.item == "talk-sim"]) == 3 * 4
    summary = pd.read_csv(talk / "conversations.csv")
    pooled = summary[summary["item"] == "all"]
    assert set(pooled.policy) == {"none", "periodic-turns2-system", "adaptive-turn-user"}
    none = summary[(summary["item"] != "all") & (summary.policy == "none")]
    assert (none.token_overhead == 0).all()
    div = pd.read_csv(talk / "divergence.csv")
    assert {"turn", "role"} <= set(div.columns) and {"user", "markup"} <= set(div.role)
    fits = pd.read_csv(talk / "fits.csv")
    assert "rel_l2@assistant" in set(fits.metric)
    # the next-token influence at each reply's first token: the probe's KL at that t
    influence = pd.read_csv(talk / "turn_influence.csv")
    nexttoken = pd.read_csv(talk / "nexttoken.csv")
    for r in influence.itertuples():
        at = nexttoken[(nexttoken.model == r.model) & (nexttoken.pair == r.pair)]
        assert at.set_index("t").loc[r.t, "kl"] == r.kl and r.kl_low == r.kl_high == r.kl
    probed = influence.groupby(["model", "pair"]).turn.apply(sorted)
    assert len(probed) > 0 and all(turns == [1, 2, 3, 4] for turns in probed)
    report = (talk / "report.html").read_text()
    assert 'id="conversations"' in report and "fig-turn-influence" in report


EMBEDDED = {
    "name": "conversations-e2e",
    "models": ["smollm2-135m-instruct"],
    "suites": [str(ROOT / "tasks" / "conversations.yaml")],
    # the smallest run that holds every kind of user turn: conv-it-museum's simulated user,
    # conv-persona-ada's pressure turn (and its persona check); tokens per turn kept short
    "items": ["conv-it-museum", "conv-persona-ada"],
    "policies": ["none", {"name": "periodic", "every_turns": 2, "placement": "system"},
                 {"name": "adaptive", "on": "turn", "placement": "user"}],
    "samples": 2,
    "generation": {"max_tokens": 128, "turn_tokens": 16, "max_model_len": 2048},
    "scoring": {"window": 16},
    "probe": {"samples": 1},
}  # fmt: skip


def test_embedded_model_conversations_and_the_report_in_chromium(tmp_path, embedded_model_path):
    config = tmp_path / "talk.yaml"
    config.write_text(yaml.safe_dump(EMBEDDED))
    out = tmp_path / "run"
    done = _run(config, out)
    assert done.returncode == 0, done.stderr[-2000:]
    records = _records(out)
    turns = pd.read_csv(out / "turns.csv")
    scored = turns.groupby(["item", "policy", "sample"]).turn.nunique()
    for r in records:  # every reply of every sample is in turns.csv
        replies = {s["turn"] for s in r["segments"] if s["kind"] == "generated"}
        assert scored[(r["item"], r["policy"], r["sample"])] == len(replies)
        # 6 turns x 16 tokens stay within max_tokens: every conversation runs to its end
        assert len(replies) == {"conv-persona-ada": 5}.get(r["item"], 6)
    assert any(s["source"] == "simulator" for r in records for s in r["segments"])
    assert turns.pressure.any()
    if not CHROMIUM.exists():
        pytest.skip("Debian's chromium is not installed at /usr/bin/chromium")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=str(CHROMIUM), args=["--headless", "--no-sandbox", "--disable-gpu"]
        )
        try:
            page = browser.new_page(viewport={"width": 1300, "height": 900})
            errors = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto((out / "report.html").as_uri())
            page.wait_for_function(
                "document.querySelectorAll('#conversations .plotly').length >= 3"
            )
            section = page.inner_text("#conversations")
            assert "Pressure turns" in section and "Distance where each reply starts" in section
            assert page.locator("#conversations .plotly .scatterlayer .trace").count() > 10
            assert page.locator(".chat-user").count() > 0  # the viewer shows turns as a chat
            assert page.locator(".chat-assistant").count() > 0
            assert errors == []
        finally:
            browser.close()
