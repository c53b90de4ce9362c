"""Issue 56: a prompt whose rules judge whole replies (a word limit and a sign-off, no
window-scope rule) through every stage on a scripted conversation. The adaptive policy
reminds after a reply that breaks a whole-reply rule (it used to read window-scope rules
only, so its replies were none's), and the run ends with its adherence rows (it used to
stop in `adherence_summary` with a KeyError once every request was spent)."""

from __future__ import annotations

import pandas as pd
import pytest
import yaml

from harness.config.run import TaskItem
from harness.engines import GenerationResult
from harness.engines.scripted import CharTokenizer
from harness.pipeline import STAGES, run_stages
from harness.scoring import reply_fails, window_fails
from tests.scripted_run import scripted_run

EOS = 0
SIGN_OFF = "Viele Grüße, Lena"
REMINDER = "Erinnerung: Schluss mit 'Viele Grüße, Lena'."
CHECKS = [
    {"type": "ifeval", "id": "length_constraints:number_words",
     "kwargs": {"num_words": 81, "relation": "less than"}, "rule": "max-80-words"},
    {"type": "ifeval", "id": "startend:end_checker", "kwargs": {"end_phrase": SIGN_OFF},
     "rule": "sign-off"},
]  # fmt: skip
SUITE = {
    "suite": "trip",
    "items": [
        {
            "id": "conv-trip",
            "system": f"Du bist Lena. Antworte in höchstens 80 Wörtern. Ende mit '{SIGN_OFF}'.",
            "user": "Wohin soll ich im Mai reisen?",
            "turns": ["Und im Juni?", "Was kostet das?", "Danke, und im Winter?"],
            "checks": CHECKS,
            "reminder": REMINDER,
        }
    ],
}
CONFIG = {
    "name": "whole-reply-rules",
    "models": ["tiny-random-llama"],
    "suites": ["suite.yaml"],
    "policies": ["none"],
    "conversation_policies": ["none", {"name": "adaptive", "on": "turn", "placement": "system"}],
    "samples": 4,
    "generation": {"engine": "hf", "max_tokens": 1200, "turn_tokens": 300},
    "scoring": {"window": 64},
    "probe": {"enabled": False},
    "theory": {"relay": None, "bias_lams": []},
}


class Forgetful:
    """Signs its first reply off, forgets the sign-off from the second on, and keeps it again
    once a reminder is in its prompt: each reply ends (EOS) well under 80 words."""

    name = "scripted"
    max_model_len = 100_000
    prefix_caching = False

    def __init__(self) -> None:
        self.tokenizer = CharTokenizer()

    def generate(self, requests):
        return [self._one(r) for r in requests]

    def _one(self, request) -> GenerationResult:
        prompt = self.tokenizer.decode(request.prompt_ids)
        turn = prompt.count("<user>")
        signs = turn == 1 or REMINDER in prompt
        text = f"Antwort {turn}: ein schöner Ort." + (f" {SIGN_OFF}" if signs else "")
        ids = [ord(c) for c in text][: request.sampling.max_tokens - 1] + [EOS]
        return GenerationResult(
            token_ids=ids, text=text, finish_reason="stop", prompt_tokens=len(request.prompt_ids)
        )

    def close(self) -> None:
        pass


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("trip")
    (folder / "suite.yaml").write_text(yaml.safe_dump(SUITE, allow_unicode=True))
    (folder / "run.yaml").write_text(yaml.safe_dump(CONFIG))
    out = folder / "out"
    with scripted_run(folder / "run.yaml", out, Forgetful()) as ctx:
        run_stages(ctx, STAGES, show_progress=False)
    return out


def test_a_run_whose_rules_all_judge_whole_replies_ends_with_its_adherence_rows(run):
    adherence = pd.read_csv(run / "adherence.csv")
    rows = adherence.set_index("policy")
    assert set(rows.index) >= {"none", "adaptive-turn-system"}
    assert (rows.loc[["none", "adaptive-turn-system"], "n_samples"] == 4).all()
    # no window-scope rule: no window to abstain on, and the AUC is the replies' own
    assert (rows.loc[["none", "adaptive-turn-system"], "windows_total"] == 0).all()
    assert rows.loc["none", "auc"] < rows.loc["adaptive-turn-system", "auc"]


def test_adaptive_reminds_after_a_reply_that_breaks_a_whole_reply_rule(run):
    turns = pd.read_csv(run / "turns.csv")
    sign_off = turns[turns["rule"] == "sign-off"]
    passed = sign_off.groupby(["policy", "turn"])["passed"].mean().unstack("turn")
    # none forgets the sign-off from turn 2 on; adaptive reminds after turn 2's reply
    assert passed.loc["none"].tolist() == [1.0, 0.0, 0.0, 0.0]
    assert passed.loc["adaptive-turn-system"].tolist() == [1.0, 0.0, 1.0, 1.0]
    summary = pd.read_csv(run / "summary.csv").set_index("policy")
    assert summary.loc["adaptive-turn-system", "tokens_injected"] > 0


def _item() -> TaskItem:
    return TaskItem.model_validate(SUITE["items"][0])


def test_reply_fails_reads_whole_reply_rules_and_window_fails_does_not():
    item = _item()
    unsigned = "Antwort 2: ein schöner Ort."
    assert reply_fails(item, unsigned) is True
    assert reply_fails(item, f"{unsigned} {SIGN_OFF}") is False
    # a window of a reply under way cannot judge its end
    assert window_fails(item, unsigned) is None


def test_a_reply_cut_at_the_token_limit_is_not_reminded_for_its_missing_end():
    # a cut reply lacks its sign-off because it was cut: scoring gives it no verdict, and
    # adaptive does not remind on it either (the word limit it kept is no verdict either)
    assert reply_fails(_item(), "Antwort 2: ein schöner", cut_off=True) is None
