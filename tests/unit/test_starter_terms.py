"""`harness init`'s forbidden terms (harness.starter.rules): the regex it writes matches a term
however a reply leads into it (with or without the article or preposition the prompt named it
with, a contraction such as "zur" or "beim", in any case) in every language init reads rules in
(English, German, French, Spanish), and leaves innocent sentences alone. Each reply is scored
by the check the suite would run (`regex_must_not` built from the written entry)."""

from __future__ import annotations

import pytest
from pydantic import TypeAdapter

from harness.checks import CheckSpec
from harness.starter.language import choose_language
from harness.starter.rules import stated_rules

SPEC = TypeAdapter(CheckSpec)

# prompt sentence -> (replies that name a term: must fail, innocent replies: must pass)
CASES = {
    "Nenne niemals Konkurrenzbanken wie die Sparkasse oder die ING.": (
        [
            "Das können Sie auch von der Sparkasse bekommen.",
            "Gehen Sie doch zur Sparkasse um die Ecke.",
            "Bei der ING ist das Tagesgeldkonto kostenlos.",
            "Sparkasse und Volksbank bieten das auch an.",
            "Ein Konto bei der SPARKASSE kostet mehr.",
            "Die ing hat ähnliche Konditionen.",
            "Beim Vergleich mit der Sparkasse schneiden wir gut ab.",
            "Die Sparkassen haben längere Öffnungszeiten.",
        ],
        [
            "Ihr Zahlungseingang wird heute gebucht.",
            "Das Sparkassenbuch gibt es bei uns nicht, aber ein Sparkonto.",
            "Ich helfe Ihnen gern beim Einrichten des Online-Bankings.",
            "Viele Grüße, Lena",
        ],
    ),
    "Never mention competitors such as the Grand Hotel or Seaview Inn.": (
        [
            "You could also try the Grand Hotel next door.",
            "Guests of Seaview Inn often ask us the same.",
            "Unlike at Grand Hotel, breakfast is included.",
            "seaview inn's rooms are smaller.",
            "We are cheaper than the grand   hotel.",
        ],
        [
            "Our hotel has a grand view of the sea.",
            "Breakfast is served from seven to ten.",
            "The inn down the road is closed.",
        ],
    ),
    "Ne mentionne jamais les banques concurrentes comme la Société Générale ou l'ING.": (
        [
            "Vous pouvez aussi ouvrir un compte à la Société Générale.",
            "Les clients de l'ING paient moins de frais.",
            "C'est moins cher qu'à la société générale.",
            "La Societe Generale propose la même chose.",
            "Chez ING, ce service est gratuit.",
            "Les tarifs d'ING sont différents.",
        ],
        [
            "La société vous répondra sous deux jours.",
            "Nos conditions générales sont en ligne.",
            "Le virement est immédiat.",
        ],
    ),
    "Nunca menciones otras clínicas como la Clínica Sonrisa o el Centro Dental Luna.": (
        [
            "También puede pedir cita en la Clínica Sonrisa.",
            "Los pacientes del Centro Dental Luna pagan más.",
            "Vaya al centro dental luna si tiene prisa.",
            "En CLÍNICA SONRISA hacen limpiezas.",
        ],
        [
            "Nuestra clínica abre a las nueve.",
            "Una sonrisa sana empieza con una buena limpieza.",
            "La luna de miel no es motivo de urgencia dental.",
        ],
    ),
}


@pytest.mark.parametrize("sentence", list(CASES))
def test_a_forbidden_term_matches_however_a_reply_names_it(sentence):
    (rule,) = [r for r in stated_rules(sentence, choose_language(sentence)) if r.active][1:]
    assert (rule.kind, rule.check["type"]) == ("forbidden", "regex_must_not")
    check = SPEC.validate_python(rule.check)
    naming, innocent = CASES[sentence]
    failed = [reply for reply in naming if check.score(reply).value != 0.0]
    assert failed == [], f"{rule.check['pattern']} passes replies naming a term"
    flagged = [reply for reply in innocent if check.score(reply).value != 1.0]
    assert flagged == [], f"{rule.check['pattern']} fails innocent replies"


@pytest.mark.parametrize(
    ("sentence", "naming", "innocent"),
    [
        # a capitalised article is part of the name; a quoted phrase stays whole unless a name
        # follows its article
        ("Never mention competitors such as De Beers.", "Ask De Beers.", "Two cold beers."),
        ("Never say 'a lot'.", "I like it a lot.", "The parking lot is free."),
        ("Nenne niemals 'die Sparkasse'.", "Fragen Sie bei der Sparkasse.", "Die Kasse ist zu."),
    ],
)
def test_names_keep_their_own_articles_and_quotes_stay_whole(sentence, naming, innocent):
    (rule,) = [r for r in stated_rules(sentence, choose_language(sentence)) if r.active][1:]
    check = SPEC.validate_python(rule.check)
    assert (check.score(naming).value, check.score(innocent).value) == (0.0, 1.0)
