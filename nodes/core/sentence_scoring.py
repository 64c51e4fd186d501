"""Sentence scoring: how well each text (a sentence, a unit of two, an article's paragraph) answers a
question. The reader (``nodes/core/reading.py``) and the Kiwix answer (``nodes/kiwix/fusion.py``) use it.

- ``relevance(question, texts, encoder=None)``: one score per text, higher is better, in [0, 1]: by
  meaning (cosine with the question, one batched ``encode`` when an encoder is given), by the question's
  words (``word_scores``: light stems, inflections matched ("drop" / "dropped"), each weighted by how
  rare it is among ``texts``, a name of the question counting as any word) and by its kind (``asked``: who /
  when / where / why / how / how-many / what-is; a "when" question favours sentences with time words,
  "why" ones with "because", "so that", ..., "who" ones with a name the question does not hold), and by
  the type of answer it asks for (``backends/answer_types.py``, ``TYPE_WEIGHT``: "which lake" a name
  ending in Lake, "what year" a year, "how many" an amount, "where" a named place); a question that asks
  for no type scores as it did without this cue.
- ``found_terms(question, texts)``: the question's stems each text holds and each stem's weight, the
  base of ``word_scores`` and of the book reader's unit scores. Irregular forms are read as their base
  (``nodes/core/word_forms.py``); an ordinal ("first", "second") counts only in a text that holds one of
  the ``ORDINAL_REACH`` words after it in the question (``_ordinals_with_nouns``); the "name" of a
  question asking for one ("What was the name of Jabez Wilson's assistant?") counts only in a text that
  gives a name ("His name is Vincent Spaulding", "called Simpkin"; ``_named_where_naming``), or gives
  the asked noun's name ("Dinah was the cat", "our cat Dinah"; ``named_noun``), outside a question, not in
  "in the name of good-fortune" or "Are you called Jack?"; there it weighs ``NAMING_WEIGHT`` times its
  rarity, since a name is what the question asks for. The "many" / "much" of "how many / how much" is
  the frame of an amount, no word to find (``_amount_frame``), as are the "kind" of "what kind of" and
  "often" (``word_forms.asked_frame``, which the evidence rule leaves out too).
- ``focus_terms`` / ``focused``: a question with names asks something about them ("What did the Mad
  Hatter say about time?" asks about time); a text holding its names but none of its other words (the
  focus) only repeats the subject and counts ``FOCUS_SHARE`` of its words' weight (issue 27: "I've seen
  hatters before ... mad" gives way to the Hatter's lines about time).
- What a question is about, which a Kiwix article must hold to be cited, is in ``nodes/core/subjects.py``.
- ``needs_previous(text)``: the sentence cannot be read alone (it opens with a pronoun, "He", "She",
  "This", "Their", or in lower case, or closes a quotation it did not open).

Config keys: none. Limitations: English cues; the kind cues are word lists, not a parser.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable, Sequence
from typing import Any

from folio.nodes.backends.answer_types import answer_type, asked_clause, type_cue
from folio.nodes.core.text import (
    STOPWORDS,
    base_word,
    content_words,
    fold,
    named_phrases,
    plural_stem,
    stems,
    words,
)
from folio.nodes.core.word_forms import FORM_STEMS, lemma, unframed

# --- weights (tuned on FairytaleQA; see tests/test_reading.py for the behaviour they give) ----------
MEANING_WEIGHT = 0.1
WORDS_WEIGHT = 1.0
KIND_WEIGHT = 0.05
TYPE_WEIGHT = 0.1  # a text holding an answer of the asked type (``nodes/backends/answer_types.py``)
FOCUS_SHARE = 0.5  # a text holding the question's names but none of its other words counts this share


_TIME = frozenset(
    [
        "morning",
        "evening",
        "night",
        "nights",
        "day",
        "days",
        "daybreak",
        "dawn",
        "dusk",
        "noon",
        "midnight",
        "sunrise",
        "sunset",
        "year",
        "years",
        "month",
        "months",
        "week",
        "weeks",
        "hour",
        "hours",
        "minute",
        "minutes",
        "winter",
        "summer",
        "spring",
        "autumn",
        "once",
        "twice",
        "when",
        "after",
        "before",
        "until",
        "till",
        "while",
        "since",
        "soon",
        "later",
        "last",
        "first",
        "o'clock",
        "christmas",
        "sunday",
        "monday",
        "tuesday",
        "wednesday",
        "thursday",
        "friday",
        "saturday",
        "january",
        "february",
        "march",
        "april",
        "may",
        "june",
        "july",
        "august",
        "september",
        "october",
        "november",
        "december",
        "time",
        "times",
        "ago",
        "yesterday",
        "tomorrow",
        "today",
    ]
)
_PLACE = frozenset(
    [
        "in",
        "into",
        "at",
        "on",
        "under",
        "behind",
        "beside",
        "near",
        "inside",
        "outside",
        "upon",
        "beneath",
        "above",
        "over",
        "across",
        "through",
        "house",
        "home",
        "forest",
        "wood",
        "woods",
        "castle",
        "garden",
        "field",
        "fields",
        "village",
        "town",
        "city",
        "river",
        "sea",
        "well",
        "room",
        "kitchen",
        "cellar",
        "tree",
        "hill",
        "mountain",
        "road",
        "door",
        "window",
        "palace",
        "church",
    ]
)
_REASON = frozenset(
    ["because", "since", "so", "for", "therefore", "reason", "order", "wanted", "wished", "afraid"]
)
_MANNER = frozenset(["by", "with", "through", "using", "means", "way"])
_NUMBER = frozenset(
    [
        "one",
        "two",
        "three",
        "four",
        "five",
        "six",
        "seven",
        "eight",
        "nine",
        "ten",
        "eleven",
        "twelve",
        "hundred",
        "thousand",
        "many",
        "several",
    ]
)
_DEFINITION = re.compile(r"\b(?:is|was|are|were|means|meant|called|named)\b", re.IGNORECASE)
_WHY = re.compile(
    r"\b(?:because|so that|in order to|for fear|that (?:he|she|they|it|we|i) (?:might|could))\b"
)
_DEPENDENT = re.compile(
    r"""^[\"'“‘(]*(?:he|she|it|they|them|him|her|his|its|their|this|these|those|such|the\ latter|
    the\ former|both)\b""",
    re.IGNORECASE | re.VERBOSE,
)
_OPENING_QUOTES = "“‘"
_CLOSING_QUOTES = "”’"


def asked(question: str) -> str:
    """What kind of answer the question asks for: who / when / where / why / how-many / how / what-is /
    other ("Why did the two decide to leave?" -> "why"), read from its ``asked_clause`` ("According to
    Barrymore, where was Selden going?" -> "where")."""
    ws = words(asked_clause(question))
    if not ws:
        return "other"
    for i, w in enumerate(ws[:4]):  # "And why...", "In what year..." stay simple: the first wh-word
        if w in ("who", "whom", "whose"):
            return "who"
        if w == "when" or (w == "what" and i + 1 < len(ws) and ws[i + 1] in ("year", "time", "day", "date")):
            return "when"
        if w == "where":
            return "where"
        if w == "why":
            return "why"
        if w == "how":
            return "how-many" if i + 1 < len(ws) and ws[i + 1] in ("many", "much", "old", "long") else "how"
        if w == "what" and i + 1 < len(ws) and ws[i + 1] in ("is", "are", "was", "were", "does"):
            return "what-is"
    return "other"


def kind_cue(kind: str, text: str, question_words: frozenset[str]) -> float:
    """1 when the text has what a ``kind`` answer is made of (0 otherwise; 0.5 for a weak cue)."""
    ws = words(text)
    if kind == "who":
        caps = [t for t in re.findall(r"\b[A-Z][a-z]+", text)[1:] if fold(t) not in question_words]
        return 1.0 if caps else 0.0
    if kind == "when":
        return 1.0 if any(w in _TIME or w.isdigit() for w in ws) else 0.0
    if kind == "where":
        return 0.5 if any(w in _PLACE for w in ws) else 0.0
    if kind == "why":
        return 1.0 if _WHY.search(fold(text)) else 0.5 if any(w in _REASON for w in ws) else 0.0
    if kind == "how":
        return 0.5 if any(w in _MANNER for w in ws) else 0.0
    if kind == "how-many":
        return 1.0 if any(w in _NUMBER or w.isdigit() for w in ws) else 0.0
    if kind == "what-is":
        return 0.5 if _DEFINITION.search(text) else 0.0
    return 0.0


def _extended(text_stems: frozenset[str]) -> frozenset[str]:
    """The stems of a text and what they shorten to by one or two letters (four letters at least)."""
    return text_stems | frozenset(s[:-k] for s in text_stems for k in (1, 2) if len(s) - k >= 4)


@functools.lru_cache(maxsize=4_096)
def _cuts(term: str) -> frozenset[str]:
    """What a stem shortens to by one or two letters (four letters at least)."""
    return frozenset(term[:-k] for k in (1, 2) if len(term) - k >= 4)


def _matches(term: str, text_stems: frozenset[str], extended: frozenset[str]) -> bool:
    """A question stem is in a text: the same stem, or one of at least four letters that the other
    extends by at most two ("drop" / "dropp" of "dropped", "hidd" / "hide" of "hidden" and "hide"), or
    one of the other forms of a short word that ``stem`` keeps whole (``_other_forms``)."""
    return term in extended or not text_stems.isdisjoint(_cuts(term) | _other_forms(term))


_NOUN_ENDS = ("ation", "ction", "ntion", "ption")
_VERB_ENDS = ("at", "ct", "nt", "pt")


@functools.lru_cache(maxsize=4_096)
def _other_forms(term: str) -> frozenset[str]:
    """The forms of a word that ``stem`` does not bring together: of a short verb in "-e", "die" / "died",
    "dies", "dying"; "live" / "living"; "used" / "use" (not "feed" / "fee"); "hiding" / "hide"; the
    singular of a short plural in "-us" that ``text.plural_stem`` reads ("emus" / "emu"; "virus" is no
    plural); and the verb of a noun in "-ation", "-ction", "-ntion", "-ption" and back ("population" /
    "populated", which the Hong Kong article says of its "7.5 million residents"; "invention" /
    "invented"; not "question" / "quest")."""
    if term.endswith("us") and plural_stem(term) != term:
        return frozenset({plural_stem(term)})
    if len(term) >= 8 and term.endswith(_NOUN_ENDS):  # "population" / "populated", "invention" / "invent"
        return frozenset({term[:-3]})
    if len(term) >= 5 and term.endswith(_VERB_ENDS):  # and the other way round
        return frozenset({term + "ion"})
    if len(term) >= 6 and term.endswith("ate"):  # "populate" / "population"
        return frozenset({term[:-1] + "ion"})
    if len(term) <= 4 and term.endswith("e"):
        ing = term[:-2] + "ying" if term.endswith("ie") else term[:-1] + "ing"
        return frozenset({term + "d", term + "s", ing})
    if len(term) == 4 and term.endswith(("ed", "es")) and term[1] != "e":
        return frozenset({term[:-1]})
    if len(term) == 6 and term.endswith("ing"):
        return frozenset({term[:-3] + "e"})
    return frozenset()


@functools.lru_cache(maxsize=16_384)
def lemma_stems(text: str) -> frozenset[str]:
    """The stems of a text's content words, irregular forms read as their base ("sent" -> "send")."""
    return frozenset(lemma(w) for w in content_words(text))


def lemma_coverage(terms: frozenset[str], text: str) -> float:
    """Share of ``terms`` (``lemma_stems``) among the text's stems (``stems``, remembered per text), an
    irregular form of a base word counting as it: "fell" covers "fall", "came" "come"."""
    if not terms:
        return 0.0
    held = stems(text)
    return sum(bool(held & FORM_STEMS.get(t, frozenset((t,)))) for t in terms) / len(terms)


@functools.lru_cache(maxsize=16_384)
def _text_stems(text: str) -> tuple[frozenset[str], frozenset[str]]:
    """A text's stems (``lemma_stems``) and their ``_extended`` forms, made once per text."""
    own = lemma_stems(text)
    return own, _extended(own)


def names_by_title(question: str, titled: Iterable[frozenset[str]]) -> frozenset[str]:
    """The stems of the question's names that some text holds only through its context (its chapter's
    title)."""
    held = frozenset().union(*titled)
    return name_terms(question) & held if held else frozenset()


ORDINALS = frozenset({"first", "second", "third", "fourth", "fifth", "last"})
ORDINAL_REACH = 3  # an ordinal counts in a text holding one of the question's next content words


@functools.lru_cache(maxsize=4_096)
def _ordinal_nouns(question: str) -> tuple[tuple[str, frozenset[str]], ...]:
    """Each ordinal stem of the question with the stems of the ``ORDINAL_REACH`` content words after it
    ("What was Elvis Presley's first film?" -> first: film)."""
    ws = [lemma(w) for w in content_words(question)]
    return tuple((w, frozenset(ws[i + 1 : i + 1 + ORDINAL_REACH])) for i, w in enumerate(ws) if w in ORDINALS)


def _ordinals_with_nouns(question: str, found: frozenset[str]) -> frozenset[str]:
    """``found`` without an ordinal whose nouns it lacks: "the first concert" does not hold the "first"
    of "first film"; "Stubb, the second mate" holds the "second" of "the second mate of the Pequod"."""
    drop = {o for o, after in _ordinal_nouns(question) if o in found and after and not after & found}
    return found - drop if drop else found


# "What was the name of Jabez Wilson's assistant?": "name" is the answer's frame, found only where a text
# gives a name ("His name is Vincent Spaulding", "called Simpkin"), not "in the name of good-fortune"
_NAMING_QUESTION = re.compile(
    r"^\s*(?:what\s+(?:is|was|were|are)\b[^?]*?\bnames?\b|(?:by|under)?\s*what\s+names?\b)", re.I
)
_NAMING = re.compile(
    r"\bnames?\b(?:\s+[\w'’]+){0,4}?\s+(?:is|was|were|are)\s+[“\"‘']?[A-Z]"
    r"|\b(?:named|called|names?)[,:]?\s+[“\"‘']?[A-Z]|\bcall\s+(?:me|him|her|it|them)\s+[A-Z]"
)
NAME_STEM = "name"
NAMING_WEIGHT = 2.0  # the "name" of a naming question, found only where a text gives a name


_NAMED_PHRASE = re.compile(r"\bnames?\s+of\s+([^?,]+)|(?:\b|^)([\w-]+)['’]s\s+names?\b", re.I)
_PHRASE_END = frozenset(
    [
        "who",
        "whom",
        "that",
        "which",
        "whose",
        "in",
        "on",
        "at",
        "with",
        "from",
        "by",
        "when",
        "where",
        "while",
        "as",
    ]
)
_SOME_OF = re.compile(r"^\s*(?:one|each|any|some|either|both|all|none)\s+of\s+", re.I)
_DETERMINERS = frozenset(["the", "a", "an"])
_CAPITAL_NAME = r"[A-Z][\w'’-]+"


def named_noun(question: str) -> str:
    """The noun whose name a naming question asks for: "What was the name of Alice's cat?" -> "cat",
    "the name of the little woman the Time Traveller saved" -> "woman", "the little man's name" -> "man";
    "" when there is none."""
    m = _NAMED_PHRASE.search(question)
    if not m:
        return ""
    if m.group(2):
        return plural_stem(base_word(fold(m.group(2))))
    phrase = words(_SOME_OF.sub("", m.group(1)))
    kept: list[str] = []
    for i, w in enumerate(phrase):
        if w in _PHRASE_END or (i and w in _DETERMINERS) or (w == "of" and not _possessive_after(phrase[i:])):
            break
        kept.append(w)
    noun = plural_stem(base_word(kept[-1])) if kept else ""
    return "" if noun in STOPWORDS else noun


def _possessive_after(rest: Sequence[str]) -> bool:
    """An "of" that the noun phrase goes on past: "the tailor of Gloucester's cat"."""
    return any(w.endswith("'s") for w in rest[:4])


@functools.lru_cache(maxsize=64)
def _naming_pattern(noun: str) -> re.Pattern[str]:
    """A text giving a name: "His name is Vincent Spaulding", "called Simpkin", "call me Ishmael" and,
    for the asked ``noun``, "Dinah was the cat", "the collie dog Kep" (not the vocative "a smarter
    assistant, Mr. Holmes")."""
    if not noun:
        return _NAMING
    n = rf"(?i:{re.escape(noun)})(?:e?s)?"
    return re.compile(
        rf"{_NAMING.pattern}|\b{_CAPITAL_NAME}(?:\s+{_CAPITAL_NAME})*\s+(?:is|was|were|are)\s+"
        rf"(?:the|a|an|his|her|its|their|my|our|your)\s+(?:[\w-]+\s+){{0,2}}{n}\b"
        rf"|\b{n}\s+(?!I\b){_CAPITAL_NAME}"
    )


def _named_where_naming(naming: re.Pattern[str] | None, found: frozenset[str], text: str) -> frozenset[str]:
    """``found`` holding the "name" of a question asking for a name (``naming``, the pattern of a text
    giving one) exactly when ``text`` gives one ("called Simpkin" holds it; "in the name of good-fortune"
    and the question "Are you called Jack?" do not)."""
    if naming is None:
        return found
    return found | {NAME_STEM} if _gives_name(naming, text) else found - {NAME_STEM}


def _gives_name(naming: re.Pattern[str], text: str) -> bool:
    """A match of ``naming`` in ``text`` outside a question ("Are you called Jack?" gives no name)."""
    for m in naming.finditer(text):
        end = re.search(r"[.!?;]", text[m.end() :])
        if not end or end.group() != "?":
            return True
    return False


_AMOUNT_FRAME = re.compile(r"\bhow\s+(many|much)\b", re.I)


def _amount_frame(question: str) -> frozenset[str]:
    """The "many" / "much" of "how many / how much": the frame of an amount asked, not a word the answer
    says ("there were three little kittens", not "how many they have caught")."""
    return frozenset(m.group(1).lower() for m in _AMOUNT_FRAME.finditer(asked_clause(question)))


def found_terms(
    question: str, texts: Sequence[str], contexts: Sequence[str] = ()
) -> tuple[list[frozenset[str]], dict[str, float]]:
    """The question's content stems found in each text, and each stem's weight (summing to 1): its
    rarity among ``texts`` (a stem in every text counts least); a stem of the question's names weighs as
    any other unless only a context holds it, where it counts double (the name of a story whose text
    never says it picks that story's sentences). Names weighed double everywhere until issue 27's
    session 38: sentences that only repeat a name ("in Flatland", "the Time Traveller") won over the one
    that answers.
    ``contexts`` (one per text, optional): what a text is read under, its chapter or section title; a
    stem of the question in a text's context counts as found in the text ("Hans" in a sentence of the
    chapter "Hans in Luck" that says only "he") when no text read under that context says it itself:
    the title stands in for a word its chapter does not repeat, and a chapter that does name it ("the
    Red-Headed League is dissolved") keeps the sentences that name it ahead. An ordinal is found only
    beside one of its nouns: "the first concert" does not hold the "first" of "first film", which quoted it
    before "his film debut in Love Me Tender"."""
    terms = unframed(lemma_stems(question) - _amount_frame(question), question)  # "what kind of", "often"
    if not terms:
        return [frozenset() for _ in texts], {}
    naming = (
        _naming_pattern(named_noun(question))
        if NAME_STEM in terms and _NAMING_QUESTION.search(question)
        else None
    )
    said = [
        _named_where_naming(naming, _ordinals_with_nouns(question, held_terms(terms, text)), text)
        for text in texts
    ]
    said_under: dict[str, set[str]] = {}
    for i, found_here in enumerate(said):
        said_under.setdefault(contexts[i] if i < len(contexts) else "", set()).update(found_here)
    titled: dict[str, frozenset[str]] = {}
    for context, held in said_under.items():
        titled[context] = held_terms(terms - held, context) if context else frozenset()
    found = [said[i] | titled[contexts[i] if i < len(contexts) else ""] for i in range(len(texts))]
    n = len(texts)
    by_title = names_by_title(question, titled.values())
    weight = {
        t: math.log(1.0 + (n + 1) / (1 + sum(t in f for f in found)))
        * (2.0 if t in by_title else 1.0)
        * (NAMING_WEIGHT if naming is not None and t == NAME_STEM else 1.0)
        for t in terms
    }
    total = sum(weight.values())
    return found, {t: w / total for t, w in weight.items()}


def name_terms(question: str) -> frozenset[str]:
    """The stems of the question's names ("What did the Mad Hatter say about time?" -> mad, hatter)."""
    return frozenset(s for p in named_phrases(question) for s in lemma_stems(p))


def held_terms(terms: frozenset[str], text: str) -> frozenset[str]:
    """The ``terms`` (stems) that ``text`` holds, as ``found_terms`` matches them."""
    own, extended = _text_stems(text)
    return frozenset(t for t in terms if _matches(t, own, extended))


def focus_terms(question: str) -> frozenset[str]:
    """The question's content stems that are not its names': what it asks about the subject ("What did
    the Mad Hatter say about time?" -> time)."""
    names = name_terms(question)
    return lemma_stems(question) - names if names else frozenset()


def focused(found: frozenset[str], weight: dict[str, float], focus: frozenset[str]) -> float:
    """The weight of the stems a text holds; ``FOCUS_SHARE`` of it when the question asks about
    something besides its names (``focus``) and the text holds none of it: a sentence that only names
    the subject ("I've seen hatters before ... mad") repeats the question and adds nothing."""
    total = sum(weight[t] for t in found)
    return total * FOCUS_SHARE if focus and not found & focus else total


def word_scores(question: str, texts: Sequence[str]) -> tuple[float, ...]:
    """Share of the question's content stems in each text, each stem weighted by its rarity among
    ``texts`` (a stem in every text counts least); a text holding none of what the question asks about
    besides its names counts ``FOCUS_SHARE``."""
    if not texts:
        return ()
    found, weight = found_terms(question, texts)
    focus = focus_terms(question)
    return tuple(focused(f, weight, focus) for f in found)


def relevance(question: str, texts: Sequence[str], encoder: Any = None) -> tuple[float, ...]:
    """One relevance score in [0, 1] per text: meaning (with an encoder), words and the question's kind."""
    if not texts:
        return ()
    by_words = word_scores(question, texts)
    kind = asked(question)
    qwords = frozenset(words(question))
    typed = answer_type(question)
    by_kind = [
        KIND_WEIGHT * kind_cue(kind, t, qwords) + TYPE_WEIGHT * type_cue(typed, t, qwords) for t in texts
    ]
    cue_weight = KIND_WEIGHT + (TYPE_WEIGHT if typed.kind else 0.0)  # no type asked: scores as before
    if encoder is None:
        total = WORDS_WEIGHT + cue_weight
        return tuple((WORDS_WEIGHT * w + k) / total for w, k in zip(by_words, by_kind, strict=True))
    vectors = encoder.encode([getattr(encoder, "query_prefix", "") + question, *texts])
    cosines = [max(0.0, float(v @ vectors[0])) for v in vectors[1:]]
    total = MEANING_WEIGHT + WORDS_WEIGHT + cue_weight
    return tuple(
        (MEANING_WEIGHT * c + WORDS_WEIGHT * w + k) / total
        for c, w, k in zip(cosines, by_words, by_kind, strict=True)
    )


def needs_previous(text: str) -> bool:
    """The sentence cannot be read alone: it opens with a pronoun or connective ("He", "But", "Then"),
    in lower case, or closes a quotation it did not open."""
    stripped = text.lstrip()
    if not stripped:
        return False
    if stripped[0].islower() or stripped[0] in ",;:—-)":
        return True
    opened = sum(stripped.count(q) for q in _OPENING_QUOTES)
    closed = sum(stripped.count(q) for q in _CLOSING_QUOTES if q == "”")
    if closed > opened and "”" in stripped:
        return True
    return bool(_DEPENDENT.match(stripped))


def word_count(text: str) -> int:
    """Words of a text, split on whitespace."""
    return len(text.split())
