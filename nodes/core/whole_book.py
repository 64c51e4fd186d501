"""Whole-book questions ("what is the book about", "how does a character change", "its themes"),
answered from the book's synopsis and its chapter summaries instead of one passage.

Such a question has no one passage that answers it: the reader (``nodes/core/reading.py``) would quote
whatever sentence repeats the title. The overview is extractive, as the summaries are without an LLM:

- ``is_whole_book(question)``: the question asks about the book as a whole (``WHOLE_BOOK`` patterns:
  "what is X about", "what kind of book", "how does X end", "how does X change", "main characters",
  "themes", "who narrates", "which stories/tales ...", "which animals appear in the tales", "what
  happens ... in these stories", "usually"; tuned on ``tests/qa/books27_dev.jsonl`` only), and "who wrote
  <the book's title>" (``AUTHOR_ASK``: the synopsis line names the author).
- ``is_library_question(question)`` (the router's test), ``asks_library(route)`` (its decision) /
  ``library_answer(route, catalog)``: a question about the library
  itself ("Which books are in my library?", "What books do I have?": ``LIBRARY_ASK``) is routed to the
  books (``routing._deterministic``, never to Kiwix or the LLM router) and answered from the catalogue,
  one line per book, uncited (the books' metadata, no passage).
- ``focus_words(question, title)``: its content words that are neither the book's title and author nor
  the words every whole-book question uses (``GENERIC``): "Which stories are about a wolf?" → wolf.
- ``overview(question, book_line, characters, chapters, max_words)``: ``chapters`` are the book's
  ``(chapter_id, title, text, summary)`` in book order (``summary``: the chapter's stored summary, whose
  sentences are the chapter's own). With focus words, the chapters whose summary (else text) sentences
  hold most of them, the chapters saying them most first, each giving that sentence; without, a
  sentence of the story chapters (no ``FRONT_MATTER``: "Etymology", "Extracts", "Contents") spread over
  the book (first, last, the middle; "how does X end": the last chapter alone): the narrator's sentence
  (``QUOTATION``: no line of dialogue) naming most of the book's key words (its title's words and its
  main characters: "Chief among these motives was the overwhelming idea of the great whale himself"),
  else the chapter summary's first. The sentences (``MIN_WORDS`` to ``MAX_WORDS`` words) are located in their
  chapter (offsets, so a citation resolves to the book's text) and read in book order, each after its
  chapter's title, at most ``max_words`` words with the synopsis line (``Overview.lines``: the book, and
  its main characters from the concept map when the question has no focus words or asks about them).

Config keys: none (the caller passes ``answer_max_words``). Limitations: English patterns; an extractive
overview quotes the book, it does not paraphrase, so themes are shown through sentences, not named; a
collection's answer (fairy tales) samples a few of its stories.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from folio.nodes.core.reading import Passage, Quote
from folio.nodes.core.text import fold, sentences, stems
from folio.nodes.core.types import BookInfo, RouteDecision, SourceResult

MIN_WORDS = 8  # shorter sentences (dialogue tags: "Why not?" said the Time Traveller) are not offered
MAX_WORDS = 30  # longer ones leave no room for a second chapter in a 60-word answer
SPREAD = 3  # chapters an overview without focus words quotes
FOCUSED = 4  # chapters an overview with focus words quotes at most
WHOLE_BOOK = re.compile(
    r"^what (?:is|was) [\w' ,:-]{2,80} about$"
    r"|^what kind of (?:book|story|stories|tales?|novel)\b"
    r"|^how does [\w' ,:-]{2,80} (?:end|change)\b"
    r"|\b(?:who|which) are the main characters\b|^which characters\b"
    r"|\bthe (?:main )?themes?\b|^who (?:narrates|tells)\b"
    r"|^which (?:stories|tales)\b|^which \w+ (?:appear|are)\b.*\b(?:stories|tales)$"
    r"|^what happens\b.*\b(?:these|the|its) (?:stories|tales)$"
    r"|\busually\b"
)
QUOTATION = re.compile('["“”‘]')  # a sentence quoting someone (a lone ’ is an apostrophe)
# chapters that are no part of the story: an overview without focus words quotes none of them
FRONT_MATTER = re.compile(
    r"^\W*(?:etymology|extracts?|preface|(?:table of )?contents|dedication|epigraph|transcriber|copyright"
    r"|list of|illustrations|footnotes|index|glossary)\b"
)
GENERIC = frozenset(
    stems(
        "book books story stories tale tales novel about kind main character characters theme themes happen "
        "happens narrate narrates tell tells end ends change changes usually say says appear meet "
        "treasury collection whole over during wrote write writer author"
    )
)


@dataclass(frozen=True)
class Overview:
    """A whole-book answer: its synopsis lines (uncited: the book and its main characters) and the
    chapter sentences it quotes, one passage in book order."""

    lines: tuple[str, ...]
    passage: Passage


def _question(question: str) -> str:
    return " ".join(fold(question).replace("?", " ").replace("’", "'").split())


# Questions about the library itself, not a book in it: "Which books are in my library?", "What books do
# I have?", "How many books do I own?", "List my books". The library phrase must end the question:
# "What books do I have about whales?" asks the books, and "Which books did Alice read?" is no such ask.
LIBRARY_ASK = re.compile(
    r"^(?:which|what|how many) (?:books?|titles|novels|authors)\b.*"
    r"\b(?:(?:my|this|the) (?:library|collection)|(?:do )?i (?:have|own)|have i(?: got)?|are there)$"
    r"|^what (?:is|are) in (?:my|this|the) (?:library|collection)$"
    r"|^(?:list|show)(?: me)?(?: all)?(?: of)? (?:my|the) (?:books|library)(?: in (?:my|the) library)?$"
)
LIBRARY_NOTE = "Question about the library itself: answered from its catalogue (`folio books` lists it too)"


def is_library_question(question: str) -> bool:
    """Whether the question asks what the library holds (``LIBRARY_ASK``), not what a book says."""
    return bool(LIBRARY_ASK.search(_question(question).rstrip(".! ")))


def asks_library(route: RouteDecision) -> bool:
    """Whether the router sent the clause to the catalogue (reason ``LIBRARY_NOTE``): the router decides
    once; the book flow then searches nothing and the answer nodes give ``library_answer``."""
    return route.reason == LIBRARY_NOTE


def library_answer(route: RouteDecision, catalog: Sequence[BookInfo]) -> SourceResult:
    """The catalogue answer: how many books the library holds, then each one, "Title by Author" (from the
    book's own metadata, so nothing to cite: the answer is uncited, with a note saying why)."""
    plural = "" if len(catalog) == 1 else "s"
    lines = [f"Your library holds {len(catalog)} book{plural}:"]
    lines.extend(f"- {b.title or b.book_id}" + (f" by {b.author}" if b.author else "") for b in catalog)
    label = "library catalogue"
    return SourceResult("book", label, "\n".join(lines), (), None, route.question, (LIBRARY_NOTE,))


# "Who wrote The Time Machine?", "Who is the author of Flatland?": the rest must name the book
AUTHOR_ASK = re.compile(r"^who (?:wrote|(?:is|was) the (?:author|writer) of) ([\w' ,:-]{2,80})$")


def is_whole_book(question: str, title: str = "") -> bool:
    """Whether the question asks about the book as a whole (see ``WHOLE_BOOK``), or who wrote the book
    titled ``title`` (``AUTHOR_ASK``, its rest naming nothing but words of the title: not "Who wrote the
    letter to the King of Bohemia?"), which the overview's first line answers ("The Time Machine by H. G.
    Wells")."""
    asked = _question(question)
    if WHOLE_BOOK.search(asked):
        return True
    author = AUTHOR_ASK.match(asked)
    named = stems(author.group(1)) - GENERIC if author else frozenset()
    return bool(named) and named <= stems(title)


def focus_words(question: str, title: str) -> frozenset[str]:
    """The question's content stems other than the book's title and author and ``GENERIC``."""
    return frozenset(stems(question) - stems(title) - GENERIC)


def _offered(text: str) -> list[tuple[int, int, str]]:
    """The chapter's sentences of ``MIN_WORDS`` to ``MAX_WORDS`` words: (start, end, normalised text)."""
    out = []
    for s, e in sentences(text):
        said = " ".join(text[s:e].split())
        if MIN_WORDS <= len(said.split()) <= MAX_WORDS:
            out.append((s, e, said))
    return out


def _located(text: str, sentence: str) -> tuple[int, int] | None:
    pattern = r"\s+".join(re.escape(w) for w in sentence.split())
    found = re.search(pattern, text) if pattern else None
    return (found.start(), found.end()) if found else None


def _summary_sentence(text: str, summary: str, focus: frozenset[str]) -> tuple[int, int, str, float] | None:
    """The chapter's sentence for the overview, as (start, end, text, score): with ``focus``, the one
    holding most focus words (summary sentences first, then the chapter's), None when none holds one;
    without, the summary's first sentence found in the chapter."""
    summary_spans = [(s, e, " ".join(summary[s:e].split())) for s, e in sentences(summary)]
    picked = [p for p in summary_spans if MIN_WORDS <= len(p[2].split()) <= MAX_WORDS]
    if not focus:
        for _, _, said in picked:
            where = _located(text, said)
            if where:
                return (*where, said, 0.0)
        return None
    best = _holding_most(text, focus, len(focus))
    in_summary = {said for _, _, said in picked}
    if best is not None and best[2] not in in_summary:
        for _, _, said in picked:  # a summary sentence as good as the best is the chapter's own word
            where = _located(text, said)
            if where and len(focus & stems(said)) / len(focus) >= best[3]:
                return (*where, said, best[3])
    return best


def _holding_most(
    text: str, wanted: frozenset[str], per: float = 1.0, narrator_only: bool = False
) -> tuple[int, int, str, float] | None:
    """Of the chapter's ``_offered`` sentences (with ``narrator_only``, those that quote no one: not a line
    of dialogue), the first holding most ``wanted`` stems, as (start, end, text, how many / ``per``);
    None when none holds one."""
    best: tuple[int, int, str, float] | None = None
    for s, e, said in _offered(text):
        if narrator_only and QUOTATION.search(said):
            continue
        score = len(wanted & stems(said)) / per
        if score > 0 and (best is None or score > best[3]):
            best = (s, e, said, score)
    return best


def _unfocused(
    title: str, text: str, summary: str, keys: frozenset[str]
) -> tuple[int, int, str, float] | None:
    """A story chapter's sentence for an overview without focus words: its narrator's sentence saying most
    of the book's ``keys`` (its title's words and its main characters' names), else its summary's first;
    None for front matter ("Etymology", "Contents")."""
    if FRONT_MATTER.search(fold(title)):
        return None
    return _holding_most(text, keys, narrator_only=True) or _summary_sentence(text, summary, frozenset())


def _mentions(text: str, focus: frozenset[str]) -> int:
    """How often the text says a focus word (its light stem as a word's start)."""
    return sum(len(re.findall(rf"\b{re.escape(f)}", text, re.IGNORECASE)) for f in focus)


def _spread(n: int, k: int) -> list[int]:
    """``k`` indices of ``range(n)`` spread over it: the first, the last, then the middle ones."""
    if k >= n:
        return list(range(n))
    if k <= 1:
        return [0]
    return sorted({round(i * (n - 1) / (k - 1)) for i in range(k)})


def overview(
    question: str,
    book_id: str,
    book_line: str,
    characters: Sequence[str],
    chapters: Sequence[tuple[str, str, str, str]],
    max_words: int,
) -> Overview | None:
    """The whole-book answer of the module docstring; None when no chapter offers a sentence."""
    focus = focus_words(question, book_line)
    # the book's people answer an unfocused question ("what is it about") or one about its characters
    with_characters = bool(characters) and (not focus or "character" in _question(question))
    lines = [
        f"{book_line}. Main characters: {', '.join(characters)}." if with_characters else f"{book_line}."
    ]
    budget = max_words - len(lines[0].split())
    keys = frozenset(stems(book_line.split(" by ")[0]) | stems(" ".join(characters))) - GENERIC
    found = [
        (i, _summary_sentence(text, summary, focus) if focus else _unfocused(title, text, summary, keys))
        for i, (_, title, text, summary) in enumerate(chapters)
    ]
    offered = [(i, s) for i, s in found if s is not None]
    if not offered:
        return None
    if focus:  # the chapters most about the focus words (how often they say them), then book order
        said = {i: _mentions(chapters[i][2], focus) for i, _ in offered}
        ranked = sorted(offered, key=lambda f: (-f[1][3], -said[f[0]], f[0]))
    elif re.search(r"\bend$", _question(question)):
        ranked = offered[-1:]
    else:
        ranked = [offered[i] for i in _spread(len(offered), SPREAD)]
    picked: list[tuple[int, tuple[int, int, str, float]]] = []
    for i, sentence in ranked:  # each that fits with its chapter's title, at most FOCUSED
        cost = len(sentence[2].split()) + len(chapters[i][1].split())
        if cost <= budget and len(picked) < FOCUSED:
            budget -= cost
            picked.append((i, sentence))
    quotes = [
        Quote(book_id, chapters[i][0], chapters[i][1], "", start, end, said_, score)
        for i, (start, end, said_, score) in sorted(picked)
    ]
    if not quotes:
        return None
    return Overview(tuple(lines), Passage(tuple(quotes), max(q.score for q in quotes)))
