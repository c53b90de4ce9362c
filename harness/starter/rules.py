"""The rules a system prompt states, each as the check `harness init` writes for it.

The prompt is split into sentences, and each sentence is read for the rules the check registry
can verify (`StatedRule`), in English, German and French (the words: `rule_words`):

- the reply language (`language`, the sentence `starter.language` found the request in);
- a length in words or sentences ("höchstens 80 Wörter", "at most 3 sentences", "en moins de
  50 mots": IFEval `length_constraints:number_words` / `number_sentences`, whole replies;
  "at most N" is written as IFEval's "less than N + 1");
- a required sign-off or opening, quoted in the prompt ("Beende jede Antwort mit 'Viele
  Grüße, Lena'"): `regex_must` on the whole reply, anchored at its end (start), with any run of
  spaces or line breaks where the phrase has a space and trailing punctuation allowed. IFEval's
  `startend:end_checker` would fail "Viele Grüße,\\nLena" and "..., Lena." — replies a user
  reads as signed — and IFEval has no checker for an opening;
- forbidden terms ("Never mention 'Acme'", "Nenne niemals Konkurrenzbanken wie X oder Y"): the
  terms the prompt names (quoted, or listed after "such as" / "wie" / "comme" / a colon) as a
  `regex_must_not` of whole words. A prompt that names a category and no terms ("Nenne
  niemals Konkurrenzbanken") gets a judge check with the sentence as its rule, and a
  commented `regex_must_not` to fill with the terms: a list init made up would pass every
  reply that names a term it left out, so a category is judged until the user lists it;
- the persona's name ("Du bist Lena, die ...", "Your name is Ava"): `persona` per window with
  the names models give themselves as rivals (a window that calls the assistant SmolLM has
  dropped the persona);
- formats: JSON (IFEval `detectable_format:json_format`), bullet lists (a `regex_must` /
  `regex_must_not` for list lines; IFEval `number_bullet_lists` when a count is given),
  lowercase (IFEval, English prompts) and no commas (IFEval `punctuation:no_comma`).

Every other sentence becomes a judge check with the sentence as its rule, except one that only
says who the assistant is ("You are a helpful assistant."): a role, written as a commented
judge check. Each check carries `rule:` (its short name) and `sentence:` (the prompt's sentence
it came from, which is what a judge check judges).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from harness.starter import rule_words as w
from harness.starter.language import Choice, fold

# A sentence ends at . ! ? ; or a line break, followed by space (a quote or bracket may
# close first); a period inside a quoted phrase or "z. B." is kept by the space rule only
# where no space follows.
SENTENCE = re.compile(r"[^.!?;\n]+(?:[.!?;]+[\"'»“”’)]*|$)", re.M)


@dataclass(frozen=True)
class StatedRule:
    """One rule of the prompt: the check written for it, what was found, and whether the
    check is active (`active`) or a commented suggestion."""

    name: str  # the rule's short name
    kind: str  # language, length, end, start, forbidden, persona, format, judge, role
    sentence: str | None  # the prompt's sentence (None: inferred, as a language from lingua)
    check: dict[str, Any]
    found: str  # what the check was made from, for the comment above it
    active: bool = True
    note: str = ""  # what the user should know (a list to fill, a strict reading)
    extra: tuple[dict[str, Any], ...] = field(default=())  # commented alternatives


BOUND_NAMES = {"at_least": "min", "under": "under", "at_most": "max"}


def sentences(prompt: str) -> list[str]:
    """The prompt's sentences, stripped, each as written (quotes kept); a heading ("Rules:")
    or a lone word states no rule and is left out."""
    out = []
    for match in SENTENCE.finditer(prompt):
        text = match.group().strip()
        if re.search(r"[^\W\d_]", text):
            out.append(text)
    return [s for s in _rejoin_quotes(out) if len(s.split()) > 1 and not s.endswith(":")]


def _rejoin_quotes(parts: list[str]) -> list[str]:
    """Sentences split inside a quoted phrase ('Bis bald. Ihr Team') joined back."""
    out: list[str] = []
    for part in parts:
        if out and _open_quote(out[-1]):
            out[-1] = f"{out[-1]} {part}"
        else:
            out.append(part)
    return out


def _open_quote(text: str) -> bool:
    stripped = re.sub(r"(?<=\w)['’](?=\w)", "", text)  # apostrophes: "l'assistant", "don't"
    pairs = ("„“", "«»", "“”", "‚‘")
    odd_straight = stripped.count('"') % 2 == 1 or stripped.count("'") % 2 == 1
    return odd_straight or any(stripped.count(a) > stripped.count(b) for a, b in pairs)


def slug(text: str, limit: int = 4) -> str:
    """A short ASCII name from the first words of `text`: 'Nenne niemals X' -> 'nenne-niemals-x'."""
    found = re.findall(r"[a-z0-9]+", fold(text))
    return "-".join(found[:limit]) or "rule"


def _number(token: str) -> int:
    return int(token) if token.isdigit() else w.NUMBER_WORDS[token]


def length_rules(sentence: str) -> list[StatedRule]:
    """A stated length in words or sentences, as the IFEval checker of that unit."""
    folded, rules = fold(sentence), []
    for unit, instruction in (("words", "number_words"), ("sentences", "number_sentences")):
        for pattern, bound in w.length_patterns(unit):
            match = pattern.search(folded)
            if not match:
                continue
            n = _number(match.group(1))
            relation, limit = ("at least", n) if bound == "at_least" else ("less than", n)
            if bound == "at_most":
                limit = n + 1
            name = f"{BOUND_NAMES[bound]}-{n}-{unit}"
            kwarg = "num_words" if unit == "words" else "num_sentences"
            check = {
                "type": "ifeval",
                "id": f"length_constraints:{instruction}",
                "kwargs": {kwarg: limit, "relation": relation},
            }
            meaning = f"{relation} {limit} {unit}" + (
                f" (= at most {n})" if bound == "at_most" else ""
            )
            said = _original(sentence, folded, match)
            rules.append(StatedRule(name, "length", sentence, check, f"'{said}': {meaning}"))
            break
    return rules


def _original(sentence: str, folded: str, match: re.Match[str]) -> str:
    """The words of `sentence` a match in its folded form found (folded where 'ß' -> 'ss'
    moved the positions)."""
    return sentence[match.start() : match.end()] if len(folded) == len(sentence) else match.group()


def quoted(sentence: str) -> list[str]:
    return [next(g for g in m.groups() if g) for m in w.QUOTED.finditer(sentence)]


def _phrase_pattern(phrase: str) -> str:
    """The phrase as a regex: any whitespace run where it has one, its words escaped."""
    return r"\s+".join(re.escape(part) for part in phrase.split())


def edge_rules(sentence: str) -> list[StatedRule]:
    """A quoted sign-off or opening the sentence requires."""
    phrases, folded = quoted(sentence), fold(sentence)
    if not phrases:
        return []
    phrase = phrases[-1].strip()
    if w.END_VERBS.search(folded):
        pattern = _phrase_pattern(phrase) + r"[\W_]*\Z"
        check = {"type": "regex_must", "pattern": pattern, "name": "sign-off", "scope": "response"}
        found = f"'{phrase}' at the end of every reply"
        note = "line breaks for spaces and a final '.', '!' or emoji pass"
        return [StatedRule("sign-off", "end", sentence, check, found, note=note)]
    if w.START_VERBS.search(folded):
        pattern = r"\A[\W_]*" + _phrase_pattern(phrase)
        check = {"type": "regex_must", "pattern": pattern, "name": "opening", "scope": "response"}
        found = f"'{phrase}' at the start of every reply"
        return [StatedRule("opening", "start", sentence, check, found)]
    return []


def persona_rules(sentence: str) -> list[StatedRule]:
    """The persona's name, kept in every window: no window gives the assistant a rival name."""
    match = w.PERSONA_NAMED.search(sentence) or w.PERSONA_IS.search(sentence)
    if not match or w.NOT_PERSONA.search(fold(match.group(1))):
        return []
    name = match.group(1)
    rivals = [r for r in w.ASSISTANT_NAMES if fold(r) != fold(name)]
    check = {"type": "persona", "name": name, "rivals": rivals, "scope": "window"}
    found = f"'{match.group()}': no window calls the assistant {', '.join(rivals[:3])}, ..."
    return [StatedRule(f"persona-{slug(name, 1)}", "persona", sentence, check, found)]


def format_rules(sentence: str) -> list[StatedRule]:
    folded, rules = fold(sentence), []
    negated = bool(w.NEGATION.search(folded))
    if w.JSON_FORMAT.search(folded) and not negated:
        check = {"type": "ifeval", "id": "detectable_format:json_format"}
        rules.append(StatedRule("json", "format", sentence, check, "'JSON': the reply is JSON"))
    if w.BULLETS.search(folded):
        count = re.search(rf"\b(?:exactly|genau|exactement)\s+{w._NUMBER}\b", folded)
        if count and not negated:
            n = _number(count.group(1))
            check = {
                "type": "ifeval",
                "id": "detectable_format:number_bullet_lists",
                "kwargs": {"num_bullets": n},
            }
            rules.append(StatedRule(f"{n}-bullets", "format", sentence, check, f"{n} bullets"))
        else:
            kind = "regex_must_not" if negated else "regex_must"
            name = "no-bullets" if negated else "bullets"
            check = {"type": kind, "pattern": r"(?m)^\s*(?:[-*•]|\d+[.)])\s+\S", "name": name}
            check["scope"] = "response"
            found = "no line starts a list" if negated else "a bullet list in every reply"
            rules.append(StatedRule(name, "format", sentence, check, found))
    if w.LOWERCASE.search(folded) and not negated:
        check = {"type": "ifeval", "id": "change_case:english_lowercase"}
        rules.append(StatedRule("lowercase", "format", sentence, check, "lowercase only"))
    if w.NO_COMMA.search(folded):
        check = {"type": "ifeval", "id": "punctuation:no_comma"}
        rules.append(StatedRule("no-commas", "format", sentence, check, "no comma"))
    return rules


def _terms(sentence: str) -> tuple[list[str], str]:
    """The terms a forbidding sentence names, and how they were found ('' when none)."""
    if found := quoted(sentence):
        return [t.strip() for t in found if t.strip()], "quoted"
    if match := re.search(w.WORD_TERM.pattern, sentence, re.I):
        return [match.group(1)], "named"
    if match := re.search(w.EXAMPLES.pattern, sentence, re.I):
        rest = sentence[match.end() :].strip().rstrip(".!?;)»\"'")
        items = [t.strip() for t in re.split(w.LIST_SPLIT.pattern, rest, flags=re.I)]
        items = [t for t in items if t and len(t.split()) <= 4]
        if items:
            return items, "listed"
    return [], ""


def bare_term(term: str, quoted: bool = False) -> str:
    """The term without the lowercase articles and prepositions it was named with ("die
    Sparkasse" -> "Sparkasse", "l'ING" -> "ING"); a capitalised one is part of a name ("De
    Beers", "The Body Shop") and stays. A quoted phrase is kept whole unless a name follows
    ("'die Sparkasse'" -> "Sparkasse", "'a lot'" stays: "lot" alone is another word)."""
    words = term.split()
    while len(words) > 1 and words[0].islower() and fold(words[0]) in w.TERM_LEADERS:
        words = words[1:]
    elided = re.match(r"([^\W\d_]{1,2})['’](?=\w)", words[0])  # "l'ING", "d’Orange"
    if elided and elided.group(1).islower() and fold(elided.group(1)) in w.TERM_LEADERS:
        words[0] = words[0][elided.end() :]
    bare = " ".join(words)
    return term if quoted and not bare[:1].isupper() else bare


def _letters(word: str) -> str:
    """The word escaped, an accented letter also matching its plain one ("Hôtel" matches
    "Hotel": replies drop accents)."""
    return "".join(
        f"[{ch}{fold(ch)}]" if len(fold(ch)) == 1 and fold(ch) != ch.lower() else re.escape(ch)
        for ch in word
    )


def _term_pattern(term: str) -> str:
    """The term's words; an inner word ending in -e may take a German adjective ending ("bei
    der Deutschen Bank"), the last an -s or 's ("ING's") or, after -e, an -n ("Sparkassen");
    accents optional."""
    words = term.split()
    parts = [_letters(word) + ("[nrsm]?" if word.endswith("e") else "") for word in words[:-1]]
    plural = "n|" if words[-1].endswith("e") else ""  # "die Sparkassen"
    parts.append(_letters(words[-1]) + rf"(?:{plural}s|['’]s)?")
    return r"\s+".join(parts)


def terms_pattern(terms: list[str], quoted: bool = False) -> str:
    """Any of the terms as a whole word (or phrase), with or without the article or
    preposition it was named with, in any case: a reply leads into a term its own way ("von
    der Sparkasse", "zur Sparkasse", "bei der ING", a bare "Sparkasse")."""
    bare = list(dict.fromkeys(bare_term(t, quoted) for t in terms))
    return r"(?i)(?<!\w)(?:" + "|".join(_term_pattern(t) for t in bare) + r")(?!\w)"


def forbidden_rules(sentence: str) -> list[StatedRule]:
    """Terms the sentence forbids to mention, as a regex; a category, as a judge check."""
    folded = fold(sentence)
    verb = w.MENTION.search(folded)
    if not verb or not w.NEGATION.search(folded):
        return []
    rest = folded[verb.end() :]
    rest = rest[: m.start()] if (m := w.EXAMPLES.search(rest)) else rest
    obj = " ".join(
        word for word in re.findall(r"[a-z0-9]+", rest)
        if not (w.NEGATION.fullmatch(word) or word in w.SLUG_SKIP)
    )  # fmt: skip
    name = "no-" + slug(obj, 3)
    terms, how = _terms(sentence)
    if terms:
        pattern = terms_pattern(terms, quoted=how == "quoted")
        check = {"type": "regex_must_not", "pattern": pattern, "name": name}
        note = "the prompt's examples: add the rest of the category" if how == "listed" else ""
        found = f"{how} terms: {', '.join(terms)}"
        return [StatedRule(name, "forbidden", sentence, check, found, note=note)]
    stub = {
        "type": "regex_must_not",
        "pattern": terms_pattern(["TERM ONE", "TERM TWO"]),
        "name": name,
        "rule": name,
        "sentence": sentence,
    }
    judge = {"type": "judge", "scope": "response"}  # judges its sentence
    found = "a category, no terms: a judge decides"
    note = "or list the terms: uncomment the regex below (and drop the judge: no model needed)"
    return [StatedRule(name, "forbidden", sentence, judge, found, note=note, extra=(stub,))]


def judge_rule(sentence: str) -> StatedRule:
    """A sentence no code check reads: a judge check with it as the rule (commented when it
    only says who the assistant is)."""
    name = slug(sentence)
    check = {"type": "judge", "scope": "response"}  # judges its sentence
    if w.ROLE.match(fold(sentence)):
        return StatedRule(name, "role", sentence, check, "a role, not a rule", active=False)
    return StatedRule(name, "judge", sentence, check, "no code check reads it: a judge decides")


def language_rule(choice: Choice, sentence: str | None) -> StatedRule:
    check = {"type": "language", "target": choice.code}
    return StatedRule(f"language-{choice.code}", "language", sentence, check, choice.comment())


def stated_rules(prompt: str, choice: Choice) -> list[StatedRule]:
    """Every rule the prompt states, in its order, the reply language first."""
    rules: list[StatedRule] = []
    language_sentence = None
    for sentence in sentences(prompt):
        found: list[StatedRule] = []
        if choice.how == "asked" and language_sentence is None and choice.evidence in sentence:
            language_sentence = sentence
            found.append(language_rule(choice, sentence))
        found += length_rules(sentence) + format_rules(sentence) + edge_rules(sentence)
        if not any(r.kind in ("length", "format", "end", "start") for r in found):
            found += forbidden_rules(sentence)
        found += persona_rules(sentence)
        rules += found or [judge_rule(sentence)]
    if language_sentence is None:  # inferred from the prompt's own language: no sentence
        rules.insert(0, language_rule(choice, None))
    return _unique_names(rules)


def _unique_names(rules: list[StatedRule]) -> list[StatedRule]:
    seen: dict[str, int] = {}
    out = []
    for rule in rules:
        seen[rule.name] = seen.get(rule.name, 0) + 1
        name = rule.name if seen[rule.name] == 1 else f"{rule.name}-{seen[rule.name]}"
        out.append(rule if name == rule.name else _renamed(rule, name))
    return out


def _renamed(rule: StatedRule, name: str) -> StatedRule:
    check = {**rule.check, "name": name} if "name" in rule.check else rule.check
    return StatedRule(name, rule.kind, rule.sentence, check, rule.found, rule.active, rule.note)


def check_entry(rule: StatedRule) -> dict[str, Any]:
    """The suite's `checks:` entry: the check with its rule name and sentence."""
    entry = dict(rule.check)
    entry["rule"] = rule.name
    if rule.sentence is not None:
        entry["sentence"] = rule.sentence
    return entry


def needs_whole_replies(rules: list[StatedRule]) -> bool:
    """A rule judged on a whole reply that a cut-off reply cannot pass (a length, a sign-off,
    a format): the budget must let replies end on their own."""
    return any(r.active and r.kind in ("length", "end", "format") for r in rules)


def word_limit(rules: list[StatedRule]) -> int | None:
    """The most words a reply may have under the prompt's length rules (a sentence counted
    as 25 words), None when no rule limits it."""
    limits = []
    for rule in rules:
        kwargs = rule.check.get("kwargs", {})
        if rule.kind != "length" or kwargs.get("relation") != "less than":
            continue
        if "num_words" in kwargs:
            limits.append(kwargs["num_words"] - 1)
        else:
            limits.append(25 * (kwargs["num_sentences"] - 1))
    return min(limits) if limits else None
