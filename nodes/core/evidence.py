"""The evidence rule's pure helpers (``nodes/query/book_flow.py`` runs them): whether retrieved hits
support a book clause.

- ``scope_chapters``: candidate chapters from a concept-map lookup (only *specific* entity and event
  matches, found in at most ``max_chapters`` chapters, scoring at least half of the best and at least
  ``SCOPE_MIN_SCORE``); None = the whole books.
- ``refers_back``: the pronoun by which a clause with no name of its own points back.
- ``sufficient``: (a) every name of the clause held by the top ten lexical and semantic hits (their text,
  or the title of their chapter: "The Frog Prince" titles Grimm's tale, "Household Stories" the book
  searched) and (b) a lexical hit holding ``min_coverage`` of the clause's content words (irregular
  forms as their base: "fell" covers "fall"; how the question is asked, ``asked_frame``, need not be
  covered by a hit that holds all else: "kind" in "What kind of things ...", "often"; nor a quantifier,
  ``word_forms.QUANTIFIERS``: "every" in "How did the Queen settle every difficulty?") or a semantic hit
  scoring ``min_similarity`` (the words alone at ``LEXICAL_ONLY_COVERAGE`` without semantic hits).
- ``asked_relation`` / ``holds_relation`` / ``unheld_relation``: a question for someone's thing ("What is the
  name of Sherlock Holmes's sister?") that no passage names is not supported; the note says what was
  found and what was not.
- ``unheld_price``: a question for a price or a sum paid ("How much did the Time Traveller pay for his
  machine?", answer type ``price``) that no passage answers with a sum of money is not supported.
- ``asked_kind`` / ``unheld_kind``: a question for a kind of thing no passage mentions ("Which university
  did Alice attend?") is not supported; a class whose members a book names without the class word
  ("What substance ...?" answered by "Phosphorus") is no such kind.
- ``renamed``: a clause with the book's own name or spelling for a name it asks by another one.
- ``unheld_focus``: a name held by one passage only, which says nothing of what the clause asks about it
  (Moby-Dick's one "Titanic" is a circus-rider: "How did the Titanic sink?"), is not supported either.

Config keys: none (the nodes pass ``evidence_min_coverage``, ``evidence_min_similarity``,
``scope_max_chapters``). Limitations: coverage counts words, not meaning; the relation rule reads only
"what/who is (the name of) X's Y" questions.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from folio.nodes.backends.answer_types import PAYING_WORDS, answer_type, type_cue
from folio.nodes.core.ranking import missing_names, names_in
from folio.nodes.core.sentence_scoring import focus_terms, held_terms, lemma_coverage, lemma_stems
from folio.nodes.core.text import STOPWORDS, sentences, stems
from folio.nodes.core.types import Hit
from folio.nodes.core.word_forms import QUANTIFIERS, unframed

SCOPE_MIN_SCORE = 0.2
SCOPE_KINDS = ("entity", "event")  # themes are too broad to narrow the search (measured)
LEXICAL_ONLY_COVERAGE = 0.5  # the evidence rule without semantic search: today's words-only rule


def scope_chapters(lookup: Sequence[tuple[str, Any]], max_chapters: int) -> tuple[str, ...] | None:
    """Candidate chapters from concept-map matches (see the module docstring); None = whole books."""
    scored: list[tuple[float, str]] = []
    for _, matches in lookup:
        for m in (*matches.entities, *matches.events, *matches.themes):
            if m.kind not in SCOPE_KINDS or len(m.chapter_ids) > max_chapters:
                continue  # a concept found all over the book does not narrow the search
            scored.extend((m.score / (1.0 + 0.2 * rank), cid) for rank, cid in enumerate(m.chapter_ids))
    if not scored:
        return None
    best = max(s for s, _ in scored)
    if best < SCOPE_MIN_SCORE:
        return None
    order: dict[str, float] = {}
    for s, cid in scored:
        if s >= 0.5 * best:
            order[cid] = max(order.get(cid, 0.0), s)
    return tuple(sorted(order, key=lambda c: (-order[c], c))[: max(1, int(max_chapters))]) or None


BACK_PRONOUN = re.compile(r"\b(?:he|him|his|she|her|hers|it|its|they|them|their|theirs)\b", re.IGNORECASE)


def refers_back(clause: str) -> str | None:
    """The pronoun by which a clause with no name of its own points back ("where is his castle"), or
    None."""
    if names_in(clause):
        return None
    found = BACK_PRONOUN.search(clause)
    return found.group() if found else None


def held_texts(lexical: Sequence[Hit], semantic: Sequence[Hit], titles: Sequence[str] = ()) -> list[str]:
    """What the evidence holds for the rule: the top ten lexical and semantic hits' texts, their chapters'
    titles and the ``titles`` of the books searched (a name may title a tale: "The Frog Prince")."""
    top = [*lexical[:10], *semantic[:10]]
    return [*(h.text for h in top), *dict.fromkeys(h.chapter_title for h in top if h.chapter_title), *titles]


# The thing a question asks for by its kind: "which university", "in which city", "what is the recipe
# for"; verbs ("what happened", "what killed") and words of every question are not a kind.
ASKED_KIND = re.compile(
    r"^what (?:is|was|are|were) the ([a-z][a-z-]+) (?:of|for)\b"
    r"|^(?:(?:in|at|from|to|on|for|by|with|of|into) )?(?:which|what)\s+(?:kind of |sort of )?"
    r"(?:(?:two|three|four|five|six|seven|eight|nine|ten|\d+) )?([a-z][a-z-]+)\b"
)
NOT_KINDS = frozenset(
    [
        "is",
        "was",
        "are",
        "were",
        "did",
        "does",
        "do",
        "has",
        "had",
        "have",
        "can",
        "could",
        "would",
        "will",
        "should",
        "shall",
        "may",
        "might",
        "must",
        "made",
        "make",
        "makes",
        "keep",
        "keeps",
        "happen",
        "happens",
        "name",
        "names",
        "kind",
        "sort",
        "type",
        "way",
        "thing",
        "things",
        # a class whose members a text names without the class word ("What substance made the hound's
        # muzzle glow?" is answered by "Phosphorus"): no passage need say it
        *("substance", "material", "colour", "color", "shape", "creature", "animal", "lesson", "moral"),
    ]
)


def renamed(clause: str, aliases: Sequence[tuple[str, str]]) -> str:
    """The clause with each name as asked replaced by the book's name or spelling for it (any spacing or
    punctuation between a name's words; whole words only, "Mitthens" -> "Mittens")."""
    for asked, own in aliases:
        pattern = r"\b" + re.escape(asked).replace(r"\ ", r"\W+") + r"\b"
        clause = re.sub(pattern, own.replace("\\", "\\\\"), clause, flags=re.IGNORECASE)
    return clause


def asked_kind(question: str) -> str | None:
    """The noun naming the kind of thing the question asks for ("Which university did Alice attend?" →
    "university"), or None."""
    found = ASKED_KIND.search(" ".join(question.lower().split()))
    word = (found.group(1) or found.group(2)) if found else None
    if word is None or word in NOT_KINDS or word in STOPWORDS or word.endswith("ed"):
        return None  # a verb or a function word ("What above all things appalled Ishmael") names no kind
    return word


def unheld_kind(question: str, hits: Sequence[Hit], titles: Sequence[str] = ()) -> str | None:
    """The asked-for kind (``asked_kind``) when no hit holds the word (light stems) in its text or its
    chapter's title, else None. With names, only the hits of the books whose hits hold one of them count:
    "Which university did Alice attend?" is not answered by a university of Flatland."""
    word = asked_kind(question)
    if word is None:
        return None
    names = [stems(" ".join(n)) for n in names_in(question)]
    books = {h.book_id for h in hits if any(n and n <= stems(h.text) for n in names)}
    pool = [h for h in hits if h.book_id in books] or list(hits)
    texts = [*(h.text for h in pool), *(h.chapter_title for h in pool), *titles]
    return None if any(stems(word) & stems(t) for t in texts) else word


def sufficient(
    question: str,
    lexical: Sequence[Hit],
    semantic: Sequence[Hit],
    min_coverage: float,
    min_similarity: float,
    titles: Sequence[str] = (),
) -> bool:
    """The evidence rule of the module docstring."""
    held = held_texts(lexical, semantic, titles)
    if not lexical[:10] and not semantic[:10]:
        return False
    if missing_names(question, held) or unheld_kind(question, [*lexical[:10], *semantic[:10]], titles):
        return False
    terms = lemma_stems(question)  # irregular forms as their base: "Why did Mittens fall" / "she fell"
    core = unframed(terms, question)
    core = (core - QUANTIFIERS) or core
    best_coverage = max((_coverage(terms, core, h.text) for h in lexical[:10]), default=0.0)
    if not semantic:  # semantic search could not run: the words alone
        return best_coverage >= LEXICAL_ONLY_COVERAGE
    return best_coverage >= min_coverage or max(h.score for h in semantic[:10]) >= min_similarity


def _coverage(terms: frozenset[str], unframed_terms: frozenset[str], text: str) -> float:
    """The share of ``terms`` that ``text`` holds; all of them when it holds every word but how the
    question is asked (``word_forms.unframed``: "things disappeared at night" covers "What kind of things
    often disappeared at night?"; "a grand gift of silence, said the man" does not cover "What sort of
    gift did the little man usually ask for in return?" the more for lacking "sort" and "usually")."""
    if unframed_terms != terms and lemma_coverage(unframed_terms, text) == 1.0:
        return 1.0
    return lemma_coverage(terms, text)


RELATION = re.compile(
    r"^\s*(?:[Ww]hat|[Ww]ho)\b.*?\b(?:name of|is|was|are|were)\s+(?:the\s+)?"
    r"((?:(?:Mr|Mrs|Miss|Dr|Mr\.|Mrs\.|Dr\.)\s+)?(?:[A-Z][\w-]*\s+)*[A-Z][\w-]*)(?:'s|’s|')\s+([a-z]+)"
    r"(?:\s+([a-z]+))?\s*[?.!]*\s*$"
)
# capitalised words that open a sentence without naming anyone ("It was the old ship" names no ship)
PRONOUN_STARTS = "(?:It|He|She|They|This|That|There|Here|What|Who|Which|I|We|You)"
ORDINALS = frozenset(["first", "second", "third", "elder", "older", "eldest", "younger", "youngest", "only"])


def asked_relation(clause: str) -> tuple[str, str] | None:
    """``(subject, thing)`` of a question asking who someone's thing is ("What is the name of Sherlock
    Holmes's sister?" → ("Sherlock Holmes", "sister")), or None."""
    found = RELATION.search(clause)
    if not found:
        return None
    thing = found.group(3) if found.group(2) in ORDINALS and found.group(3) else found.group(2)
    return found.group(1), thing


def holds_relation(subject: str, thing: str, texts: Sequence[str]) -> bool:
    """Whether a text names the subject's thing: "Holmes's sister", "the sister of Holmes", "Holmes ...
    his sister" (no other name between), an appositive "Hunca Munca, his wife", "a wife called Goody",
    "Dinah's our cat" or, with one word between, "the Pequod was the identical ship" in a text naming the
    subject."""
    last = re.escape(subject.split()[-1])
    y = re.escape(thing) + r"s?"
    own = r"(?:his|her|their)\s+" + y
    direct = re.compile(
        rf"\b{last}(?:'s|’s|')\s+(?:\w+\s+){{0,2}}{y}\b|\b{y}\s+of\s+(?:\w+\.?\s+){{0,2}}{last}\b"
        rf"|\b{last}\b(?-i:[^A-Z]){{0,80}}\b{own}\b",
        re.IGNORECASE,
    )
    named = re.compile(
        rf"[A-Z][\w-]*,\s+{own}\b|\b{y}\s+(?:called|named)\s+[A-Z]"
        rf"|\b(?!{PRONOUN_STARTS}\b)[A-Z][\w-]*(?:'s|’s|\s+is|\s+was)\s+(?:the|our|my|her|his|their)\s+(?:[a-z]+\s+)?{y}\b"
    )
    return any(direct.search(t) or (named.search(t) and re.search(rf"\b{last}\b", t)) for t in texts)


def unheld_relation(clause: str, texts: Sequence[str]) -> str | None:
    """The note when the clause asks for someone's thing (``asked_relation``) that no text names: what was
    found and what was not."""
    found = asked_relation(clause)
    if found is None or holds_relation(*found, texts):
        return None
    subject, thing = found
    return f"Found {subject} in the books, but no passage names {subject}'s {thing}"


# Verbs too light to be what a question asks about its names ("Which town were the Bremen Town Musicians
# going to?" asks for a town; "went" need not be said where they are named), as light stems.
LIGHT_VERBS = lemma_stems(
    "go goes going went gone get gets getting got make makes making made take takes taking took taken "
    "see sees seeing saw seen say says saying said come comes coming came give gives giving gave given "
    "put puts putting know knows knew known think thinks thought want wants wanted use uses used find "
    "finds found tell tells told happen happens happened become becomes became feel feels felt look "
    "looks looked call calls called keep keeps kept let lets seem seems seemed"
)


AMOUNT_WORDS = lemma_stems("much many")  # the amount asked for, not what it is about
PAID = lemma_stems(PAYING_WORDS)  # what a price question asks, not what it asks the price of


def asked_terms(question: str) -> frozenset[str]:
    """What a question with names asks about them that a passage should say: ``focus_terms`` but
    ``LIGHT_VERBS`` ("How did the Titanic sink?" -> sink)."""
    return focus_terms(question) - LIGHT_VERBS


def asked_words(question: str) -> list[str]:
    """The question's words that ``asked_terms`` stands for, as written, for a note."""
    terms = asked_terms(question)
    return [w for w in re.findall(r"[A-Za-z][\w'-]*", question) if held_terms(terms, w)]


def unheld_focus(clause: str, texts: Sequence[str]) -> str | None:
    """The note when the clause's names are held by one text only (a mention in passing) that says
    nothing of what the clause asks about them (``asked_terms``):
    "How did the Titanic sink?" over Moby-Dick's one "Titanic circus-rider" and other chunks about
    sinking whales. None when no text holds a name (the names rule decides), when several do (a tale
    of Mr. Korbes need not say "end"), or when the clause asks nothing besides its names."""
    names = names_in(clause)
    focus = asked_terms(clause)
    if not names or not focus:
        return None
    holders = [t for t in texts if len(missing_names(clause, [t])) < len(names)]
    if len(holders) != 1 or held_terms(focus, holders[0]):
        return None  # a name held by several passages is what they are about, whatever words they use
    held = [" ".join(n) for n in names if " ".join(n) not in missing_names(clause, holders)]
    asked = ", ".join(asked_words(clause))
    return f"Found {', '.join(held)} in the books, but no passage with it mentions {asked}"


def unheld_price(clause: str, texts: Sequence[str]) -> str | None:
    """The note when the clause asks for a price or a sum paid (``answer_type`` "price") and no sentence
    gives a sum of money where it (or the sentence before) holds what the clause asks the price of
    (``asked_terms`` but the paying words: "machine"; none: one of its names): what was found and what was
    not. "It took two years to make" holds a number, not a price; "I'd give a shilling a line for a
    verbatim note" is the price of something else."""
    asked = answer_type(clause)
    if asked.kind != "price":
        return None
    thing = asked_terms(clause) - AMOUNT_WORDS - PAID
    names = names_in(clause)

    def about(text: str) -> bool:
        if thing:
            return bool(held_terms(thing, text))
        return not names or len(missing_names(clause, [text])) < len(names)

    for text in texts:
        spans = sentences(text)
        for i, (start, end) in enumerate(spans):
            if type_cue(asked, text[start:end], frozenset()) and about(text[spans[max(0, i - 1)][0] : end]):
                return None
    missing = set(missing_names(clause, texts))
    held = [" ".join(n) for n in names if " ".join(n) not in missing]
    found = f"Found {', '.join(held)} in the books, but" if held else "In the books searched,"
    said = [w for w in asked_words(clause) if not lemma_stems(w) & AMOUNT_WORDS]
    return f"{found} no passage names a price or a sum of money (asked: {', '.join(said)})"
