"""What a question is about, and whether an article holds it: the subject rule of the ask's Kiwix source
(``nodes/query/source_fusion.py``: an article is cited only when it holds the question's subject).

- ``subject_terms`` / ``holds_subject``: what a question without names is about (its last "of" phrase,
  "the boiling point of ethanol" -> ethanol, all of it needed; else half of its content words, past forms
  out) and whether a text holds it.
- ``titles_subject``: an article's title is the question's first subject words ("Emu" of "Where do emus
  live in the wild?").
- ``past_forms``: the relation a question names in a past form ("wrote", "invented"), which an article
  words its own way.
- ``off_subject(question, text, chunks)``: a book answer that names none of the question's names, from
  chunks that write none of them as names (the ask then asks Kiwix, whose article answers instead).
- ``passing_subject(question, text, chunks, evidence)``: such an answer whose names the evidence holds
  in one text at most (a mention in passing) is no answer: the book flow refuses it ("What happened to
  the Titanic?" over Moby-Dick's one "Titanic", a circus-rider, answered with sharks and whale-boats).
- ``unheld(query, section)``: why a Kiwix passage is not cited (None when its article holds the
  subject); the Kiwix stage (``nodes/kiwix/fusion.py``) reads the book's next article when the best one
  does not, and the ask's Kiwix source (``nodes/query/source_fusion.py``) cites only what holds it.

Words are matched as the reader matches them (``sentence_scoring.held_terms``: light stems, irregular
forms read as their base).

Config keys: none. Limitations: English cues; word lists and light stems, not a parser: "Since when
has the raccoon ..." reads "since" as a subject word.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Sequence

from folio.nodes.core.evidence import asked_terms, asked_words
from folio.nodes.core.kiwix_types import ContextSection
from folio.nodes.core.ranking import missing_names, name_phrases, names_in, unqualified
from folio.nodes.core.sentence_scoring import held_terms
from folio.nodes.core.text import QUESTION_STOPWORDS, base_words, content_words, stem
from folio.nodes.core.word_forms import irregular_base, lemma

_DETERMINERS = frozenset(["a", "an", "the"])


def _verb_like(word: str) -> bool:
    """A form that ends a noun phrase: a past form ("used", "made", "written"), a question stop word."""
    return word in QUESTION_STOPWORDS or _past(word)


def subject_terms(question: str) -> tuple[frozenset[str], bool]:
    """(stems, all needed) of what a question is about: the content words of its last "of" phrase ("the
    boiling point of ethanol" -> ethanol, "the chemical formula of table salt" -> table, salt), all of
    them needed; else its content words (question stop words and past forms out: "Who invented the
    telephone?" -> telephone), ``SUBJECT_SHARE`` of them enough (half: the Wiki article's "wiki
    engines" does not hold "How does a car engine work?")."""
    ws = base_words(question)
    for i in range(len(ws) - 1, -1, -1):
        if ws[i] != "of":
            continue
        j = i + 1
        while j < len(ws) and ws[j] in _DETERMINERS:
            j += 1
        phrase = []
        while j < len(ws) and not _verb_like(ws[j]):
            phrase.append(ws[j])
            j += 1
        if phrase:
            return frozenset(stem(w) for w in phrase), True
    content = [w for w in ws if w not in QUESTION_STOPWORDS]
    nouns = [w for w in content if not _verb_like(w)] or content  # "invented" is not what it is about
    return frozenset(lemma(w) for w in nouns), False


SUBJECT_SHARE = 0.5  # of a question's content words (no names, no "of" phrase) an article must hold


def holds_subject(question: str, text: str) -> bool:
    """Whether ``text`` (an article's title and cited passage) holds what the question is about
    (``subject_terms``, light stems, "gastropod" in "Gastropoda"); a question of nothing but stop words
    has no subject to check."""
    terms, every = subject_terms(question)
    if not terms:
        return True
    held = held_terms(terms, text)
    return held == terms if every else len(held) >= max(1, math.ceil(SUBJECT_SHARE * len(terms)))


_PASSIVE = frozenset({"was", "were", "is", "are", "be", "been", "being"})


def past_forms(question: str) -> frozenset[str]:
    """The stems of the question's active past forms ("wrote", "invented"), read as their base ("write");
    not a passive's participle, which is what it asks ("When was Ray Charles born?": a "was" before it)."""
    ws = base_words(question)
    active = [w for i, w in enumerate(ws) if _past(w) and _PASSIVE.isdisjoint(ws[:i])]
    return frozenset(lemma(w) for w in active)


def _past(word: str) -> bool:
    return irregular_base(word) is not None or (word.endswith("ed") and len(word) > 4)


def about_subject(question: str, title: str) -> bool:
    """Whether an article's title (without its "(qualifier)") is the question's subject itself: one of
    its names ("Ray Charles" of "When did Ray Charles die?", not "African Americans" of Africa), or,
    for a question without names, its first subject words (``titles_subject``)."""
    names = name_phrases(question)
    if not names:
        return titles_subject(question, title)
    core = " ".join(content_words(unqualified(title)))
    return any(" ".join(content_words(name)) == core for name in names)


def titles_subject(question: str, title: str) -> bool:
    """Whether an article's title (without its "(qualifier)") is what the question is about: its content
    words are the question's first ones, past its question words ("Emu" of "Where do emus live in the
    wild?", whose passage says "living" and "endemic to Australia", not "live" or "wild"; not "Live
    (album)")."""
    words = content_words(unqualified(title))
    asked = [w for w in base_words(question) if w not in QUESTION_STOPWORDS][: len(words)]
    pairs = zip(words, asked, strict=False)
    return (
        bool(words)
        and len(asked) == len(words)
        and all(held_terms(frozenset({stem(q)}), w) for w, q in pairs)
    )


def _titled(section: ContextSection) -> str:
    return f"{section.title} › {section.section}" if section.section else section.title


def _subject(query: str) -> str:
    names = name_phrases(query)
    return ", ".join(names) if names else ", ".join(sorted(subject_terms(query)[0]))


@functools.lru_cache(maxsize=256)
def unheld(query: str, section: ContextSection) -> str | None:
    """Why an article (its title, section and cited passage) is not cited, or None when it holds the
    question's subject: at least half of the query's names, at least one (``scores.missing_names``:
    "Termites" does not hold "Red-Headed League", "Come Back Baby" not "Ebenezer Scrooge ... the Ghost of
    Christmas Yet to Come"); and, unless its title holds every name or its passage each of several,
    something the question asks about them (``evidence.asked_terms``: the Lion article names Africa but
    says nothing of its tallest mountain; "That Lucky Old Sun" holds the Sun, not the Moon, and says
    nothing of blocking it; "Solar eclipse" holds both and says "obscuring"); without names, what it asks
    about (``holds_subject``: "the boiling point of ethanol" is not held by the Oxygen article). The
    subject is looked for in the article's opening paragraph too (``lead``: what the article is about;
    "Antarctica is Earth's southernmost continent" holds the Earth of "Which continent is the coldest and
    driest on Earth?" when the passage answering it does not), and a question without names is about an
    article whose title is one of its subject words (``titles_subject``); what is asked about a name, in
    the title and passage only, and not the relation a past form names ("wrote" of "Who wrote The
    Communist Manifesto?", which the Karl Marx article words its own way: ``past_forms``). Remembered per
    (query, section): the Kiwix stage judges the article it keeps, and the ask's Kiwix source judges it
    again before citing."""
    names = names_in(query)
    title = _titled(section)
    text = f"{title}\n{section.text}"
    about = f"{text}\n{section.lead}"
    if names:
        held = len(names) - len(missing_names(query, [about]))
        holds = held > 0 and 2 * held >= len(names)
    else:
        holds = holds_subject(query, about) or titles_subject(query, section.title)
    if not holds:
        return f"does not hold the question's subject ({_subject(query)})"
    focus = asked_terms(query) - past_forms(query) if names else frozenset()
    if not focus or not missing_names(query, [title]) or held_terms(focus, text):
        return None
    if len(names) > 1 and not missing_names(query, [text]):
        return None  # every name of several in the passage: it is about them ("Solar eclipse": Moon, Sun)
    return f"names {_subject(query)} but says nothing of {' '.join(asked_words(query))}"


def off_subject(question: str, text: str, chunks: Sequence[str]) -> bool:
    """A book answer off the question's subject: the question has names, none of them in the answer's
    ``text`` and none written as a name (capitalised) in the evidence ``chunks`` it cites: "When does the
    Moon block out the Sun?" answered from The Time Machine's windows "blocked by fallen masses of
    stone", in a chunk with "the moon" and "the sun" only; not "Then she piled twenty mattresses ...",
    whose chunk names "the old Queen"."""
    names = names_in(question)
    if not names or len(missing_names(question, [text])) < len(names):
        return False
    cited = " ".join(chunks)
    return not any(re.search(rf"\b{re.escape(' '.join(name))}\b", cited) for name in names)


TITLES = frozenset(["Mr", "Mrs", "Miss", "Ms", "Dr", "Sir", "Lady", "Lord", "Mister", "Madam", "Saint", "St"])


def _name_words(question: str) -> frozenset[str]:
    """The words of the question's names as written, but titles of address and short words."""
    return frozenset(w for n in names_in(question) for w in n if len(w) > 2 and w not in TITLES)


def passing_subject(question: str, text: str, chunks: Sequence[str], evidence: Sequence[str]) -> str | None:
    """The note when a book answer is ``off_subject`` and at most one ``evidence`` text (a hit's text and
    its chapter's title) holds the question's names (``missing_names``: "The Frog Prince" titling the
    tale) or writes a word of them (as written, a title of address aside): the name that let the
    evidence pass is a mention in passing, and the passage that would be cited does not hold it. None
    otherwise: a name many evidence texts hold is what they are about ("Julia Stoner" of the Speckled
    Band, named "Julia" in most of its chunks), and an answer may speak of it as "he" or "her" ("Then I
    tried talk, and found that her name was Weena")."""
    if not chunks or not off_subject(question, text, chunks):
        return None
    names = [" ".join(n) for n in names_in(question)]
    named = _name_words(question)
    pattern = re.compile(r"\b(?:" + "|".join(map(re.escape, sorted(named))) + r")\b") if named else None
    holders = [
        t
        for t in evidence
        if len(missing_names(question, [t])) < len(names) or (pattern is not None and pattern.search(t))
    ]
    if len(holders) > 1:
        return None
    held = [n for n in names if n not in missing_names(question, holders)] or names
    found = f"Found {', '.join(held)} in the books only in passing"
    return f"{found}; the passage that would answer does not name it"
