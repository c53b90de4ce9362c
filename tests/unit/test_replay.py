"""Replay of logged conversations (`log:` + `replay:` on a suite item): the suite rules, the
samples a replay makes, the logged history in place before the first round, the context stop,
the checks before the run, and a run through the real stages on a scripted engine (no model)
that writes every history apart in turns.csv, turn_adherence.csv, conversations.csv and the
report."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
import yaml

from harness.config.files import load_run_config_and_suites, load_suite
from harness.engines.scripted import ScriptedEngine
from harness.errors import UserError
from harness.pipeline import run_stages
from harness.policies import ChatFormat, policy_run, run_policies
from harness.stages.analyse import AnalyseStage
from harness.stages.generate import GenerateStage, sampling_settings
from harness.stages.report import ReportStage
from harness.stages.score import ScoreStage
from harness.units.replay import LogError, check_replays, logged_records, replay_specs, run_specs
from harness.units.selection import select_items
from tests.scripted_run import scripted_run

# a replayed reply too short for 4-grams once leaked "Mean of empty slice" from quality.csv
pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")

LOGS = [
    {"id": "c<1>", "messages": [
        {"role": "system", "content": "the old prompt"},
        {"role": "user", "content": "U1"}, {"role": "assistant", "content": "yes A1"},
        {"role": "user", "content": "U2"}, {"role": "assistant", "content": "no A2"},
    ]},
    {"id": "c2", "messages": [
        {"role": "user", "content": "V1"}, {"role": "assistant", "content": "no B1"},
        {"role": "user", "content": "V2"}, {"role": "assistant", "content": "yes B2"},
        {"role": "user", "content": "V3"}, {"role": "assistant", "content": "yes B3"},
        {"role": "user", "content": "V4 (never answered)"},
    ]},
]  # fmt: skip
ITEM = {
    "id": "replayed",
    "system": "Say yes. (SYS)",
    "log": "logs.jsonl",
    "replay": ["reference", "own"],
    "checks": [{"type": "regex_must_not", "pattern": r"\bno\b"}],
}


def _write(tmp_path: Path, item=None, logs=LOGS, samples=2, **generation) -> Path:
    (tmp_path / "logs.jsonl").write_text("".join(json.dumps(c) + "\n" for c in logs))
    suite = {"suite": "replays", "items": [item or ITEM]}
    (tmp_path / "suite.yaml").write_text(yaml.safe_dump(suite))
    config = {
        "name": "replay",
        "models": ["tiny-random-llama"],
        "suites": [str(tmp_path / "suite.yaml")],
        "policies": ["none"],
        "conversation_policies": ["none", {"name": "periodic", "every_turns": 2}],
        "samples": samples,
        "generation": {"engine": "hf", "max_tokens": 24, "turn_tokens": 6, **generation},
        "scoring": {"window": 6},
        "probe": {"enabled": False},
    }
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _suite_error(tmp_path: Path, **changes) -> str:
    (tmp_path / "logs.jsonl").write_text(json.dumps(LOGS[0]) + "\n")
    item = {k: v for k, v in {**ITEM, **changes}.items() if v is not None}
    (tmp_path / "suite.yaml").write_text(yaml.safe_dump({"suite": "s", "items": [item]}))
    with pytest.raises(UserError) as info:
        load_suite(tmp_path / "suite.yaml")
    return str(info.value)


def test_a_replay_item_resolves_its_log_beside_the_suite(tmp_path):
    _write(tmp_path, item={**ITEM, "replay": "own"})
    item = load_suite(tmp_path / "suite.yaml").items[0]
    assert item.log == (tmp_path / "logs.jsonl").resolve() and item.replay == ["own"]
    assert item.is_replay and item.is_conversation and item.user is None


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"log": None}, "`replay` needs `log`"),
        ({"replay": None}, "`log` needs `replay`: reference, own, or [reference, own]"),
        ({"replay": ["own", "own"]}, "`replay` lists a history twice"),
        ({"replay": "logged"}, "replay"),
        ({"user": "Hi"}, "takes its user turns from `log`: drop `user`"),
        ({"turns": ["Hi"]}, "drop `turns`"),
        ({"log": "missing.jsonl"}, "field 'items.0.log': missing.jsonl: file not found"),
    ],
)
def test_suite_rules_for_replay_items(tmp_path, changes, message):
    assert message in _suite_error(tmp_path, **changes)


def test_an_item_without_a_log_still_needs_a_user_turn(tmp_path):
    assert "field 'user' missing" in _suite_error(tmp_path, log=None, replay=None)


def test_the_old_history_field_is_refused_with_one_line_naming_log(tmp_path, run_cli):
    renamed = {**{k: v for k, v in ITEM.items() if k != "log"}, "history": "logs.jsonl"}
    code, out, err = run_cli(
        ["run", str(_write(tmp_path, item=renamed)), "--out", str(tmp_path / "o")]
    )
    assert code == 2 and out == ""
    (line,) = err.strip().splitlines()
    assert "'history' was renamed 'log'" in line and "write 'log: PATH'" in line
    assert not (tmp_path / "o").exists()


def _plan(tmp_path: Path, **kw):
    config, suites = load_run_config_and_suites(_write(tmp_path, **kw))
    return config, select_items(config, suites)


def test_replay_specs_number_every_history_conversation_turn_and_sample(tmp_path):
    config, items = _plan(tmp_path)
    specs = replay_specs(config, "m", items[0], "rid", range(2))
    # reference: (2 + 3 replies) x 2 samples; own: 2 conversations x 2 samples
    assert len(specs) == 10 + 4
    assert [s.meta["sample"] for s in specs] == list(range(14))
    ref = [s for s in specs if s.history == "reference"]
    third = [s for s in ref if s.meta["conversation_id"] == "c2" and len(s.logged) == 2]
    assert len(third) == 2 and third[0].user == "V1"
    assert third[0].logged == ["no B1", "yes B2"] and [t for t, _ in third[0].turns] == ["V2", "V3"]
    own = [s for s in specs if s.history == "own"]
    assert [(s.meta["conversation_id"], len(s.turns), s.logged) for s in own][2:] == [
        ("c2", 2, []),
        ("c2", 2, []),
    ]  # fmt: skip  (the unanswered last user turn is not replayed)
    assert len({s.seed for s in own}) == 4 and all(s.system == ITEM["system"] for s in specs)
    first = {(s.meta["conversation_id"], s.seed) for s in ref if not s.turns}
    assert {(s.meta["conversation_id"], s.seed) for s in own} == first  # turn 1: one draw
    assert run_specs(config, "m", items, "rid") == specs  # samples: the config's 2


def test_the_reference_history_is_in_place_before_the_reply(tmp_path):
    config, items = _plan(tmp_path)
    engine = ScriptedEngine({"SYS": 1.0})
    chat = ChatFormat(engine.tokenizer)
    specs = [s for s in run_specs(config, "m", items, "rid") if s.history == "reference"]
    policy = policy_run(config.conversation_policies[1], False, None)  # periodic-turns2
    records = run_policies(
        [(policy, specs)], engine, chat, sampling_settings(config), None, None, 6
    )
    last = next(r for r in records[0] if r.conversation_id == "c2" and r.turn_positions().get(3))
    layout = [(s.kind, s.turn, s.text) for s in last.segments if s.kind != "markup"]
    assert layout == [
        ("logged", 1, "no B1"), ("injected", 2, "Reminder: Say yes. (SYS)\n\n"), ("user", 2, "V2"),
        ("logged", 2, "yes B2"), ("user", 3, "V3"), ("generated", 3, " yes y"),
    ]  # fmt: skip
    assert last.history == "reference" and last.tokens.logged == len("no B1yes B2")
    assert list(last.turn_positions()) == [3] and last.tokens.generated == 6


def test_a_replay_that_reaches_the_context_stops_with_finish_reason_context(tmp_path):
    config, items = _plan(tmp_path, samples=1)
    engine = ScriptedEngine({"SYS": 1.0})
    chat = ChatFormat(engine.tokenizer)
    own = [s for s in run_specs(config, "m", items, "rid") if s.history == "own"]
    prompt = len(chat.prompt_ids(own[1].system, own[1].user))
    engine.max_model_len = prompt + 40  # room for turn 1 and part of turn 2 only
    policy = policy_run(config.conversation_policies[0], False, None)
    record = run_policies([(policy, own)], engine, chat, sampling_settings(config), None, None, 6)
    talk = record[0][1]
    assert talk.finish_reason == "context" and talk.conversation_id == "c2"
    assert len(talk.prompt_ids) + len(talk.continuation_ids) <= engine.max_model_len
    assert max(talk.turn_positions()) < 3


def test_a_history_longer_than_the_context_is_one_line_naming_the_log(tmp_path):
    config, items = _plan(tmp_path)
    chat = ChatFormat(ScriptedEngine({}).tokenizer)
    check_replays(config, chat, items, 10_000)  # fits
    with pytest.raises(LogError) as info:
        check_replays(config, chat, items, 90)
    message = str(info.value)
    assert message.startswith(f"{(tmp_path / 'logs.jsonl').resolve()}:2: conversation 'c2'")
    assert "context is 90" in message and "\n" not in message


@pytest.mark.parametrize(
    ("messages", "problem"),
    [
        ([{"role": "assistant", "content": "hi"}, {"role": "user", "content": "u"}],
         "roles out of order: message 1 is 'assistant', expected 'user'"),
        ([{"role": "user", "content": "u"}, {"role": "user", "content": "again"},
          {"role": "assistant", "content": "a"}], "message 2 is 'user' after 'user'"),
    ],
)  # fmt: skip
def test_a_log_a_replay_cannot_use_names_its_line(tmp_path, messages, problem):
    logs = [LOGS[0], {"id": "bad", "messages": messages}]
    config, items = _plan(tmp_path, logs=logs)
    chat = ChatFormat(ScriptedEngine({}).tokenizer)
    with pytest.raises(UserError, match=f"logs.jsonl:2: .*{problem}"):
        check_replays(config, chat, items, 10_000)


def test_an_own_replay_whose_replies_cannot_all_get_turn_tokens_is_refused(tmp_path):
    config, items = _plan(tmp_path, max_tokens=16)  # c2 has 3 replies x turn_tokens 6 = 18
    chat = ChatFormat(ScriptedEngine({}).tokenizer)
    with pytest.raises(LogError, match=r"logs.jsonl:2: conversation 'c2': 3 replies x "):
        check_replays(config, chat, items, 10_000)


def test_restate_is_refused_on_replays(tmp_path):
    config, items = _plan(tmp_path)
    chat = ChatFormat(ScriptedEngine({}).tokenizer)
    data = {**config.model_dump(mode="json"), "conversation_policies": ["restate"]}
    with pytest.raises(UserError, match="policy 'restate': a replay's first reply"):
        check_replays(type(config).model_validate(data), chat, items, 10_000)


def test_the_logged_record_holds_the_log_as_it_is(tmp_path):
    _config, items = _plan(tmp_path)
    chat = ChatFormat(ScriptedEngine({}).tokenizer)
    records = logged_records(chat, items[0], "m", "rid", "log")
    assert [(r.policy, r.history, r.conversation_id, r.sample) for r in records] == [
        ("logged", "logged", "c<1>", 0), ("logged", "logged", "c2", 1)
    ]  # fmt: skip
    texts = {t: chat.tokenizer.decode([records[1].continuation_ids[p] for p in pos])
             for t, pos in records[1].turn_positions("logged").items()}  # fmt: skip
    assert texts == {1: "no B1", 2: "yes B2", 3: "yes B3"}
    assert records[1].prompt_messages[0] == {"role": "system", "content": ITEM["system"]}


@pytest.fixture
def replay_run(tmp_path):
    """A replay through generate, score, analyse and report on the scripted engine (every
    reply 'yes': the logged 'no' replies are the only failures)."""
    path = _write(tmp_path)
    out = tmp_path / "out"
    with scripted_run(path, out, ScriptedEngine({"SYS": 1.0})) as ctx:
        stages = [GenerateStage(), ScoreStage(), AnalyseStage(), ReportStage()]
        run_stages(ctx, stages, show_progress=False)
    return out


def test_a_replay_run_keeps_every_history_apart(replay_run):
    turns = pd.read_csv(replay_run / "turns.csv", keep_default_na=False)
    counts = turns.groupby(["history", "policy"]).size().to_dict()
    # logged: 5 replies once; reference: 5 replies x 2 samples; own: 5 turns x 2 samples,
    # under each of the two conversation policies
    assert counts == {("logged", "logged"): 5, ("own", "none"): 10,
                      ("own", "periodic-turns2-user"): 10, ("reference", "none"): 10,
                      ("reference", "periodic-turns2-user"): 10}  # fmt: skip
    logged = turns[turns["history"] == "logged"].sort_values(["conversation_id", "turn"])
    assert list(zip(logged["conversation_id"], logged["turn"], logged["passed"], strict=True)) == [
        ("c2", 1, False), ("c2", 2, True), ("c2", 3, True), ("c<1>", 1, True), ("c<1>", 2, False)
    ]  # fmt: skip
    curve = pd.read_csv(replay_run / "turn_adherence.csv")
    mine = curve[(curve["policy"].isin(["logged", "none"]))].set_index(["history", "turn"])
    assert mine.loc[("logged", 1), "a"] == 0.5 and mine.loc[("logged", 1), "n"] == 2
    assert mine.loc[("reference", 3), "a"] == 1.0 and mine.loc[("reference", 3), "n"] == 2
    assert mine.loc[("own", 1), "n"] == 4 and mine.loc[("own", 1), "a_low"] < 1.0
    own_first = turns[(turns["history"] == "own") & (turns["turn"] == 1)]
    ref_first = turns[(turns["history"] == "reference") & (turns["turn"] == 1)]
    assert sorted(own_first["seed"]) == sorted(ref_first["seed"])
    assert math.isnan(mine.loc[("reference", 2), "survival"])
    assert mine.loc[("reference", 2), "survival_method"].startswith("none (reference")
    summary = pd.read_csv(replay_run / "conversations.csv").set_index(["policy", "history"])
    assert summary.loc[("logged", "logged"), "mean"] == pytest.approx((0.5 + 0.5 + 1) / 3)
    assert summary.loc[("none", "reference"), "n_samples"] == 10
    assert summary.loc[("none", "own"), "tokens_generated"] == 2 * (2 * 6 + 3 * 6)
    html = (replay_run / "report.html").read_text()
    assert "Replayed logs, turn by turn" in html and "Replies side by side" in html
    assert "c&lt;1&gt;" in html and "c<1>" not in html and "chat-logged" in html
    records = [json.loads(x) for x in (replay_run / "generations.jsonl").read_text().splitlines()]
    assert sum(r.get("history") == "logged" for r in records) == 2
    assert all("history" not in r or r["policy"] != "logged" or r["tokens"]["generated"] == 0
               for r in records)  # fmt: skip


def test_the_report_lists_the_failing_logged_turns_beside_the_replays(replay_run):
    """The logs view in a replay run: the conversations that fail first, and each failing
    logged turn with the user message, the logged reply and the replays' (escaped)."""
    import html as html_lib
    import re

    page = (replay_run / "report.html").read_text()
    part = page.split('<section id="logs">', 1)[1].split("</section>", 1)[0]
    body = part.split("<h3>Failing turns</h3>", 1)[1]
    rows = [
        [html_lib.unescape(c) for c in re.findall(r"<td>(.*?)</td>", row, flags=re.S)]
        for row in re.findall(r"<tr>(.*?)</tr>", body.split("<tbody>", 1)[1], flags=re.S)
    ]
    assert [(r[0], r[1], r[3], r[4]) for r in rows] == [
        ("c2", "1", "V1", "no B1"), ("c<1>", "2", "U2", "no A2")
    ]  # fmt: skip
    assert all(r[5].startswith(" yes") or r[5].startswith("yes") for r in rows)  # reference
    assert "c&lt;1&gt;" in part and "c<1>" not in part


def test_a_replayed_log_with_tool_calls_keeps_them_as_text_and_says_so(tmp_path, capsys):
    call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "t1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
        ],
    }
    talk = {"id": "tools", "messages": [
        {"role": "user", "content": [{"type": "text", "text": "U1"}]}, call,
        {"role": "tool", "tool_call_id": "t1", "content": "found"},
        {"role": "assistant", "content": "yes A1"},
        {"role": "user", "content": "U2"}, {"role": "assistant", "content": "no A2"},
    ]}  # fmt: skip
    config, items = _plan(tmp_path, logs=[talk])
    check_replays(config, ChatFormat(ScriptedEngine({}).tokenizer), items, 10_000)
    (line,) = capsys.readouterr().err.splitlines()
    assert line == (
        f"note: {items[0].item.log}: 1 conversation with tool calls: each turn's tool calls "
        "and results are replayed as text after its user message (the chat template's tool "
        "role is not used)"
    )
    ref = [
        s for s in replay_specs(config, "m", items[0], "rid", range(1)) if s.history == "reference"
    ]
    assert ref[0].user == "U1\n\n[tool call lookup({})]\n\n[tool result t1: found]"
    assert ref[1].logged == ["yes A1"] and [t for t, _ in ref[1].turns] == ["U2"]
