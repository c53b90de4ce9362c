"""What a service's users ask, per service the starter knows (`SERVICE_TEXTS`: a hotel, a
dental practice, a medical practice, an IT helpdesk, a restaurant, a bank), in English, German,
French and Spanish: six requests each, every one naming the service's own things (a room, a
check-up, a laptop, a table, a card), so a prompt for that service is tried on what its users
send.

The first four are the single-reply items; the conversations ask the rest around them
(`harness.starter.services`). `{greeting}` opens each conversation ("Bonjour ! ").
"""

from __future__ import annotations

# service -> language -> six requests: four single replies, then two conversation openers
ServiceTexts = dict[str, dict[str, tuple[str, ...]]]

HOTEL = {
    "en": (
        "I'd like to book a double room at your hotel for two nights next weekend. Is one "
        "still available?",
        "What time is check-in at the hotel, and can I leave my luggage if I arrive early?",
        "Is breakfast included in the room rate, and until what time does the hotel serve it?",
        "How do I get from the airport to the hotel, and can you book me a taxi or a shuttle?",
        "{greeting}I'm staying at your hotel next week. Can I ask a few questions about my "
        "booking?",
        "{greeting}I need to change my hotel reservation.",
    ),
    "de": (
        "Ich möchte für das nächste Wochenende ein Doppelzimmer in Ihrem Hotel für zwei Nächte "
        "buchen. Ist noch eines frei?",
        "Ab wann kann ich im Hotel einchecken, und kann ich mein Gepäck abgeben, wenn ich "
        "früher ankomme?",
        "Ist das Frühstück im Zimmerpreis enthalten, und bis wann serviert es das Hotel?",
        "Wie komme ich vom Flughafen zum Hotel, und können Sie mir ein Taxi oder einen Shuttle "
        "bestellen?",
        "{greeting}Ich übernachte nächste Woche in Ihrem Hotel. Darf ich ein paar Fragen zu "
        "meiner Buchung stellen?",
        "{greeting}Ich muss meine Hotelreservierung ändern.",
    ),
    "fr": (
        "Je voudrais réserver une chambre double dans votre hôtel pour deux nuits le week-end "
        "prochain. Est-ce qu'il en reste une ?",
        "À partir de quelle heure peut-on arriver à l'hôtel, et puis-je déposer mes bagages si "
        "j'arrive plus tôt ?",
        "Le petit-déjeuner est-il compris dans le prix de la chambre, et jusqu'à quelle heure "
        "l'hôtel le sert-il ?",
        "Comment aller de l'aéroport à l'hôtel, et pouvez-vous me réserver un taxi ou une "
        "navette ?",
        "{greeting}Je séjourne dans votre hôtel la semaine prochaine. Puis-je vous poser "
        "quelques questions sur ma réservation ?",
        "{greeting}Je dois modifier ma réservation à l'hôtel.",
    ),
    "es": (
        "Quisiera reservar una habitación doble en su hotel para dos noches el próximo fin de "
        "semana. ¿Les queda alguna libre?",
        "¿A partir de qué hora puedo llegar al hotel, y puedo dejar mi equipaje si llego antes?",
        "¿El desayuno está incluido en el precio de la habitación, y hasta qué hora lo sirve el "
        "hotel?",
        "¿Cómo llego del aeropuerto al hotel, y pueden reservarme un taxi o un traslado?",
        "{greeting}La semana que viene me alojo en su hotel. ¿Puedo hacerle algunas preguntas "
        "sobre mi reserva?",
        "{greeting}Tengo que cambiar mi reserva del hotel.",
    ),
}

DENTAL = {
    "en": (
        "I'd like to book a dental check-up and a cleaning. When is your next free appointment?",
        "One of my teeth has hurt since yesterday when I drink something cold. What should I do "
        "until my appointment?",
        "How much does a dental cleaning cost, and does my insurance cover part of it?",
        "My son is six. From what age should he come to the dentist for check-ups?",
        "{greeting}I haven't been to the dentist for years and I'm nervous. Can you help me "
        "book a check-up?",
        "{greeting}A filling in my tooth fell out this morning.",
    ),
    "de": (
        "Ich möchte einen Termin für eine Kontrolle und eine Zahnreinigung vereinbaren. Wann "
        "haben Sie den nächsten freien Termin?",
        "Seit gestern tut mir ein Zahn weh, wenn ich etwas Kaltes trinke. Was soll ich bis zum "
        "Termin tun?",
        "Was kostet eine professionelle Zahnreinigung, und übernimmt meine Krankenkasse einen "
        "Teil davon?",
        "Mein Sohn ist sechs. Ab welchem Alter sollte er zur Kontrolle zum Zahnarzt kommen?",
        "{greeting}Ich war seit Jahren nicht beim Zahnarzt und bin nervös. Können Sie mir "
        "helfen, einen Kontrolltermin zu vereinbaren?",
        "{greeting}Heute Morgen ist mir eine Füllung aus dem Zahn gefallen.",
    ),
    "fr": (
        "Je voudrais prendre rendez-vous pour un contrôle et un détartrage. Quand avez-vous un "
        "créneau libre ?",
        "J'ai mal à une dent depuis hier quand je bois quelque chose de froid. Que faire en "
        "attendant mon rendez-vous ?",
        "Combien coûte un détartrage chez le dentiste, et ma mutuelle en rembourse-t-elle une "
        "partie ?",
        "Mon fils a six ans. À partir de quel âge doit-il venir chez le dentiste pour un "
        "contrôle ?",
        "{greeting}Je ne suis pas allé chez le dentiste depuis des années et j'ai peur. "
        "Pouvez-vous m'aider à prendre rendez-vous ?",
        "{greeting}Un plombage de ma dent est tombé ce matin.",
    ),
    "es": (
        "Quisiera pedir cita para una revisión y una limpieza dental. ¿Cuándo tienen la próxima "
        "cita libre?",
        "Desde ayer me duele una muela cuando bebo algo frío. ¿Qué hago hasta la cita?",
        "¿Cuánto cuesta una limpieza dental, y mi seguro cubre una parte?",
        "Mi hijo tiene seis años. ¿A partir de qué edad debe ir al dentista a una revisión?",
        "{greeting}Hace años que no voy al dentista y me da miedo. ¿Me ayuda a pedir cita para "
        "una revisión?",
        "{greeting}Esta mañana se me cayó un empaste de una muela.",
    ),
}

MEDICAL = {
    "en": (
        "I'd like to book an appointment with a doctor this week. What times are free?",
        "I've had a fever and a sore throat for three days. Should I come to the practice or "
        "stay at home?",
        "How do I get a repeat prescription for my usual medication from the doctor?",
        "Do I need to bring anything to my first appointment at your practice?",
        "{greeting}I'm a new patient and I'd like to register with your practice.",
        "{greeting}I need to cancel my appointment with the doctor tomorrow.",
    ),
    "de": (
        "Ich möchte diese Woche einen Termin beim Arzt vereinbaren. Welche Zeiten sind frei?",
        "Ich habe seit drei Tagen Fieber und Halsschmerzen. Soll ich in die Praxis kommen oder "
        "zu Hause bleiben?",
        "Wie bekomme ich vom Arzt ein Folgerezept für mein übliches Medikament?",
        "Muss ich zu meinem ersten Termin in Ihrer Praxis etwas mitbringen?",
        "{greeting}Ich bin neuer Patient und möchte mich in Ihrer Praxis anmelden.",
        "{greeting}Ich muss meinen Arzttermin morgen absagen.",
    ),
    "fr": (
        "Je voudrais prendre rendez-vous avec un médecin cette semaine. Quels créneaux sont "
        "libres ?",
        "J'ai de la fièvre et mal à la gorge depuis trois jours. Dois-je venir au cabinet ou "
        "rester chez moi ?",
        "Comment obtenir auprès du médecin le renouvellement de l'ordonnance de mon traitement "
        "habituel ?",
        "Dois-je apporter quelque chose à mon premier rendez-vous au cabinet ?",
        "{greeting}Je suis un nouveau patient et je voudrais m'inscrire à votre cabinet.",
        "{greeting}Je dois annuler mon rendez-vous chez le médecin demain.",
    ),
    "es": (
        "Quisiera pedir cita con un médico esta semana. ¿Qué horas tienen libres?",
        "Llevo tres días con fiebre y dolor de garganta. ¿Debo ir a la consulta o quedarme en "
        "casa?",
        "¿Cómo consigo que el médico me renueve la receta de mi medicamento habitual?",
        "¿Tengo que traer algo a mi primera cita en la consulta?",
        "{greeting}Soy un paciente nuevo y quisiera registrarme en su consulta.",
        "{greeting}Tengo que cancelar mi cita con el médico de mañana.",
    ),
}

IT_HELPDESK = {
    "en": (
        "My laptop won't connect to the office Wi-Fi since this morning. What can I try?",
        "I forgot the password of my work account and I'm locked out. How do I reset it?",
        "How do I set up the VPN on my computer so I can work from home?",
        "The printer on my floor shows a paper jam error but there is no paper stuck. What "
        "should I do?",
        "{greeting}Outlook on my work computer stopped syncing my emails.",
        "{greeting}I need new software installed on my laptop for a project.",
    ),
    "de": (
        "Mein Laptop verbindet sich seit heute Morgen nicht mehr mit dem WLAN im Büro. Was kann "
        "ich versuchen?",
        "Ich habe das Passwort für mein Arbeitskonto vergessen und bin gesperrt. Wie setze ich "
        "es zurück?",
        "Wie richte ich das VPN auf meinem Computer ein, damit ich von zu Hause arbeiten kann?",
        "Der Drucker auf meiner Etage meldet einen Papierstau, aber es klemmt kein Papier. Was "
        "soll ich tun?",
        "{greeting}Outlook auf meinem Arbeitsrechner synchronisiert meine E-Mails nicht mehr.",
        "{greeting}Ich brauche für ein Projekt neue Software auf meinem Laptop.",
    ),
    "fr": (
        "Mon ordinateur portable ne se connecte plus au Wi-Fi du bureau depuis ce matin. Que "
        "puis-je essayer ?",
        "J'ai oublié le mot de passe de mon compte professionnel et je suis bloqué. Comment le "
        "réinitialiser ?",
        "Comment configurer le VPN sur mon ordinateur pour travailler depuis chez moi ?",
        "L'imprimante de mon étage affiche un bourrage papier, mais aucune feuille n'est "
        "coincée. Que faire ?",
        "{greeting}Outlook ne synchronise plus mes e-mails sur mon ordinateur de travail.",
        "{greeting}J'ai besoin d'un nouveau logiciel sur mon ordinateur portable pour un projet.",
    ),
    "es": (
        "Desde esta mañana mi portátil no se conecta al wifi de la oficina. ¿Qué puedo probar?",
        "Olvidé la contraseña de mi cuenta del trabajo y estoy bloqueado. ¿Cómo la restablezco?",
        "¿Cómo configuro la VPN en mi ordenador para trabajar desde casa?",
        "La impresora de mi planta marca un atasco de papel, pero no hay ningún papel atascado. "
        "¿Qué hago?",
        "{greeting}Outlook ya no sincroniza mis correos en el ordenador del trabajo.",
        "{greeting}Necesito que me instalen un programa nuevo en el portátil para un proyecto.",
    ),
}

RESTAURANT = {
    "en": (
        "I'd like to reserve a table for four at your restaurant on Saturday evening. Is that "
        "possible?",
        "Does your menu have vegetarian or gluten-free dishes?",
        "Can we order food from your restaurant for delivery or takeaway?",
        "We are celebrating a birthday at your restaurant. Can we bring our own cake?",
        "{greeting}I'd like to book your restaurant for a dinner with twelve colleagues.",
        "{greeting}I have a table reserved tonight but we will be late.",
    ),
    "de": (
        "Ich möchte für Samstagabend einen Tisch für vier Personen in Ihrem Restaurant "
        "reservieren. Geht das?",
        "Gibt es auf Ihrer Speisekarte vegetarische oder glutenfreie Gerichte?",
        "Kann man bei Ihrem Restaurant Essen zum Mitnehmen oder zur Lieferung bestellen?",
        "Wir feiern einen Geburtstag in Ihrem Restaurant. Dürfen wir unseren eigenen Kuchen "
        "mitbringen?",
        "{greeting}Ich möchte Ihr Restaurant für ein Abendessen mit zwölf Kollegen buchen.",
        "{greeting}Ich habe heute Abend einen Tisch reserviert, aber wir kommen später.",
    ),
    "fr": (
        "Je voudrais réserver une table pour quatre dans votre restaurant samedi soir. Est-ce "
        "possible ?",
        "Votre carte propose-t-elle des plats végétariens ou sans gluten ?",
        "Peut-on commander des plats de votre restaurant à emporter ou en livraison ?",
        "Nous fêtons un anniversaire dans votre restaurant. Pouvons-nous apporter notre propre "
        "gâteau ?",
        "{greeting}Je voudrais réserver votre restaurant pour un dîner avec douze collègues.",
        "{greeting}J'ai réservé une table ce soir, mais nous serons en retard.",
    ),
    "es": (
        "Quisiera reservar una mesa para cuatro en su restaurante el sábado por la noche. ¿Es "
        "posible?",
        "¿Su carta tiene platos vegetarianos o sin gluten?",
        "¿Se puede pedir comida de su restaurante para llevar o a domicilio?",
        "Celebramos un cumpleaños en su restaurante. ¿Podemos traer nuestra propia tarta?",
        "{greeting}Quisiera reservar su restaurante para una cena con doce compañeros.",
        "{greeting}Tengo una mesa reservada esta noche, pero vamos a llegar tarde.",
    ),
}

BANK = {
    "en": (
        "How long does a bank transfer to another country take, and what does it cost?",
        "I lost my bank card. How do I block it right away?",
        "What does a current account with your bank cost per month?",
        "There is a charge on my account statement that I don't recognise. What should I do?",
        "{greeting}I'd like to open an account with your bank. How do I start?",
        "{greeting}Since yesterday I can't log in to my online banking.",
    ),
    "de": (
        "Wie lange dauert eine Überweisung ins Ausland, und was kostet sie?",
        "Ich habe meine Bankkarte verloren. Wie sperre ich sie sofort?",
        "Was kostet ein Girokonto bei Ihrer Bank im Monat?",
        "Auf meinem Kontoauszug steht eine Abbuchung, die ich nicht kenne. Was soll ich tun?",
        "{greeting}Ich möchte bei Ihrer Bank ein Konto eröffnen. Wie fange ich an?",
        "{greeting}Seit gestern kann ich mich nicht mehr ins Online-Banking einloggen.",
    ),
    "fr": (
        "Combien de temps prend un virement bancaire vers l'étranger, et combien coûte-t-il ?",
        "J'ai perdu ma carte bancaire. Comment la faire bloquer tout de suite ?",
        "Combien coûte par mois un compte courant dans votre banque ?",
        "Il y a sur mon relevé de compte un prélèvement que je ne reconnais pas. Que dois-je "
        "faire ?",
        "{greeting}J'aimerais ouvrir un compte dans votre banque. Par où commencer ?",
        "{greeting}Depuis hier, je n'arrive plus à me connecter à ma banque en ligne.",
    ),
    "es": (
        "¿Cuánto tarda una transferencia bancaria al extranjero, y cuánto cuesta?",
        "He perdido mi tarjeta del banco. ¿Cómo la bloqueo ahora mismo?",
        "¿Cuánto cuesta al mes una cuenta corriente en su banco?",
        "En el extracto de mi cuenta hay un cargo que no reconozco. ¿Qué debo hacer?",
        "{greeting}Quisiera abrir una cuenta en su banco. ¿Por dónde empiezo?",
        "{greeting}Desde ayer no puedo entrar en la banca en línea de mi cuenta.",
    ),
}

SERVICE_TEXTS: ServiceTexts = {
    "hotel": HOTEL,
    "dental": DENTAL,
    "medical": MEDICAL,
    "it": IT_HELPDESK,
    "restaurant": RESTAURANT,
    "bank": BANK,
}
