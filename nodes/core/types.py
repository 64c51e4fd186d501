"""Shared value types passed between Folio's stages.

Every node output is a small immutable value: a frozen dataclass or a tuple of them. The Kiwix values
are in ``nodes/core/kiwix_types.py``.
Offsets are character offsets into a chapter's text (``chapter.text[start:end]``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TypeVar

# Honorifics and titles and the gender they imply ("" = either): split off names by the concept map
# builder (``nodes.ingest.concepts``); never a hit on their own in ``concept_map_lookup``.
HONORIFICS = {
    "mr": "m", "mister": "m", "messrs": "m", "sir": "m", "lord": "m", "monsieur": "m", "herr": "m",
    "king": "m", "prince": "m", "count": "m", "baron": "m", "duke": "m", "master": "m", "father": "m",
    "mrs": "f", "miss": "f", "ms": "f", "madame": "f", "mme": "f", "mademoiselle": "f", "lady": "f",
    "dame": "f", "queen": "f", "princess": "f", "countess": "f", "duchess": "f", "frau": "f",
    "dr": "", "doctor": "", "captain": "", "capt": "", "colonel": "", "col": "", "major": "",
    "general": "", "inspector": "", "professor": "", "prof": "", "rev": "", "reverend": "",
    "lieutenant": "", "lt": "", "sergeant": "", "judge": "", "mate": "",
}  # fmt: skip

# What an answer says when the evidence does not support one (``nodes.query.answering``;
# ``nodes.eval.metrics``
# checks it).
NOT_FOUND = "I could not find support for this in the books."


def one_line(text: str) -> str:
    """``text`` safe to print on one line: control characters escaped (``\\n``, ``\\x1b``), and the bytes of
    a non-UTF-8 file name (surrogate escapes) shown as ``\\xNN``; printable text is unchanged."""
    if text.isprintable():
        return text
    out = []
    for ch in text:
        if ch.isprintable() or ch == " ":
            out.append(ch)
        elif "\udc80" <= ch <= "\udcff":
            out.append(f"\\x{ord(ch) - 0xDC00:02x}")
        else:
            out.append(repr(ch)[1:-1])
    return "".join(out)


class FolioError(Exception):
    """A user-facing failure about one file or source: printed as one line by the CLI.

    ``source`` names the file, book or server the failure concerns (kept as given); the message and
    ``reason`` are ``one_line``: a file name with a newline or non-UTF-8 bytes cannot split or break it.
    """

    def __init__(self, source: str, reason: str) -> None:
        self.source = source
        self.reason = one_line(str(reason))
        super().__init__(f"{one_line(str(source))}: {self.reason}")


@dataclass(frozen=True)
class Deadline:
    """A moment (``time.monotonic()`` seconds) by which some work must be done, ``seconds`` after it began.

    One ``ask`` has one (``ask_deadline_seconds``): router, sources and answer together. A client
    bounds each wait with ``bound(its own timeout)`` and stops when ``remaining()`` is 0.
    """

    at: float
    seconds: float

    @classmethod
    def after(cls, seconds: float) -> Deadline:
        """The deadline ``seconds`` from now."""
        return cls(time.monotonic() + float(seconds), float(seconds))

    def remaining(self) -> float:
        """Seconds left (0.0 once passed)."""
        return max(0.0, self.at - time.monotonic())

    def expired(self) -> bool:
        return time.monotonic() >= self.at

    def bound(self, timeout: float | None) -> float:
        """``timeout`` cut to the time left (the time left when ``timeout`` is None)."""
        left = self.remaining()
        return left if timeout is None else min(float(timeout), left)


def interrupted(exc: BaseException) -> bool:
    """``exc`` is, or was raised while handling, a Ctrl-C (``KeyboardInterrupt``): a library's clean-up
    hook (Hamilton's cache adapter asserts) may replace the interrupt with its own error on the way out."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, KeyboardInterrupt):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


@dataclass(frozen=True)
class RawChapter:
    """A chapter as parsed from the source: title and plain text (paragraphs separated by blank lines)."""

    title: str
    text: str
    pages: tuple[tuple[int, str], ...] = ()  # (offset in text, page label) where each page starts


@dataclass(frozen=True)
class ParsedBook:
    """A parsed source file before ids are assigned."""

    source_path: str
    format: str  # the reader's format name (readers.table): "epub", "txt", "pdf", "mobi", ...
    title: str
    author: str
    language: str
    chapters: tuple[RawChapter, ...]
    page_count: int = 0  # pages of a paged format (PDF), 0 otherwise
    page_labels: tuple[str, ...] = ()  # each page's label, in file order (PDF)


@dataclass(frozen=True)
class Chapter:
    """A chapter with its stable, content-derived id."""

    chapter_id: str
    order: int
    title: str
    text: str
    pages: tuple[tuple[int, str], ...] = ()  # (offset in text, page label) where each page starts

    @property
    def length(self) -> int:
        return len(self.text)


@dataclass(frozen=True)
class Manifest:
    """What a book is: identity, metadata and its chapters in reading order."""

    book_id: str
    title: str
    author: str
    language: str
    source_file: str
    format: str
    content_hash: str
    chapters: tuple[Chapter, ...]
    page_labels: tuple[str, ...] = ()  # a paged format's page labels in file order (PDF), else empty

    def chapter(self, chapter_id: str) -> Chapter:
        for chapter in self.chapters:
            if chapter.chapter_id == chapter_id:
                return chapter
        raise KeyError(chapter_id)


@dataclass(frozen=True)
class Chunk:
    """A span of one chapter: ``chapter.text[start:end] == text``; never crosses a chapter boundary."""

    chunk_id: str
    chapter_id: str
    ordinal: int  # position of the chunk within the book
    start: int
    end: int
    n_tokens: int
    text: str


@dataclass(frozen=True)
class Window:
    """A piece of a chunk that fits the encoder's window; several windows map back to one chunk."""

    window_id: int  # key in the vector index, unique within the book
    chunk_id: str
    start: int  # chapter offsets, inside the chunk's span
    end: int
    text: str


@dataclass(frozen=True)
class Hit:
    """One search result, located exactly."""

    book_id: str
    chapter_id: str
    chapter_title: str
    chunk_id: str
    start: int
    end: int
    score: float
    text: str
    signals: tuple[tuple[str, float], ...] = field(default=(), compare=False)
    book_title: str = field(default="", compare=False)  # located like a Citation (``located_hit``)
    page: str = field(default="", compare=False)
    percent: float | None = field(default=None, compare=False)

    def as_dict(self) -> dict[str, object]:
        keys = ("book_id", "book_title", "chapter_id", "chapter_title", "chunk_id", "start", "end", "page")
        return {
            **{k: getattr(self, k) for k in keys},
            "percent": self.percent,
            "score": round(self.score, 6),
            "text": self.text,
        }


@dataclass(frozen=True)
class IndexFile:
    """A file an ingest node wrote into the book's staging directory."""

    path: str
    count: int


@dataclass(frozen=True)
class StagedBook:
    """A fully written staged book directory, ready to be committed into the library."""

    book_id: str
    directory: str
    title: str
    n_chapters: int
    n_chunks: int
    n_windows: int


# --- Concept map (nodes/ingest/concepts.py) ---------------------------------------------------------------
# A per-book map of entities, themes and events with chapter links (strongest evidence first) and light
# evidence. ``to_json`` is deterministic (sorted keys, floats rounded to 6 places): byte-identical bytes.
CONCEPT_MAP_VERSION = 1


@dataclass(frozen=True)
class Evidence:
    """An excerpt pointer: ``chapter.text[start:end]``, inside the span of chunk ``chunk_id``."""

    chapter_id: str
    chunk_id: str
    start: int
    end: int


@dataclass(frozen=True)
class Entity:
    """A named character, place or thing; ``aliases`` lists every surface form, the name included."""

    entity_id: str
    name: str
    aliases: tuple[str, ...]
    mentions: int
    chapter_ids: tuple[str, ...]
    terms: tuple[str, ...]
    excerpts: tuple[Evidence, ...]
    entity_type: str = ""  # person, place, organisation, object or other when an LLM typed it; else ""


@dataclass(frozen=True)
class Theme:
    """A cluster of chunks about one topic: a short label, its keywords and the chapters it spans."""

    theme_id: str
    label: str
    keywords: tuple[str, ...]
    size: int  # chunks in the cluster
    cohesion: float  # mean blended similarity between its chunks
    chapter_ids: tuple[str, ...]
    excerpts: tuple[Evidence, ...]


@dataclass(frozen=True)
class Event:
    """Entities that appear together (same paragraph or window), where and how often."""

    event_id: str
    label: str
    participants: tuple[str, ...]  # entity ids, most salient first
    weight: int  # paragraphs or windows where they appear together
    chapter_ids: tuple[str, ...]
    terms: tuple[str, ...]
    excerpts: tuple[Evidence, ...]


def _concept_plain(value: object) -> object:
    """JSON-ready form of concept-map values (tuples as lists, floats rounded)."""
    if isinstance(value, float):
        return round(value, 6)
    if isinstance(value, (tuple, list)):
        return [_concept_plain(v) for v in value]
    if hasattr(value, "__dataclass_fields__"):
        return {name: _concept_plain(getattr(value, name)) for name in value.__dataclass_fields__}
    return value


_Item_T = TypeVar("_Item_T")


def _concept_item(cls: type[_Item_T], row: dict) -> _Item_T:
    """Rebuild one entity, theme or event from its JSON form (lists back to tuples)."""
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in row.items()}
    values["excerpts"] = tuple(Evidence(**e) for e in row["excerpts"])
    return cls(**values)


@dataclass(frozen=True)
class ConceptMap:
    """A book's concept map: entities, themes and events, each linked to at most 24 chapters."""

    book_id: str
    entities: tuple[Entity, ...]
    themes: tuple[Theme, ...]
    events: tuple[Event, ...]
    version: int = CONCEPT_MAP_VERSION
    notes: tuple[str, ...] = ()  # how it was made when not plainly (the LLM's normalisation, or why not)

    def to_json(self) -> bytes:
        """Deterministic UTF-8 JSON: sorted keys, no whitespace, floats rounded to 6 places."""
        import json

        return json.dumps(
            _concept_plain(self), sort_keys=True, separators=(",", ":"), ensure_ascii=False
        ).encode("utf-8")

    @classmethod
    def from_json(cls, data: bytes) -> ConceptMap:
        """Read bytes written by ``to_json``; raise FolioError if they are not a concept map."""
        import json

        try:
            raw = json.loads(data)
            return cls(
                book_id=raw["book_id"],
                entities=tuple(_concept_item(Entity, row) for row in raw["entities"]),
                themes=tuple(_concept_item(Theme, row) for row in raw["themes"]),
                events=tuple(_concept_item(Event, row) for row in raw["events"]),
                version=int(raw["version"]),
                notes=tuple(str(n) for n in raw.get("notes", ())),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise FolioError("concept map", f"not a valid concept map: {exc}") from None


@dataclass(frozen=True)
class ConceptMatch:
    """One concept-map item matching a query: ``kind`` is "entity", "theme" or "event"."""

    kind: str
    item_id: str
    label: str
    score: float
    chapter_ids: tuple[str, ...]


@dataclass(frozen=True)
class ConceptMatches:
    """Concept-map items matching a query, best first, and the chapters they point to, best first."""

    query: str
    entities: tuple[ConceptMatch, ...]
    themes: tuple[ConceptMatch, ...]
    events: tuple[ConceptMatch, ...]
    chapter_ids: tuple[str, ...]


# --- end of concept map ----------------------------------------------------------------------------


# --- Ask: routing, book flow, cross-source fusion, answers (nodes/query/: routing.py, book_flow.py,
# answering.py)
# Routes are "BOOK", "NOT_BOOK" or "AMBIGUOUS". A citation is a book location (book_id, chapter_id,
# chapter_title, chunk_id, start, end) or a Kiwix/web location (zim or url, path, title).

ROUTES = ("BOOK", "NOT_BOOK", "AMBIGUOUS")


@dataclass(frozen=True)
class BookInfo:
    """What the router knows about one library book (from ``book.json``)."""

    book_id: str
    title: str
    author: str
    language: str = ""
    translator: str = ""  # when the file names one (``nodes/backends/editions.py``)
    edition: str = ""
    series: str = ""  # a Calibre series ("Sherlock Holmes"), when the book has one
    authors: tuple[str, ...] = ()  # every author, when known (``author`` joins them)

    def describe(self) -> str:
        """The book as the always-on context names it: title, author, translator and edition."""
        extra = [f"translated by {self.translator}"] if self.translator else []
        extra += [f"edition: {self.edition}"] if self.edition else []
        more = f"; {'; '.join(extra)}" if extra else ""
        return f"{self.title} by {self.author}{more}"


@dataclass(frozen=True)
class RouteDecision:
    """Where a question (or clause) goes: route, confidence in [0, 1], books, and what to search."""

    route: str
    confidence: float
    suggested_queries: tuple[str, ...] = ()
    book_ids: tuple[str, ...] = ()  # books the question is about, best first (empty for NOT_BOOK)
    reason: str = ""
    question: str = ""
    sources: tuple[str, ...] = ()  # the other sources a NOT_BOOK clause needs, as the LLM router named them

    def as_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "route": self.route,
            "confidence": round(self.confidence, 3),
            "suggested_queries": list(self.suggested_queries),
            "book_ids": list(self.book_ids),
            "reason": self.reason,
        }
        return {**out, "sources": list(self.sources)} if self.sources else out


@dataclass(frozen=True)
class Citation:
    """Where a claim comes from: a book (``kind`` "book": the sentence or passage at chapter offsets
    ``start``:``end``, read from chunk ``chunk_id``, its text in ``quote``; an agent's citation is the
    chunk) or an article (``kind`` "kiwix" / "web")."""

    kind: str
    book_id: str = ""
    chapter_id: str = ""
    chapter_title: str = ""
    chunk_id: str = ""
    start: int = 0
    end: int = 0
    zim: str = ""
    path: str = ""
    title: str = ""
    url: str = ""
    section: str = ""  # Kiwix: the article section of the passage ("" = the lead)
    quote: str = ""  # the cited text itself (a book answer: the sentence or passage at start:end)
    book_title: str = ""  # a book citation located in its book (``located_citation``): the book's title,
    page: str = ""  # the page or page range of a paged format (PDF: printed label, else number), and
    percent: float | None = None  # the position in the book, 0-100 (EPUB, MOBI and other flowing text)

    def as_dict(self) -> dict[str, object]:
        if self.kind == "book":
            return {
                "book_id": self.book_id,
                "book_title": self.book_title,
                "chapter_id": self.chapter_id,
                "chapter_title": self.chapter_title,
                "chunk_id": self.chunk_id,
                "start": self.start,
                "end": self.end,
                "page": self.page,
                "percent": self.percent,
                "quote": self.quote,
            }
        if self.kind == "kiwix":
            return {
                "zim": self.zim,
                "path": self.path,
                "title": self.title,
                "section": self.section,
                "url": self.url,
                "quote": self.quote,
            }
        return {"source": self.kind, "url": self.url, "title": self.title}


@dataclass(frozen=True)
class BookHits:
    """What one search of the books found (``folio search``'s ranking): the fused hits, best first, the
    lexical and semantic lists they were fused from (each ``search_depth(k)`` deep), the chapters boosted
    (None: none), one line per search made, and notes (a rerank that fell back, semantic unavailable)."""

    question: str
    hits: tuple[Hit, ...]
    lexical: tuple[Hit, ...]
    semantic: tuple[Hit, ...]
    scope: tuple[str, ...] | None = None
    searched: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class BookEvidence:
    """What the book flow retrieved: hits best first, where it looked and whether it is enough."""

    hits: tuple[Hit, ...]
    question_kind: str  # "concrete" | "conceptual"
    scope: tuple[str, ...] | None  # chapter ids searched last (None = whole books)
    searched: tuple[str, ...]  # one line per search made, for "what was searched"
    sufficient: bool
    widened: bool = False
    notes: tuple[str, ...] = ()
    missing_names: tuple[str, ...] = ()  # the clause's names no evidence text holds (when insufficient)
    aliases: tuple[tuple[str, str], ...] = ()  # (the question's name, the book's name for it)


@dataclass(frozen=True)
class ChapterSummary:
    """A chapter summary given to the LLM answer: its text and notes (an LLM summary that fell back to
    the extractive one), which the answer carries."""

    chapter_id: str
    text: str
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class SourceResult:
    """One source's answer to one question or clause (``error`` set when it failed)."""

    source: str  # "book" | "kiwix" | "web" | "news"
    label: str  # shown in the ``[SOURCE — LABEL]`` header
    text: str
    citations: tuple[Citation, ...] = ()
    error: str | None = None
    clause: str = ""
    notes: tuple[str, ...] = ()
    off_subject: bool = False  # a book answer whose cited chunks hold none of the clause's names


@dataclass(frozen=True)
class FusedContext:
    """The cross-source fusion of source results: joined text, the results kept, and notes."""

    text: str
    results: tuple[SourceResult, ...]
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Answer:
    """The answer to a question, with its citations, route, sources, tool-call count and notes."""

    question: str
    answer: str
    citations: tuple[Citation, ...]
    route: str
    sources_used: tuple[str, ...]
    tool_calls: int
    notes: tuple[str, ...] = ()
    routes: tuple[RouteDecision, ...] = ()

    def as_dict(self) -> dict[str, object]:
        return {
            "answer": self.answer,
            "citations": [c.as_dict() for c in self.citations],
            "route": self.route,
            "sources_used": list(self.sources_used),
            "tool_calls": self.tool_calls,
            "notes": list(self.notes),
        }


# --- end of ask ------------------------------------------------------------------------------------


# --- Library-scale ingest (nodes/ingest/collection.py) ---------------------------------------------------


@dataclass(frozen=True)
class BookOutcome:
    """One book's result: the staged book, or the one-line error (kept as strings: they pickle)."""

    source_file: str
    staged: StagedBook | None = None
    error_source: str = ""
    error_reason: str = ""
    cache_executed: tuple[str, ...] = ()  # ingest nodes this run computed
    cache_from_cache: tuple[str, ...] = ()  # ingest nodes it took from the library's node cache

    @property
    def error(self) -> FolioError | None:
        return None if self.staged is not None else FolioError(self.error_source, self.error_reason)


SEMANTIC_UNAVAILABLE = "Semantic search unavailable"


# What an answer says when no source answered (followed by what was searched, ``nodes.query.answering``).
NO_RESULTS = "I could not find support for this in the sources searched."
