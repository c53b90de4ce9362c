"""The report's Conversations section and chat viewer from a hand-made conversation run: its
figures and tables, escaped model and user text, and no such section for single replies."""

from __future__ import annotations

import html as html_lib
import json
import math
import re
from pathlib import Path

import pandas as pd

from harness.analysis.conversations import conversation_summary, turn_curves

HOSTILE = "<script>alert(1)</script>"
# sample -> pass per turn 1..4; turn 3 is a pressure turn
GRID = {0: [1, 1, 0, 0], 1: [1, 1, 1, 0], 2: [1, 0, 1, 1], 3: [1, 1, 1, 1]}


def _turns() -> pd.DataFrame:
    rows = [
        dict(model="m", task="talk", item="talk-fr", policy="none", seed=s, sample=s, turn=k,
             pressure=k == 3, check="language:fr", value=float(ok), passed=bool(ok))
        for s, passes in GRID.items() for k, ok in enumerate(passes, start=1)
    ]  # fmt: skip
    return pd.DataFrame(rows)


def _record() -> dict:
    # turn 1 reply (4 tokens), turn 2: markup, a boxed reminder, the user, markup, the reply
    segments = [
        dict(kind="generated", start=0, end=4, source="model", text="Bonjour " + HOSTILE, turn=1),
        dict(kind="markup", start=4, end=6, source="chat", text="<|im_start|>user\n", turn=2),
        dict(kind="injected", start=6, end=8, source="reminder", text="French only.", turn=2),
        dict(kind="user", start=8, end=10, source="simulator", text="Why? " + HOSTILE, turn=2),
        dict(kind="markup", start=10, end=12, source="chat", text="<|im_start|>", turn=2),
        dict(kind="generated", start=12, end=16, source="model", text="Parce que.", turn=2),
    ]
    return dict(model="m", task="talk", item="talk-fr", policy="none", seed=0, sample=0,
                prompt_messages=[{"role": "user", "content": "Hi"}], prompt_ids=[1],
                continuation_ids=list(range(16)), segments=segments, text="",
                finish_reason="stop", engine="x", tokens={"generated": 8})  # fmt: skip


def _divergence() -> pd.DataFrame:
    roles = ["assistant"] * 4 + ["markup"] * 2 + ["reminder"] * 2 + ["user"] * 2
    roles += ["markup"] * 2 + ["assistant"] * 4
    rows = [
        dict(model="m", item="talk-fr", policy="none", sample=0, pair="talk-fr/none/0",
             layer=layer, t=t, turn=1 if t <= 4 else 2, role=roles[t - 1],
             l2=1.0, rel_l2=0.5 / t if t != 13 else 0.25, cos_dist=0.1, below_floor=False)
        for layer in (0, 1, 2) for t in range(1, 17)
    ]  # fmt: skip
    return pd.DataFrame(rows)


def _run(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    turns = _turns()
    tokens = pd.DataFrame([dict(model="m", item="talk-fr", policy="none", seed=0, sample=0,
                                generated=100, injected=10, restated=0)])  # fmt: skip
    turns.to_csv(run / "turns.csv", index=False)
    turn_curves(turns).to_csv(run / "turn_adherence.csv", index=False)
    conversation_summary(turns, tokens).to_csv(run / "conversations.csv", index=False)
    _divergence().to_csv(run / "divergence.csv", index=False)
    (run / "generations.jsonl").write_text(json.dumps(_record()) + "\n")
    return run


def test_conversations_section_figures_tables_and_chat(tmp_path):
    from harness.report import render_report

    text = render_report(_run(tmp_path)).read_text(encoding="utf-8")
    assert '<a href="#conversations">Conversations</a>' in text
    data = json.loads(re.search(r'id="figure-data">(.*?)</script>', text, re.S).group(1))
    assert {"fig-turn-adherence", "fig-turn-survival", "fig-turn-divergence"} <= set(data)
    section = html_lib.unescape(re.search(r'id="conversations".*?</section>', text, re.S)[0])
    # pressure at turn 3: before 7/8 replies pass, from it on 5/8
    assert "adherence 87.5 % on the replies before the pressure turn, 62.5 % from it on" in section
    assert "10.0 %" in section  # reminder overhead 10 / 100
    # the reply of turn 2 starts at t = 13: mean rel_l2 over layers 1-2 there, and at t = 12
    row = re.search(r"<td>m</td><td>2</td><td>1</td><td>([^<]*)</td><td>([^<]*)</td>", section)
    assert row and float(row[1]) == 0.25 and math.isclose(float(row[2]), 0.5 / 12, rel_tol=1e-3)
    # the viewer: a chat with the simulated user's message and the reminder boxed, all escaped
    assert text.count('class="chat-assistant"') == 2 and 'title="simulated user"' in text
    assert '<span class="seg-injected"' in text and HOSTILE not in text
    assert html_lib.escape(HOSTILE, quote=False) in text


def test_single_reply_runs_have_no_conversations_section(tmp_path):
    from harness.report import render_report

    run = _run(tmp_path)
    for name in ("turns.csv", "turn_adherence.csv", "conversations.csv"):
        (run / name).unlink()
    text = render_report(run).read_text(encoding="utf-8")
    assert 'id="conversations"' not in text and "#conversations" not in text


def test_turn_influence_line_and_table_with_the_endpoints_bracket(tmp_path):
    from harness.report import render_report

    run = _run(tmp_path)
    rows = [
        dict(model="m", item="talk-fr", policy=HOSTILE, sample=s, pair=f"talk-fr/x/{s}", turn=k,
             t=1 + 12 * (k - 1), kl=0.4 / k + 0.1 * s, kl_low=0.4 / k + 0.1 * s,
             kl_high=0.8 / k + 0.1 * s, delta_logp=0.1, backend="openai")
        for s in (0, 1) for k in (1, 2)
    ]  # fmt: skip
    pd.DataFrame(rows).to_csv(run / "turn_influence.csv", index=False)
    text = render_report(run).read_text(encoding="utf-8")
    data = json.loads(re.search(r'id="figure-data">(.*?)</script>', text, re.S).group(1))
    assert "fig-turn-influence" in data
    section = html_lib.unescape(re.search(r'id="conversations".*?</section>', text, re.S)[0])
    assert "Influence where each reply starts" in section
    # turn 2: mean over the two conversations, the bracket beside it
    assert "<td>2</td><td>2</td><td>0.25</td><td>[0.25, 0.45]</td><td>openai</td>" in section
    assert HOSTILE not in text  # the policy label is escaped in the table and the legend


def test_an_endpoint_probe_says_why_the_divergence_is_absent(tmp_path):
    from harness.report import render_report

    run = _run(tmp_path)
    (run / "divergence.csv").write_text("model,item,policy,sample,pair,layer,t,turn,role,l2,"
                                        "rel_l2,cos_dist,below_floor\n")  # fmt: skip
    pd.DataFrame([dict(model="m", item="talk-fr", policy="none", sample=0, pair="p", t=1,
                       delta_logp=0.1, kl=0.2, kl_low=0.2, kl_high=0.3, backend="openai")]
                 ).to_csv(run / "nexttoken.csv", index=False)  # fmt: skip
    text = html_lib.unescape(render_report(run).read_text(encoding="utf-8"))
    # where the divergence section and the conversations' divergence part would be
    assert text.count("the probe ran through a served model's endpoint (probe.backend openai)") == 2
