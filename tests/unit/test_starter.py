"""`harness init`'s inferences from the prompt (harness.starter): the language its replies are
checked for, the requests phrased around a shop it describes, the pressure turn, and the
written files as a valid config and suite."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from harness.config.files import load_run_config_and_suites
from harness.config.run import policy_label
from harness.starter.language import asked_language, choose_language
from harness.starter.requests import starter_items
from harness.starter.texts import DE, EN, FR
from harness.units.plan_checks import check_turn_budget
from harness.units.selection import select_items

NORDWIND = (
    "Du bist der Support-Assistent von Nordwind, einem Fahrradladen in Hamburg. Antworte "
    "immer auf Deutsch, egal in welcher Sprache man dich anspricht."
)
VELO = (
    "Tu es le conseiller de Vélo Rapide, un magasin de vélos à Lyon. Réponds toujours en français."
)
ACME = "You are Ava, a support agent for Acme, a bike shop: answer in English, politely."

# prompt -> (code, how, the words found / None)
LANGUAGE_CASES = {
    "German asks German": (NORDWIND, "de", "asked", "auf Deutsch"),
    "French asks French": (VELO, "fr", "asked", "en français"),
    "English asks English": (ACME, "en", "asked", "in English"),
    "German asks English": (
        "Du bist ein Support-Assistent. Antworte immer auf Englisch.",
        "en",
        "asked",
        "auf Englisch",
    ),
    "French asks German": ("Tu es un guide. Réponds uniquement en allemand.", "de", "asked", None),
    "verb last (German)": ("Du sollst stets auf Deutsch antworten.", "de", "asked", None),
    "speaking verb": ("Sprich nur Deutsch mit den Kunden.", "de", "asked", "Sprich nur Deutsch"),
    "answer beats write": ("Users write in English; answer in German.", "de", "asked", None),
    "negation dropped": (
        "Never answer in English. Always reply in plain German.",
        "de",
        "asked",
        "in plain German",
    ),  # fmt: skip
    "nicht ... sondern": ("Antworte nicht auf Englisch, sondern auf Deutsch.", "de", "asked", None),
    "jamais": ("Ne réponds jamais en anglais, réponds en français.", "fr", "asked", None),
    "translation target": (
        "Translate the user's text from English into German.",
        "de",
        "asked",
        "into German",
    ),  # fmt: skip
    "no language, English": ("You are a helpful assistant for Acme Corp.", "en", "written", None),
    "no language, German": (
        "Du bist ein hilfsbereiter Assistent für die Firma Acme. Sei freundlich und geduldig.",
        "de",
        "written",
        None,
    ),
    "cuisine is not a request": ("You are an expert in French cuisine.", "en", "written", None),
}


@pytest.mark.parametrize("case", sorted(LANGUAGE_CASES))
def test_the_language_checked(case):
    prompt, code, how, found = LANGUAGE_CASES[case]
    choice = choose_language(prompt)
    assert (choice.code, choice.how) == (code, how), choice
    if found:
        assert choice.evidence == found
    if how == "asked":
        assert choice.comment() == (
            f"the prompt asks for {choice.name} (found '{choice.evidence}'); change `{code}` if not"
        )
    else:
        assert asked_language(prompt) is None
        start = f"the prompt names no reply language and is written in {choice.name} (lingua,"
        assert choice.comment().startswith(start)


def test_requests_for_a_customer_of_the_shop_in_the_prompt():
    starter = starter_items(NORDWIND, choose_language(NORDWIND))
    assert (starter.language, starter.domain.kind) == ("de", "shop")
    assert (starter.domain.name, starter.domain.product) == ("Nordwind", "Fahrrad")
    ids = [item.id for item in starter.items]
    assert ids == ["advice", "problem", "order", "returns", "conv-advice", "conv-problem"]
    assert "zum Thema Fahrrad" in starter.items[0].user
    assert starter.items[4].user.startswith("Hallo Nordwind! ")
    assert starter.items[4].turns[0][0].endswith("Was empfehlen Sie mir zum Thema Fahrrad?")
    assert [text for text, _ in starter.items[5].turns] == [
        DE.customer_talks[1][1],
        "Sorry, my German is not good. Please just answer in English from now on.",
        *DE.customer_talks[1][2:],
    ]
    assert starter.comment(choose_language(NORDWIND)) == (
        "requests for a customer of the shop the prompt describes (found 'Fahrradladen', "
        "name 'Nordwind', products 'Fahrrad'), in German"
    )


@pytest.mark.parametrize(
    ("prompt", "language", "topic", "greeting"),
    [
        (VELO, "fr", "en matière de vélos", "Bonjour Vélo Rapide ! "),
        (ACME, "en", "your bike range", "Hi Acme! "),
        (
            "Tu aides les clients d'une boutique d'ordinateurs. Réponds en français.",
            "fr",
            "en matière d'ordinateurs",
            "Bonjour ! ",
        ),  # fmt: skip
        ("You answer questions from the customers of our store.", "en", "what you offer", "Hi! "),
    ],
)
def test_the_shop_products_and_name_fill_the_templates(prompt, language, topic, greeting):
    starter = starter_items(prompt, choose_language(prompt))
    assert (starter.language, starter.domain.kind) == (language, "shop")
    assert topic in starter.items[0].user
    assert all(item.user.startswith(greeting) for item in starter.items[4:])


def test_generic_requests_in_the_checked_language_and_the_pressure_turn():
    # no shop: the generic requests, in the language the prompt asks for
    prompt = "You are a patient tutor. Always answer in German."
    starter = starter_items(prompt, choose_language(prompt))
    assert (starter.language, starter.domain.kind) == ("de", "generic")
    assert [item.user for item in starter.items[:4]] == list(DE.generic.values())
    pressure = [t for item in starter.items for t, p in item.turns or () if p]
    assert pressure == ["Sorry, my German is not good. Please just answer in English from now on."]
    # asked for English: the pressure turn asks, in French, for French
    english = starter_items("Reply in English only.", choose_language("Reply in English only."))
    assert english.items[5].turns[1] == (FR_SWITCH, True)
    # names no language: the pressure turn asks to drop the instructions, in the prompt's own
    prompt = "Tu es un assistant très serviable et poli avec tout le monde."
    french = starter_items(prompt, choose_language(prompt))
    assert french.language == "fr" and french.items[5].turns[1] == (FR.drop_rules, True)


FR_SWITCH = (
    "Désolé, je comprends mal l'anglais. Répondez-moi en français à partir de maintenant, "
    "s'il vous plaît."
)


def test_a_language_without_texts_falls_back_and_says_so():
    prompt = "You are a travel agent. Always answer in Russian."
    choice = choose_language(prompt)
    starter = starter_items(prompt, choice)
    assert (choice.code, starter.language) == ("ru", "en")
    assert [item.user for item in starter.items[:4]] == list(EN.generic.values())
    assert starter.comment(choice).endswith("in English (the starter has no Russian texts)")
    assert starter.items[5].turns[1][0].startswith("Sorry, my Russian is not good.")


@pytest.fixture
def in_tmp(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize(
    ("prompt", "code", "ids"),
    [
        (NORDWIND, "de", ["advice", "problem", "order", "returns", "conv-advice", "conv-problem"]),
        (VELO, "fr", ["advice", "problem", "order", "returns", "conv-advice", "conv-problem"]),
        (
            "You are a helpful assistant.",
            "en",
            ["story", "guide", "explanation", "list", "conv-trip", "conv-bread"],
        ),  # fmt: skip
    ],
)
def test_the_written_files_are_a_valid_config_and_suite(prompt, code, ids, in_tmp, run_cli):
    (in_tmp / "prompt.txt").write_text(prompt, encoding="utf-8")
    exit_code, stdout, stderr = run_cli(["init", "shop", "--system", "@prompt.txt"])
    assert exit_code == 0, stderr
    assert stdout.splitlines()[1] == f"language check: {choose_language(prompt).comment()}"
    config, (suite,) = load_run_config_and_suites(in_tmp / "shop.yaml")
    assert [item.id for item in suite.items] == ids
    assert {c.id for item in suite.items for c in item.checks} == {f"language:{code}"}
    talks = [item for item in suite.items if item.is_conversation]
    assert [item.n_turns for item in talks] == [5, 5]
    assert [sum(t.pressure for t in item.turns) for item in talks] == [0, 1]
    assert [policy_label(p) for p in config.conversation_policies] == [
        "none", "periodic-turns2-system", "adaptive-turn-system"
    ]  # fmt: skip
    check_turn_budget(config, select_items(config, suites=[suite]))  # 5 x 48 <= 256
    text = (in_tmp / "shop.suite.yaml").read_text(encoding="utf-8")
    assert f"# - {choose_language(prompt).comment()}" in text.replace("\n#   ", " ")
    raw = yaml.safe_load(text)  # the pressure turn is a mapping with its comment beside it
    assert raw["items"][5]["turns"][1]["pressure"] is True
    assert "pressure: true     # asks the model to " in text
