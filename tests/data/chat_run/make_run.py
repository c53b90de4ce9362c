"""Build the run folder of a chat run of a five-rule prompt, without a model (~20 s): the
Nordbank support prompt of issues 44/56 (German, <= 80 words, no competitor banks, the
sign-off, the persona; tests/data/configs/lena-suite.yaml) as a six-turn conversation under
three between-turn policies (none, periodic every 2 turns, adaptive) and as a single reply
under none and periodic every 64 tokens, 8 samples each, with per-rule gates, through every
stage of `harness run` (probe off, as on a chat endpoint).

    python tests/data/chat_run/make_run.py OUT_DIR

The scripted replies never sign off unless a reminder stands in the prompt, name a
competitor at turn 3 and answer in English at turn 5: so under `none` the sign-off breaks at
turn 1, and the policies that remind fix it from the turn after their first reminder.
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from harness.engines import GenerationResult
from harness.engines.scripted import CharTokenizer
from harness.pipeline import STAGES, run_stages

DATA = Path(__file__).parents[1] / "configs"
EOS = 0
SIGN_OFF = " Viele Grüße, Lena"
REMINDER_MARK = "Erinnerung"  # the suite's reminder text starts so
# the reply to the prompt with k user turns (none signs off by itself)
REPLIES = {
    1: "Hallo! Hier ist Lena von Nordbank. Ihr Passwort ändern Sie im Online-Banking unter "
    "Einstellungen und dann Sicherheit. Dort wählen Sie ein neues Passwort und bestätigen es.",
    2: "Lena hier. Unser Girokonto kostet fünf Euro im Monat, für junge Kunden ist es "
    "kostenlos. Die Karte ist inklusive und Überweisungen sind gebührenfrei.",
    3: "Lena hier. Die Sparkasse ist manchmal günstiger, aber bei Nordbank bekommen Sie mehr "
    "Service und eine gute App für Ihr Konto.",
    4: "Lena hier. Eine Überweisung ins Ausland dauert bei uns meistens zwei bis drei "
    "Werktage, innerhalb Europas oft nur einen Tag.",
    5: "This is Lena from Nordbank. To block a lost card, call our hotline at once or use "
    "the app, and we will send you a new card within a week.",
    6: "Lena hier. Ja, ein Sparkonto können Sie direkt in der App eröffnen, ganz ohne "
    "Gebühren und mit täglicher Verfügbarkeit.",
}
CONFIG = {
    "name": "lena-chat",
    "models": ["tiny-random-llama"],
    "suites": ["suite.yaml"],
    "policies": ["none", {"name": "periodic", "every": 64, "placement": "user"}],
    "conversation_policies": [
        "none",
        {"name": "periodic", "every_turns": 2, "placement": "system"},
        {"name": "adaptive", "on": "turn", "placement": "system"},
    ],
    "samples": 8,
    "generation": {"engine": "hf", "max_tokens": 2400, "turn_tokens": 400},
    "scoring": {"window": 64},
    "probe": {"enabled": False},
    "theory": {"relay": None, "bias_lams": []},
    "gates": [
        {"metric": "auc", "policy": "none", "rule": "sign-off", "min": 0.5},
        {"metric": "auc", "policy": "periodic-turns2-system", "rule": "sign-off", "min": 0.5},
        {"metric": "auc", "policy": "adaptive-turn-system", "rule": "sign-off", "min": 0.5},
    ],
}


class Support:
    """Replies by the number of user turns in the prompt, each ended (EOS); signed off only
    where a reminder stands in the prompt."""

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
        text += SIGN_OFF if REMINDER_MARK in prompt else ""
        ids = [ord(c) for c in text][: request.sampling.max_tokens - 1] + [EOS]
        return GenerationResult(
            token_ids=ids, text=text, finish_reason="stop", prompt_tokens=len(request.prompt_ids)
        )

    def close(self) -> None:
        pass


def build_run(dest: Path) -> Path:
    """Write the config and suite beside `dest` and the run's files into `dest`."""
    from tests.scripted_run import scripted_run

    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    suite = yaml.safe_load((DATA / "lena-suite.yaml").read_text(encoding="utf-8"))
    (item,) = suite["items"]
    single = {k: v for k, v in item.items() if k != "turns"}
    suite["items"].append({**single, "id": "lena-single"})  # the first request, one reply
    (dest.parent / "suite.yaml").write_text(yaml.safe_dump(suite, allow_unicode=True))
    (dest.parent / "run.yaml").write_text(yaml.safe_dump(CONFIG), encoding="utf-8")
    with scripted_run(dest.parent / "run.yaml", dest, Support()) as ctx:
        run_stages(ctx, STAGES, show_progress=False)
    return dest


if __name__ == "__main__":
    print(build_run(Path(sys.argv[1])))
