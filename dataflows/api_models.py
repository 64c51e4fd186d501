"""The JSON shapes of ``folio serve``'s HTTP API as Pydantic models: what each route accepts and returns,
so ``/docs`` and ``/openapi.json`` show real schemas.

The shapes are the CLI's ``--json`` shapes (``dataflows.service``); the models name their fields and
types but let a shape carry fields they do not name (``extra="allow"``), and the routes drop the fields
a response did not set (``response_model_exclude_unset``), so a response is the service's dict as it
was, only checked. Numbers the service may give as an integer or a float are ``int | float`` (no
``3`` turned into ``3.0``).

Config: none. Limitations: a field added to a service shape is served (``extra="allow"``) but shows in
the schema only once named here.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

Number = int | float


class Shape(BaseModel):
    """A JSON object of the API: the named fields checked, any others passed through as they are."""

    model_config = ConfigDict(extra="allow")


# --- requests ------------------------------------------------------------------------------------------
class BookFilters(BaseModel):
    """``author``, ``series``, ``tag``, ``language``, ``format`` (``dataflows.filtering``): query
    parameters of ``/api/books`` and ``/api/search``, a ``filters`` object in ``/api/ask``'s body."""

    author: str | None = None
    series: str | None = None
    tag: str | None = None
    language: str | None = None
    format: str | None = None


# --- service -------------------------------------------------------------------------------------------
class Health(Shape):
    """``GET /api/health``: liveness and what this process serves."""

    status: str
    version: str
    library: str
    books: int
    kiwix: str | None = None
    llm: Any = Field(default=None, description="the configured LLM backend, if any")
    uptime_s: Number


class Version(Shape):
    """``GET /api/version``."""

    version: str


# --- books ---------------------------------------------------------------------------------------------
class BookRow(Shape):
    """One book of the library (``folio books --json``)."""

    book_id: str
    title: str
    author: str
    authors: list[str]
    series: str | None = None
    series_index: Number | str | None = None
    tags: list[str] = []
    language: str | None = None
    format: str | None = None
    identifiers: dict[str, Any] = {}
    pubdate: str | None = None
    source_file: str
    chapters: int
    chunks: int
    windows: int
    embedding_model: str | None = None
    chunk_tokens: int | None = None


class ChapterEntry(Shape):
    """One entry of a book's table of contents."""

    chapter_id: str
    title: str


class BookDetail(BookRow):
    """``GET /api/books/{book}``: the book's row with its chapters' ids and titles."""

    contents: list[ChapterEntry]


class Removal(Shape):
    """``DELETE /api/books/{book}?dry_run=true``: what a remove would take (nothing changes)."""

    book_id: str
    title: str
    dry_run: bool


class Chapter(Shape):
    """``GET /api/books/{book}/chapters/{chapter_id}``: one chapter's whole text."""

    book_id: str
    book_title: str
    chapter_id: str
    chapter_title: str
    text: str


class Hit(Shape):
    """A passage of a book: a search hit, or a chunk (``GET /api/books/{book}/chunks/{chunk_id}``)."""

    book_id: str
    chapter_id: str
    chapter_title: str
    chunk_id: str
    start: int
    end: int
    score: Number
    text: str


class ConceptRow(Shape):
    """``GET /api/concepts``: one concept-map item matching the query (entity, theme or event)."""

    book_id: str
    kind: str
    item_id: str
    label: str
    score: Number
    chapter_ids: list[str]
    chapter_titles: list[str]


# --- ask -----------------------------------------------------------------------------------------------
class Citation(Shape):
    """Where a claim comes from: a book passage (``book_id``, ``chapter_id``, offsets, ``page`` or
    ``percent``, ``quote``), a Kiwix article (``zim``, ``path``, ``section``, ``url``, ``quote``) or
    another source (``source``, ``url``, ``title``)."""

    book_id: str | None = None
    book_title: str | None = None
    chapter_id: str | None = None
    chapter_title: str | None = None
    chunk_id: str | None = None
    start: int | None = None
    end: int | None = None
    page: str | None = None
    percent: Number | None = None
    zim: str | None = None
    path: str | None = None
    section: str | None = None
    source: str | None = None
    title: str | None = None
    url: str | None = None
    quote: str | None = None


class Answer(Shape):
    """``POST /api/ask``: the answer with its citations (``folio ask --json``); with a
    ``conversation`` id, the id and how many tool calls its session cache served."""

    answer: str
    citations: list[Citation]
    route: str
    sources_used: list[str]
    tool_calls: int
    notes: list[str]
    conversation: str | None = None
    session_cache_hits: int | None = None


# --- Kiwix ---------------------------------------------------------------------------------------------
class KiwixBook(Shape):
    """``GET /api/kiwix/books``: one ZIM archive this process searches."""

    name: str
    title: str
    language: str
    description: str
    article_count: int
    is_wikipedia: bool
    location: str


class KiwixCandidate(Shape):
    """A ranked Kiwix article with its per-signal score breakdown."""

    rank: int
    book: str
    path: str
    title: str
    url: str
    origin: str
    score: Number
    breakdown: dict[str, Number]
    excerpt: str


class KiwixSource(Shape):
    """A passage of a Kiwix article the answer context was built from."""

    book: str
    path: str
    title: str
    section: str
    url: str
    score: Number
    passage: str


class SourceError(Shape):
    """A source that failed, in one line."""

    source: str
    reason: str


class SupersededBook(Shape):
    """An older edition of a Kiwix book left out for a newer one (searched only where the newer finds
    nothing, and then listed among the books searched instead)."""

    book: str
    by: str


class KiwixResult(Shape):
    """``GET /api/kiwix/search``: the articles and passages that answer a question (``folio kiwix
    --json``)."""

    query: str
    search_terms: str
    searched_books: list[str]
    superseded_books: list[SupersededBook]
    selected_books: list[str]
    primary_book: str | None = None
    candidates_total: int
    candidates: list[KiwixCandidate]
    context: str
    sources: list[KiwixSource]
    errors: list[SourceError]


class ArticleSection(Shape):
    """One section of a Kiwix article."""

    title: str
    paragraphs: list[str]


class Article(Shape):
    """``GET /api/kiwix/article``: one article as clean text, redirects followed."""

    book: str
    path: str
    title: str
    url: str
    text: str
    sections: list[ArticleSection]


# --- jobs ----------------------------------------------------------------------------------------------
class JobState(Shape):
    """A write job (ingest, remove, sync): its state and progress, and what it did."""

    job_id: str
    kind: str
    target: list[str]
    state: str = Field(description="queued | running | done | failed")
    done: Number
    total: Number
    created: Number
    started: Number | None = None
    finished: Number | None = None
    ingested: list[dict[str, Any]]
    errors: list[str]
    removed: list[str]
    summary: str
    fraction: Number


class ErrorBody(BaseModel):
    """Every 4xx/5xx answer: one line naming the field or parameter at fault."""

    error: str
