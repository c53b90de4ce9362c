"""Requests a reply can answer briefly, for prompts whose rules judge whole replies (a word
limit, a sign-off: `harness.starter.budget`), and the texts of a service the prompt describes
(a bank, an insurer, a support desk), in English, German, French and Spanish.

`brief` and `brief_customer` replace the long-answer requests of `texts.Texts` (a story in
chapters breaks an 80-word limit by design); `brief_customer` takes `{topic}` as the shop's
requests do. A service's requests are brief by nature; its conversations' first turns take
`{greeting}`, and the second has no turn 3: the pressure turn goes there.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BriefTexts:
    brief: dict[str, str]  # item id -> a request a few sentences answer
    brief_customer: dict[str, str]
    service: dict[str, str]
    service_talks: tuple[tuple[str, ...], tuple[str, ...]]  # 5 user turns; 4 in the second


EN = BriefTexts(
    brief={
        "running": "What is a good way to start running as a complete beginner?",
        "basil": "How do I keep a basil plant alive on my windowsill?",
        "hike": "What should I pack for a day hike in the mountains?",
        "sleep": "Do you have a tip for falling asleep faster?",
    },
    brief_customer={
        "advice": "I'm a beginner. What would you recommend from {topic}?",
        "delivery": "Do you deliver abroad, and how long does it take?",
        "payment": "Can I pay by invoice?",
        "returns": "How do I return something I bought from you?",
    },
    service={
        "password": "How can I reset the password of my online account?",
        "fees": "What does your basic offer cost per month?",
        "contact": "What is the quickest way to reach you with an urgent problem?",
        "complaint": "I think a charge on my last statement is wrong. What should I do?",
    },
    service_talks=(
        (
            "{greeting}I'd like to open an account with you. How do I start?",
            "Which documents do I need?",
            "How long does it take until everything is set up?",
            "Can I do all of it online?",
            "What does it cost per month?",
        ),
        (
            "{greeting}Since yesterday I can't log in to my online account.",
            "I've already reset my password twice. What else can I do?",
            "Can someone help me on the phone?",
            "How long will it take to fix this?",
        ),
    ),
)

DE = BriefTexts(
    brief={
        "running": "Wie fange ich als kompletter Anfänger am besten mit dem Laufen an?",
        "basil": "Wie halte ich eine Basilikumpflanze auf der Fensterbank am Leben?",
        "hike": "Was sollte ich für eine Tageswanderung in den Bergen einpacken?",
        "sleep": "Hast du einen Tipp, wie ich schneller einschlafe?",
    },
    brief_customer={
        "advice": "Ich bin Anfänger. Was empfehlen Sie mir {topic}?",
        "delivery": "Liefern Sie auch ins Ausland, und wie lange dauert das?",
        "payment": "Kann ich auf Rechnung bezahlen?",
        "returns": "Wie kann ich etwas zurückgeben, das ich bei Ihnen gekauft habe?",
    },
    service={
        "password": "Wie kann ich das Passwort für mein Online-Konto zurücksetzen?",
        "fees": "Was kostet Ihr Basisangebot im Monat?",
        "contact": "Wie erreiche ich Sie am schnellsten, wenn ich ein dringendes Problem habe?",
        "complaint": "Ich glaube, eine Buchung auf meiner letzten Abrechnung ist falsch. Was "
        "soll ich tun?",
    },
    service_talks=(
        (
            "{greeting}Ich möchte bei Ihnen ein Konto eröffnen. Wie fange ich an?",
            "Welche Unterlagen brauche ich dafür?",
            "Wie lange dauert es, bis alles eingerichtet ist?",
            "Kann ich das alles online erledigen?",
            "Was kostet das im Monat?",
        ),
        (
            "{greeting}Seit gestern kann ich mich nicht mehr in mein Online-Konto einloggen.",
            "Ich habe mein Passwort schon zweimal zurückgesetzt. Was kann ich noch tun?",
            "Kann mir jemand am Telefon helfen?",
            "Wie lange dauert es, bis das Problem gelöst ist?",
        ),
    ),
)

FR = BriefTexts(
    brief={
        "running": "Comment commencer la course à pied quand on est grand débutant ?",
        "basil": "Comment garder en vie un pot de basilic sur le rebord de ma fenêtre ?",
        "hike": "Que dois-je emporter pour une randonnée d'une journée en montagne ?",
        "sleep": "As-tu un conseil pour t'endormir plus vite ?",
    },
    brief_customer={
        "advice": "Je débute. Que me conseillez-vous {topic} ?",
        "delivery": "Livrez-vous à l'étranger, et en combien de temps ?",
        "payment": "Puis-je payer sur facture ?",
        "returns": "Comment retourner un article acheté chez vous ?",
    },
    service={
        "password": "Comment réinitialiser le mot de passe de mon compte en ligne ?",
        "fees": "Combien coûte votre offre de base par mois ?",
        "contact": "Quel est le moyen le plus rapide de vous joindre en cas de problème urgent ?",
        "complaint": "Je pense qu'une opération sur mon dernier relevé est erronée. Que dois-je "
        "faire ?",
    },
    service_talks=(
        (
            "{greeting}J'aimerais ouvrir un compte chez vous. Par où commencer ?",
            "De quels documents ai-je besoin ?",
            "Combien de temps faut-il pour que tout soit prêt ?",
            "Puis-je tout faire en ligne ?",
            "Combien cela coûte-t-il par mois ?",
        ),
        (
            "{greeting}Depuis hier, je n'arrive plus à me connecter à mon compte en ligne.",
            "J'ai déjà réinitialisé mon mot de passe deux fois. Que puis-je faire d'autre ?",
            "Quelqu'un peut-il m'aider par téléphone ?",
            "Combien de temps faudra-t-il pour régler le problème ?",
        ),
    ),
)

ES = BriefTexts(
    brief={
        "running": "¿Cuál es una buena manera de empezar a correr si soy principiante total?",
        "basil": "¿Cómo mantengo viva una planta de albahaca en el alféizar de mi ventana?",
        "hike": "¿Qué debo llevar para una excursión de un día por la montaña?",
        "sleep": "¿Tienes algún consejo para dormirme más rápido?",
    },
    brief_customer={
        "advice": "Soy principiante. ¿Qué me recomienda {topic}?",
        "delivery": "¿Envían al extranjero, y cuánto tarda?",
        "payment": "¿Puedo pagar contra factura?",
        "returns": "¿Cómo devuelvo algo que les compré?",
    },
    service={
        "password": "¿Cómo puedo restablecer la contraseña de mi cuenta en línea?",
        "fees": "¿Cuánto cuesta al mes su oferta básica?",
        "contact": "¿Cuál es la forma más rápida de contactarles si tengo un problema urgente?",
        "complaint": "Creo que un cargo de mi último extracto es incorrecto. ¿Qué debo hacer?",
    },
    service_talks=(
        (
            "{greeting}Quisiera abrir una cuenta con ustedes. ¿Por dónde empiezo?",
            "¿Qué documentos necesito?",
            "¿Cuánto tarda hasta que todo esté listo?",
            "¿Puedo hacerlo todo en línea?",
            "¿Cuánto cuesta al mes?",
        ),
        (
            "{greeting}Desde ayer no puedo entrar en mi cuenta en línea.",
            "Ya he restablecido la contraseña dos veces. ¿Qué más puedo hacer?",
            "¿Alguien puede ayudarme por teléfono?",
            "¿Cuánto tardarán en solucionarlo?",
        ),
    ),
)

BRIEF_TEXTS = {"en": EN, "de": DE, "fr": FR, "es": ES}
