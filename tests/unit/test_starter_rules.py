"""`harness init` turns each stated rule of a prompt into a check (harness.starter.rules) with
its rule name and sentence, and sizes the token budget for it (harness.starter.budget): the
five-rule support prompt of issue 44 in German, multi-rule prompts in English and French, and
the readings one at a time (lengths, sign-offs, forbidden terms, personas, formats)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import TypeAdapter

from harness.checks import CheckSpec
from harness.config.files import load_run_config_and_suites
from harness.config.policy_specs import policy_label
from harness.starter.budget import budget_for
from harness.starter.language import choose_language
from harness.starter.rules import check_entry, sentences, stated_rules
from harness.units.plan_checks import check_turn_budget
from harness.units.selection import select_items

NORDBANK = (
    "Du bist Lena, die Support-Assistentin von Nordbank. Antworte immer auf Deutsch. Antworte "
    "in höchstens 80 Wörtern. Nenne niemals Konkurrenzbanken. Beende jede Antwort mit 'Viele "
    "Grüße, Lena'."
)
LUMEN = (
    "You are Max, the concierge of Hotel Lumen. Always answer in English. Keep every reply "
    "under 60 words. Never mention competitors such as Hilton or Marriott. Start every reply "
    'with "Dear guest". Use bullet points. Do not discuss room prices.'
)
HORIZON = (
    "Tu es Claire, la conseillère de Banque Horizon. Réponds toujours en français. Réponds en "
    "trois phrases au maximum. Ne mentionne jamais les banques concurrentes. Termine chaque "
    "réponse par « Bonne journée, Claire »."
)
LUMEN_COMPETITORS = "Never mention competitors such as Hilton or Marriott."
RIVALS = ["SmolLM", "ChatGPT", "Claude", "Gemini", "Llama", "Qwen", "Mistral", "Gemma"]
SPEC = TypeAdapter(CheckSpec)


@pytest.fixture
def in_tmp(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _init(in_tmp: Path, run_cli, prompt: str):
    (in_tmp / "prompt.txt").write_text(prompt, encoding="utf-8")
    code, stdout, stderr = run_cli(["init", "s", "--system", "@prompt.txt"])
    assert code == 0, stderr
    config, (suite,) = load_run_config_and_suites(in_tmp / "s.yaml")
    check_turn_budget(config, select_items(config, suites=[suite]))
    checks = suite.items[0].checks
    assert all(item.checks == checks for item in suite.items)  # `*checks` in every item
    return stdout, config, suite, checks


def _dumped(checks) -> list[dict]:
    return [c.model_dump(exclude_defaults=True) for c in checks]


def test_the_five_rules_of_the_nordbank_prompt(in_tmp, run_cli):
    stdout, config, suite, checks = _init(in_tmp, run_cli, NORDBANK)
    assert stdout.splitlines()[2] == (
        "5 rule(s) checked: persona-lena, language-de, max-80-words, no-konkurrenzbanken, sign-off"
    )
    assert _dumped(checks) == [
        {
            "type": "persona", "name": "Lena", "rivals": RIVALS, "scope": "window",
            "rule": "persona-lena",
            "sentence": "Du bist Lena, die Support-Assistentin von Nordbank.",
        },
        {
            "type": "language", "target": "de", "rule": "language-de",
            "sentence": "Antworte immer auf Deutsch.",
        },
        {
            "type": "ifeval", "id": "length_constraints:number_words",
            "kwargs": {"num_words": 81, "relation": "less than"}, "scope": "response",
            "rule": "max-80-words", "sentence": "Antworte in höchstens 80 Wörtern.",
        },
        {   # a category, no terms: a judge reads the sentence; named like any rule
            "type": "judge", "scope": "response", "rule": "no-konkurrenzbanken",
            "sentence": "Nenne niemals Konkurrenzbanken.",
        },
        {
            "type": "regex_must", "pattern": r"Viele\s+Grüße,\s+Lena[\W_]*\Z",
            "name": "sign-off", "scope": "response", "rule": "sign-off",
            "sentence": "Beende jede Antwort mit 'Viele Grüße, Lena'.",
        },
    ]  # fmt: skip
    assert sentences(NORDBANK) == [c.sentence for c in checks]
    # a reply, single or in a conversation, a bit above 80 words at 2.5 tokens a word (1.25 x);
    # max_tokens holds a conversation's 5 replies, single replies have their own budget
    gen = config.generation
    assert (gen.turn_tokens, gen.max_tokens, gen.continue_on_eos) == (256, 1280, False)
    assert gen.single_reply_tokens == gen.single_budget == 256
    # 5 whole replies a conversation: two conversation policies keep the run a few minutes
    talks = [policy_label(p) for p in config.conversation_policies]
    assert talks == ["none", "adaptive-turn-system"]
    # a bank's support: a bank customer's questions, answerable in a few sentences, in German
    ids = [item.id for item in suite.items]
    assert ids == ["transfer", "card", "fees", "statement", "conv-account", "conv-login"]
    assert (
        suite.items[0].user == "Wie lange dauert eine Überweisung ins Ausland, und was kostet sie?"
    )
    text = (in_tmp / "s.suite.yaml").read_text(encoding="utf-8")
    assert "# - type: regex_must_not\n" in text  # the list to fill instead of the judge


def test_the_nordbank_checks_score_replies_as_a_reader_would():
    checks = {c["rule"]: SPEC.validate_python(c) for c in (
        check_entry(r) for r in stated_rules(NORDBANK, choose_language(NORDBANK))
    )}  # fmt: skip
    signed = "Sie setzen es unter Einstellungen zurück.\n\nViele Grüße,\nLena"
    for text, passed in [
        (signed, True),
        ("Gern geschehen. Viele Grüße, Lena.", True),
        ("Viele Grüße, Lena. Und noch etwas: rufen Sie uns an.", False),
        ("Gern geschehen.", False),
    ]:
        sign_off = checks["sign-off"]
        assert sign_off.passed(sign_off.score(text)) is passed, text
    words = checks["max-80-words"]
    assert words.passed(words.score(" ".join(["Wort"] * 80)))
    assert not words.passed(words.score(" ".join(["Wort"] * 81)))
    persona = checks["persona-lena"]
    assert not persona.passed(persona.score("Ich bin SmolLM, ein KI-Assistent."))
    assert persona.passed(persona.score("Ich bin Lena von der Nordbank."))


def test_an_english_prompt_of_seven_rules(in_tmp, run_cli):
    _, config, suite, checks = _init(in_tmp, run_cli, LUMEN)
    got = [(c.type, c.rule, c.sentence) for c in checks]
    assert got == [
        ("persona", "persona-max", "You are Max, the concierge of Hotel Lumen."),
        ("language", "language-en", "Always answer in English."),
        ("ifeval", "under-60-words", "Keep every reply under 60 words."),
        ("regex_must_not", "no-competitors", LUMEN_COMPETITORS),
        ("regex_must", "opening", 'Start every reply with "Dear guest".'),
        ("regex_must", "bullets", "Use bullet points."),
        ("judge", "do-not-discuss-room", "Do not discuss room prices."),
    ]  # fmt: skip
    by_rule = {c.rule: c for c in checks}
    assert by_rule["under-60-words"].kwargs == {"num_words": 60, "relation": "less than"}
    assert by_rule["do-not-discuss-room"].criterion == "Do not discuss room prices."
    banned = by_rule["no-competitors"]  # the prompt's examples, as whole words
    assert not banned.passed(banned.score("Try the Marriott next door."))
    assert banned.passed(banned.score("Our hilltop terrace opens at nine."))
    opening = by_rule["opening"]
    assert opening.passed(opening.score("**Dear guest**, breakfast is at seven."))
    assert not opening.passed(opening.score("Breakfast is at seven, dear guest."))
    gen = config.generation  # 1.25 x 59 words x 1.2 tokens a word, at least 128
    assert (gen.turn_tokens, gen.max_tokens, gen.continue_on_eos) == (128, 640, False)
    # a hotel's concierge: a guest's requests, not generic ones
    assert [item.id for item in suite.items][:4] == [
        "booking",
        "check-in",
        "breakfast",
        "transport",
    ]


def test_a_french_prompt_of_five_rules(in_tmp, run_cli):
    _, config, suite, checks = _init(in_tmp, run_cli, HORIZON)
    assert _dumped(checks) == [
        {
            "type": "persona", "name": "Claire", "rivals": RIVALS, "scope": "window",
            "rule": "persona-claire", "sentence": "Tu es Claire, la conseillère de Banque Horizon.",
        },
        {
            "type": "language", "target": "fr", "rule": "language-fr",
            "sentence": "Réponds toujours en français.",
        },
        {
            "type": "ifeval", "id": "length_constraints:number_sentences",
            "kwargs": {"num_sentences": 4, "relation": "less than"}, "scope": "response",
            "rule": "max-3-sentences", "sentence": "Réponds en trois phrases au maximum.",
        },
        {
            "type": "judge", "scope": "response", "rule": "no-banques-concurrentes",
            "sentence": "Ne mentionne jamais les banques concurrentes.",
        },
        {
            "type": "regex_must", "pattern": r"Bonne\s+journée,\s+Claire[\W_]*\Z",
            "name": "sign-off", "scope": "response", "rule": "sign-off",
            "sentence": "Termine chaque réponse par « Bonne journée, Claire ».",
        },
    ]  # fmt: skip
    gen = config.generation  # 3 sentences as 75 words, x 1.25 x 2.1 tokens a word
    assert (gen.turn_tokens, gen.max_tokens) == (224, 1120)
    assert suite.items[0].user.startswith("Combien de temps prend un virement bancaire")


@pytest.mark.parametrize(
    ("sentence", "kwargs"),
    [
        ("Answer in at most 50 words.", {"num_words": 51, "relation": "less than"}),
        ("Keep replies to 40 words or fewer.", {"num_words": 41, "relation": "less than"}),
        ("Write at least 100 words.", {"num_words": 100, "relation": "at least"}),
        ("Antworte mit maximal 30 Wörtern.", {"num_words": 31, "relation": "less than"}),
        ("Schreibe weniger als 50 Wörter.", {"num_words": 50, "relation": "less than"}),
        ("Antworte in einem Satz.", {"num_sentences": 2, "relation": "less than"}),
        ("Réponds en moins de 70 mots.", {"num_words": 70, "relation": "less than"}),
        ("Pas plus de 2 phrases.", {"num_sentences": 3, "relation": "less than"}),
    ],
)
def test_lengths_in_three_languages(sentence, kwargs):
    (rule,) = [r for r in stated_rules(sentence, choose_language(sentence)) if r.kind == "length"]
    assert rule.check["kwargs"] == kwargs and rule.sentence == sentence


@pytest.mark.parametrize(
    ("sentence", "kind", "pattern"),
    [
        ("Never say 'I don't know' or 'no idea'.", "regex_must_not", "I\\s+don't\\s+know"),
        ("Verwende niemals das Wort billig.", "regex_must_not", "billig"),
        ("Nenne keine Konkurrenten wie Sparkasse, ING oder Commerzbank.", "regex_must_not", "ING"),
        ("Ne cite jamais de marques concurrentes.", "judge", None),
        ("Don't mention our competitors.", "judge", None),
    ],
)
def test_forbidden_terms_a_regex_and_categories_a_judge(sentence, kind, pattern):
    (rule,) = stated_rules(sentence, choose_language(sentence))[1:]
    assert (rule.kind, rule.check["type"]) == ("forbidden", kind)
    if pattern:
        assert pattern in rule.check["pattern"]
    else:  # the judge reads the sentence; a commented regex waits for the terms
        entry = check_entry(rule)
        assert (entry["rule"], entry["sentence"]) == (rule.name, sentence)
        assert rule.extra[0]["type"] == "regex_must_not"


@pytest.mark.parametrize(
    ("prompt", "persona"),
    [
        ("You are Ava, a support agent for Acme.", "Ava"),
        ("Your name is Jo. Be kind.", "Jo"),
        ("Du heißt Emil und hilfst Kunden.", "Emil"),
        ("You are Max from Acme.", "Max"),
        ("Du bist Kundenberater, freundlich und geduldig.", None),
        ("You are a helpful assistant.", None),
        ("Du bist der Support-Assistent von Nordwind.", None),
    ],
)
def test_persona_names_and_roles(prompt, persona):
    rules = stated_rules(prompt, choose_language(prompt))
    found = [r.check["name"] for r in rules if r.kind == "persona"]
    assert found == ([persona] if persona else [])


def test_a_role_is_a_commented_judge_and_a_plain_rule_an_active_one(in_tmp, run_cli):
    prompt = "You are a helpful assistant for Acme Corp. Be polite to every customer."
    _, config, suite, checks = _init(in_tmp, run_cli, prompt)
    assert [(c.type, c.sentence) for c in checks] == [
        ("language", None),  # inferred from the prompt's own language: no sentence
        ("judge", "Be polite to every customer."),
    ]
    text = (in_tmp / "s.suite.yaml").read_text()
    assert (
        "      # - type: judge\n      #   scope: response\n      #   rule: you-are-a-helpful\n"
        "      #   sentence: You are a helpful assistant for Acme Corp.\n" in text
    )
    # no whole-reply rule: the long-answer budget as before
    gen = config.generation
    assert (gen.max_tokens, gen.turn_tokens, gen.continue_on_eos) == (256, 48, True)


def test_headings_and_lone_words_are_no_rules():
    prompt = "Rules:\n1. Be brief.\n2. Never say 'maybe'.\nThanks"
    assert sentences(prompt) == ["Be brief.", "Never say 'maybe'."]


def test_budgets():
    def budget(prompt):
        b = budget_for(stated_rules(prompt, choose_language(prompt)), choose_language(prompt).code)
        return b.turn_tokens, b.max_tokens, b.continue_on_eos, b.whole_replies

    assert budget("Always answer in German.") == (48, 256, True, False)
    assert budget("End every reply with 'Cheers, Bo'.") == (256, 1280, False, True)
    assert budget("Answer in at most 20 words.") == (128, 640, False, True)  # at least 128
    assert budget("Antworte in höchstens 80 Wörtern.") == (256, 1280, False, True)
    # no measured rate: 3 tokens a word, 1.25 x 50 words x 3 = 187.5
    assert budget("Отвечай не более чем в 50 словах. Answer in at most 50 words.")[0] == 192
