"""Issue 44's done-when, without a model: the five-rule Nordbank prompt (German, <= 80 words,
no competitor banks, the sign-off, the persona name), its checks written by hand
(tests/data/configs/lena-suite.yaml), through every stage on a scripted conversation that
drops the sign-off from turn 1, names a competitor at turn 3 and answers in English at turn 5.
One row per rule in rules.csv, a report section naming every rule in the order they break,
and a gate on the sign-off that fails while the all-rules AUC of the other four rules passes."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from harness.engines import GenerationResult
from harness.engines.scripted import CharTokenizer, ScriptedEngine
from harness.pipeline import STAGES, run_stages
from tests.data.chat_run.make_run import REPLIES  # by the number of user turns; none signs off
from tests.scripted_run import scripted_run

DATA = Path(__file__).parents[1] / "data" / "configs"
EOS = 0
RULES = ["german", "max-80-words", "no-competitors", "sign-off", "persona"]
CONFIG = {
    "name": "lena-scripted",
    "models": ["tiny-random-llama"],
    "suites": ["suite.yaml"],
    "policies": ["none"],
    "conversation_policies": ["none"],
    "samples": 8,
    "generation": {"engine": "hf", "max_tokens": 2400, "turn_tokens": 400},
    "scoring": {"window": 64},
    "probe": {"enabled": False},
    "theory": {"relay": None, "bias_lams": []},
    "gates": [
        # the sign-off alone: broken in every reply
        {"metric": "auc", "policy": "none", "rule": "sign-off", "min": 0.5,
         "items": ["lena-nordbank"]},
        # all rules of the item that has the other four: 4 of 6 replies keep them all
        {"metric": "auc", "policy": "none", "min": 0.3, "items": ["lena-four-rules"]},
        # all five rules: the sign-off brings every window down
        {"metric": "auc", "policy": "none", "min": 0.5, "items": ["lena-nordbank"]},
        # over turns: the competitor ban holds at turn 2, falls at turn 3
        {"metric": "a_turn", "turn": 2, "rule": "no-competitors", "policy": "none", "min": 0.5,
         "items": ["lena-nordbank"]},
        {"metric": "a_turn", "turn": 3, "rule": "no-competitors", "policy": "none", "min": 0.5,
         "items": ["lena-nordbank"]},
    ],
}  # fmt: skip


class Support:
    """Replies by the number of user turns in the prompt, each ended (EOS)."""

    name = "scripted"
    max_model_len = 100_000
    prefix_caching = False

    def __init__(self) -> None:
        self.tokenizer = CharTokenizer()

    def generate(self, requests):
        return [self._one(r) for r in requests]

    def _one(self, request) -> GenerationResult:
        prompt = self.tokenizer.decode(request.prompt_ids)
        text = REPLIES[prompt.count("<user>")]
        ids = [ord(c) for c in text][: request.sampling.max_tokens - 1] + [EOS]
        return GenerationResult(
            token_ids=ids, text=text, finish_reason="stop", prompt_tokens=len(request.prompt_ids)
        )

    def close(self) -> None:
        pass


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("lena")
    suite = yaml.safe_load((DATA / "lena-suite.yaml").read_text(encoding="utf-8"))
    (item,) = suite["items"]
    four = {**item, "id": "lena-four-rules"}
    four["checks"] = [c for c in item["checks"] if c.get("rule") != "sign-off"]
    suite["items"].append(four)
    (folder / "suite.yaml").write_text(yaml.safe_dump(suite, allow_unicode=True))
    (folder / "run.yaml").write_text(yaml.safe_dump(CONFIG))
    out = folder / "out"
    with scripted_run(folder / "run.yaml", out, Support()) as ctx:
        run_stages(ctx, STAGES, show_progress=False)
    return out


def test_one_row_per_rule_with_the_turn_it_breaks(run):
    rules = pd.read_csv(run / "rules.csv", keep_default_na=False, na_values=[""])
    five = rules[rules["item"] == "lena-nordbank"].set_index("rule")
    assert sorted(five.index) == sorted(RULES)
    assert five.loc["sign-off", "sentence"] == "Beende jede Antwort mit 'Viele Grüße, Lena'."
    first_below = five["first_below_turn"].to_dict()
    assert first_below == {
        "sign-off": 1, "no-competitors": 3, "german": 5,
        "max-80-words": float("inf"), "persona": float("inf"),
    }  # fmt: skip
    assert five.loc["sign-off", "auc"] == 0 and five.loc["max-80-words", "auc"] == 1
    assert (five.loc["sign-off", ["judged", "failed", "cut_off"]] == [48, 48, 0]).all()
    assert set(rules.loc[rules["item"] == "lena-four-rules", "rule"]) == set(RULES) - {"sign-off"}


def test_the_report_names_every_rule_in_the_order_they_break(run):
    html = (run / "report.html").read_text(encoding="utf-8")
    section = html[html.index('id="rules"') :]
    section = section[: section.index("</section>")]
    assert "Which rule breaks first" in html
    four = section[section.index("lena-four-rules") : section.index("lena-nordbank")]
    five = section[section.index("lena-nordbank") :]
    at = [five.index(f"{k}. {rule}</b>") for k, rule in enumerate(
        ["sign-off", "no-competitors", "german", "max-80-words", "persona"], start=1)]  # fmt: skip
    assert at == sorted(at)
    assert "Antworte in höchstens 80 Wörtern." in five
    assert "1. no-competitors</b>" in four and "sign-off" not in four
    # every reply ended on its own: the truncated share says so
    assert "Replies cut at the token limit: 0 of 96 (0 %)." in section


def test_a_gate_on_one_rule_fails_while_the_other_rules_pass(run):
    gates = pd.read_csv(run / "gates.csv", keep_default_na=False, na_values=[""])
    assert gates["verdict"].tolist() == ["fail", "pass", "fail", "pass", "fail"]
    rules = ["sign-off", "", "", "no-competitors", "no-competitors"]
    assert gates["rule"].fillna("").tolist() == rules
    junit = (run / "junit.xml").read_text(encoding="utf-8")
    assert 'failures="3"' in junit and "(rule sign-off)" in junit


def _chat_log(path: Path, conversations: int) -> Path:
    suite = yaml.safe_load((DATA / "lena-suite.yaml").read_text(encoding="utf-8"))
    (item,) = suite["items"]
    users = [item["user"], *(t if isinstance(t, str) else t["user"] for t in item["turns"])]
    lines = []
    for k in range(conversations):
        messages = [{"role": "system", "content": item["system"]}]
        for turn, user in enumerate(users, start=1):
            messages += [{"role": "user", "content": user},
                         {"role": "assistant", "content": REPLIES[turn]}]  # fmt: skip
        lines.append(json.dumps({"id": f"c-{k}", "messages": messages}, ensure_ascii=False))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_harness_score_checks_gates_on_a_log_and_exits_1_on_a_failed_one(
    tmp_path, run_cli, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("harness.units.plan.load_tokenizer", lambda name: CharTokenizer())
    log = _chat_log(tmp_path / "support.jsonl", 8)
    gates = {"gates": [
        {"metric": "auc", "policy": "logged", "rule": "sign-off", "min": 0.5},
        {"metric": "auc", "policy": "logged", "rule": "max-80-words", "min": 0.5},
        {"metric": "a_turn", "turn": 5, "rule": "german", "policy": "logged", "min": 0.5},
    ]}  # fmt: skip
    (tmp_path / "gates.yaml").write_text(yaml.safe_dump(gates))
    suite = str(DATA / "lena-suite.yaml")
    out = tmp_path / "out"
    code, stdout, stderr = run_cli(
        ["score", str(log), "--suite", suite, "--out", str(out), "--gates", "gates.yaml"]
    )
    assert code == 1, stderr
    frame = pd.read_csv(out / "gates.csv")
    assert frame["verdict"].tolist() == ["fail", "pass", "fail"]
    assert "FAIL gates[0] auc (rule sign-off) of logged >= 0.5" in stderr
    assert (out / "junit.xml").is_file() and str(out / "rules.csv") in stdout
    rules = pd.read_csv(out / "rules.csv").set_index("rule")
    assert rules.loc["sign-off", "first_below_turn"] == 1 and rules.loc["german", "turns"] == 6
    # windows.csv judges each logged reply's whole-reply rules as turns.csv does
    windows, turns = pd.read_csv(out / "windows.csv"), pd.read_csv(out / "turns.csv")
    whole = windows[windows["window"] < 0].set_index(["sample", "turn", "check"])["passed"]
    replies = turns.set_index(["sample", "turn", "check"])["passed"].loc[whole.index]
    assert (whole == replies).all() and len(whole) == 8 * 6 * 3


@pytest.mark.parametrize(
    ("gate", "problem"),
    [
        ({"metric": "auc", "policy": "periodic-64-user", "min": 0.5},
         "policy 'periodic-64-user' matches no unit: a chat log's conversations are the prompt "
         "without reminders (policy 'none', scored as 'logged')"),
        ({"metric": "auc", "policy": "logged", "rule": "signoff", "min": 0.5},
         "rule 'signoff' is no rule of its items"),
    ],
)  # fmt: skip
def test_harness_score_refuses_a_gate_that_judges_nothing(tmp_path, run_cli, gate, problem):
    log = _chat_log(tmp_path / "support.jsonl", 1)
    (tmp_path / "gates.yaml").write_text(yaml.safe_dump({"gates": [gate]}))
    out = tmp_path / "out"
    args = ["score", str(log), "--suite", str(DATA / "lena-suite.yaml"), "--out", str(out)]
    code, _, stderr = run_cli([*args, "--gates", str(tmp_path / "gates.yaml")])
    assert code == 2 and stderr.count("\n") == 1 and problem in stderr, stderr
    assert not out.exists()


def test_the_readmes_score_command_takes_the_config_init_wrote(
    tmp_path, run_cli, monkeypatch, scripted_engine
):
    """README: `harness score chats.jsonl --suite acme.suite.yaml --out reports/logs --gates
    acme.yaml` on the files `harness init acme` wrote: its gates on policy `none` judge the
    logged conversations (the prompt without reminders); a gate on a reminder policy the config
    runs is left out, said so on stderr."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("harness.units.plan.load_tokenizer", lambda name: CharTokenizer())
    scripted_engine(ScriptedEngine({"": 1.0}))  # init's persona rule is a judge check
    suite = yaml.safe_load((DATA / "lena-suite.yaml").read_text(encoding="utf-8"))
    assert run_cli(["init", "acme", "--system", suite["items"][0]["system"]])[0] == 0
    _chat_log(tmp_path / "chats.jsonl", 4)
    argv = ["score", "chats.jsonl", "--suite", "acme.suite.yaml", "--out", "reports/logs"]
    code, _, stderr = run_cli([*argv, "--gates", "acme.yaml"])
    assert code in (0, 1) and "error" not in stderr, stderr
    written = yaml.safe_load((tmp_path / "acme.yaml").read_text(encoding="utf-8"))["gates"]
    on_none = [g for g in written if g["policy"] == "none"]
    gates = pd.read_csv(tmp_path / "reports" / "logs" / "gates.csv")
    assert on_none and gates["gate"].nunique() == len(on_none)
    assert set(gates["policy"]) == {"logged"} and set(gates["metric"]) == {
        g["metric"] for g in on_none
    }
    assert set(gates["verdict"]) <= {"pass", "fail", "undecided"}
    assert (tmp_path / "reports" / "logs" / "junit.xml").is_file()
    # the log's report shows the verdicts its gates.csv holds (it said no gates had run)
    report = (tmp_path / "reports" / "logs" / "report.html").read_text(encoding="utf-8")
    section = report[report.index('<section id="gates">') :].split("</section>")[0]
    assert section.count('<tr class="gate-') == len(gates)
    assert all(f"{v.upper()}</td>" in section for v in gates["verdict"])
    assert "gates or judge ran" not in report
    manifest = json.loads((tmp_path / "reports" / "logs" / "manifest.json").read_text())
    assert {"gates.csv", "junit.xml"} <= set(manifest["files"])
    config = yaml.safe_load((tmp_path / "acme.yaml").read_text(encoding="utf-8"))
    config["gates"].append({"metric": "token_overhead", "policy": "periodic-64-user", "max": 0.5})
    (tmp_path / "more.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    code, _, stderr = run_cli([*argv[:-1], "reports/more", "--gates", "more.yaml"])
    assert code in (0, 1) and "policy 'periodic-64-user' left out: a chat log holds no " in stderr
    assert len(pd.read_csv(tmp_path / "reports" / "more" / "gates.csv")) == len(gates)


def test_laws_per_rule_beside_the_all_rules_curve(run):
    """laws.csv fits each rule's own a(k) (its `rule`) beside the all-rules curve (empty
    `rule`), per condition, three candidate laws a curve, one chosen."""
    laws = pd.read_csv(run / "laws.csv", keep_default_na=False, na_values=[""])
    a_k = laws[(laws["curve"] == "a_k") & (laws["item"] == "lena-nordbank")]
    by_rule = a_k.groupby(a_k["rule"].fillna(""))
    assert sorted(by_rule.groups) == sorted(["", *RULES])
    assert (by_rule.size() == 3).all() and (by_rule["chosen"].sum() == 1).all()
    four = laws[(laws["item"] == "lena-four-rules") & laws["rule"].notna()]
    assert set(four["rule"]) == set(RULES) - {"sign-off"}
    assert not laws[laws["item"] == "all"]["rule"].notna().any()  # pooled: all rules only
