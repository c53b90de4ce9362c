"""`harness run` replaying two logged conversations (written here, in the OpenAI chat format) on
the embedded model with the `reference` and `own` histories, as a user runs it: turns.csv holds
the logged replies and both replays, row by row, and the report's replay comparison renders in
headless Chromium."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(1800)]

CHROMIUM = Path("/usr/bin/chromium")
SYSTEM = "Tu es l'assistant du support de Nordlys. Réponds toujours en français, poliment."
LOGS = [
    {"id": "ticket-17", "messages": [
        {"role": "system", "content": "You are a support assistant."},
        {"role": "user", "content": "Bonjour, ma commande n'est pas arrivée."},
        {"role": "assistant", "content": "Bonjour ! Je suis désolé pour ce retard. Pouvez-vous "
                                         "me donner votre numéro de commande ?"},
        {"role": "user", "content": "C'est le 4471. Vous pouvez vérifier ?"},
        {"role": "assistant", "content": "Sure, order 4471 left our warehouse on Monday and "
                                         "should arrive within two days."},
    ]},
    {"id": "ticket-<b>42</b>", "messages": [
        {"role": "user", "content": "Comment changer mon mot de passe ?"},
        {"role": "assistant", "content": "Allez dans Paramètres, puis Sécurité, et choisissez "
                                         "« Changer le mot de passe »."},
        {"role": "user", "content": "Je ne trouve pas Sécurité."},
        {"role": "assistant", "content": "It is at the bottom of the Settings page, below "
                                         "Notifications."},
        {"role": "user", "content": "Merci, c'est bon."},
        {"role": "assistant", "content": "Avec plaisir, bonne journée !"},
    ]},
]  # fmt: skip
REPLIES = {"ticket-17": 2, "ticket-<b>42</b>": 3}


@pytest.fixture(scope="module")
def replay(tmp_path_factory, embedded_model_path) -> Path:
    root = tmp_path_factory.mktemp("replay")
    (root / "logs.jsonl").write_text(
        "".join(json.dumps(c, ensure_ascii=False) + "\n" for c in LOGS), encoding="utf-8"
    )
    item = {"id": "support-fr", "system": SYSTEM, "log": "logs.jsonl",
            "replay": ["reference", "own"],
            "checks": [{"type": "language", "target": "fr", "abstain_below": 10}]}  # fmt: skip
    (root / "suite.yaml").write_text(yaml.safe_dump({"suite": "replays", "items": [item]}))
    config = {
        "name": "replay-e2e",
        "models": ["smollm2-135m-instruct"],
        "suites": [str(root / "suite.yaml")],
        "policies": ["none"],
        "conversation_policies": ["none"],
        "samples": 2,
        "generation": {"max_tokens": 36, "turn_tokens": 12, "max_model_len": 1024},
        "scoring": {"window": 12, "languages": ["fr", "en"]},
        "probe": {"enabled": False},
    }
    (root / "run.yaml").write_text(yaml.safe_dump(config))
    out = root / "run"
    cmd = [sys.executable, "-m", "harness", "run", str(root / "run.yaml"), "--out", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-2000:]
    return out


def test_turns_csv_holds_the_logged_replies_and_both_replays(replay):
    turns = pd.read_csv(replay / "turns.csv", keep_default_na=False)
    assert set(turns["history"]) == {"logged", "reference", "own"}
    logged = turns[turns["history"] == "logged"]
    per_turn = logged.set_index(["conversation_id", "turn"])["passed"].to_dict()
    # the logged replies drift to English at turn 2 of both tickets
    assert per_turn == {("ticket-17", 1): True, ("ticket-17", 2): False,
                        ("ticket-<b>42</b>", 1): True, ("ticket-<b>42</b>", 2): False,
                        ("ticket-<b>42</b>", 3): True}  # fmt: skip
    for history in ("reference", "own"):
        mine = turns[(turns["history"] == history) & (turns["policy"] == "none")]
        for conv, replies in REPLIES.items():
            rows = mine[mine["conversation_id"] == conv]
            if history == "reference":  # one record per (turn, sample): 2 samples a turn
                assert rows.groupby("turn")["sample"].nunique().to_dict() == dict.fromkeys(
                    range(1, replies + 1), 2
                )
            else:  # one record per sample, every turn in it (unless the context ran out)
                assert rows["sample"].nunique() == 2 and set(rows["turn"]) <= set(
                    range(1, replies + 1)
                )
                assert 1 in set(rows["turn"])
    records = [json.loads(line) for line in (replay / "generations.jsonl").open()]
    reference = [r for r in records if r.get("history") == "reference"]
    last = [
        r
        for r in reference
        if r["conversation_id"] == "ticket-<b>42</b>"
        and any(s["kind"] == "generated" and s["turn"] == 3 for s in r["segments"])
    ]
    logged_texts = [s["text"] for s in last[0]["segments"] if s["kind"] == "logged"]
    replies = [m["content"] for m in LOGS[1]["messages"] if m["role"] == "assistant"]
    assert logged_texts == replies[:2]
    assert last[0]["prompt_messages"][0] == {"role": "system", "content": SYSTEM}
    curve = pd.read_csv(replay / "turn_adherence.csv")
    assert set(zip(curve["policy"], curve["history"], strict=True)) == {
        ("logged", "logged"), ("none", "reference"), ("none", "own")
    }  # fmt: skip
    ref = curve[curve["history"] == "reference"].set_index("turn")
    assert ref.loc[1, "n"] <= 4 and (ref["a_low"] <= ref["a"]).all()


def test_the_report_compares_the_histories_in_chromium(replay):
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
            page.goto((replay / "report.html").as_uri())
            page.wait_for_function(
                "document.querySelectorAll('#conversations .plotly').length >= 2"
            )
            section = page.inner_text("#conversations")
            assert "Replayed logs, turn by turn" in section and "Replies side by side" in section
            assert "reference history" in section and "own history" in section
            assert "ticket-<b>42</b>" in section  # escaped in the HTML, shown as text
            assert "order 4471 left our warehouse" in section  # the logged reply, side by side
            legend = page.inner_text("#fig-turn-adherence")
            assert "none (reference)" in legend and "none (own)" in legend
            assert page.locator(".chat-logged").count() > 0  # the viewer marks logged replies
            assert errors == []
        finally:
            browser.close()
