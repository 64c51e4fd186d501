"""The book tools, the tool budget, the in-session cache and the shared fusion thread pool.

``BookTools`` exposes the book tools as a Python API and as OpenAI tool definitions (``definitions()``,
``call(name, arguments)``):

- ``book_concept_map_lookup(query)`` (``book_concept_map.lookup``): candidate chapters from the concept maps.
- ``chapter_summary_get(chapter_id)`` (``chapter_summary.get``): a chapter summary, made lazily on first
  request and cached per process. Map-reduce: chunk → section (8 chunks) → chapter; each step is
  extractive (the sentences sharing most content words with the rest of their text); with an LLM
  ``summarizer`` the final reduce step is one LLM call over the extractive section summaries.
- ``text_search(query, scope)``: exact excerpts (FTS5 bm25) with locations.
- ``semantic_search(query, scope, k)``: chunks by meaning (needs the encoder and the vector index).
- ``chunk_get(location_id)`` (``chunk.get``): a full chunk; a location id is ``BOOK_ID/CHUNK_ID``.
- ``book_synopsis_get(book_id)`` (``book_synopsis.get``): the book's synthesis from its chapter titles,
  concept map and first chapter summaries; lazy and cached.

Every tool call (cached or not) and every LLM request spends one unit of the ``ToolBudget``; the call
after the last unit is refused with ``BudgetExceeded``. A semantic search that cannot run (no encoder,
a broken vector index or encoder) spends nothing. A ``Session`` caches concept-map lookups and
search results for one conversation. ``shared_pool(size)`` is the one long-lived thread pool of a
process for cross-source fusion: a ``DaemonPool`` of daemon threads, never joined, so a source job that
fusion abandoned at its deadline never keeps the process from exiting (a ``ThreadPoolExecutor``'s
workers are joined at interpreter exit).
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import Future
from queue import SimpleQueue
from typing import Any

from folio.nodes.backends.book_store import scopes
from folio.nodes.backends.encoder import remembered_query
from folio.nodes.backends.llm import LLMError
from folio.nodes.text import content_words, sentences
from folio.nodes.types import ConceptMap, ConceptMatches, Deadline, FolioError, Hit

SECTION_CHUNKS = 8
SUMMARY_SENTENCES = 3


class BudgetExceeded(LLMError):
    """A tool or LLM call refused because the question's tool budget is spent."""


class SemanticUnavailable(FolioError):
    """Semantic search cannot run (no encoder, or the vector index failed)."""


class ToolBudget:
    """Counts tool calls (router and LLM requests included); refuses the call after ``limit``."""

    def __init__(self, limit: int = 8) -> None:
        self.limit = int(limit)
        self.calls: list[str] = []
        self.refused: list[str] = []
        self._lock = threading.Lock()

    @property
    def used(self) -> int:
        return len(self.calls)

    @property
    def left(self) -> int:
        return max(0, self.limit - self.used)

    def spend(self, name: str) -> None:
        """Count one call of ``name``; ``BudgetExceeded`` when the budget is already spent."""
        with self._lock:
            if len(self.calls) >= self.limit:
                self.refused.append(name)
                raise BudgetExceeded(
                    "tool budget", f"{name} refused: the budget of {self.limit} tool calls is spent"
                )
            self.calls.append(name)

    def refund(self, name: str) -> None:
        """Give back one counted call of ``name`` (a call that could not run at all costs nothing)."""
        with self._lock:
            for i in range(len(self.calls) - 1, -1, -1):
                if self.calls[i] == name:
                    del self.calls[i]
                    return

    def on_llm_call(self, payload: dict[str, Any]) -> None:
        """``OpenAIChatClient(on_call=...)`` hook: every LLM request is a tool call."""
        self.spend("llm")


class Session:
    """In-session cache of concept-map lookups and retrieval results (one conversation)."""

    def __init__(self) -> None:
        self._values: dict[tuple, Any] = {}
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def cached(self, key: tuple, make: Callable[[], Any]) -> Any:
        """The value stored under ``key``, made (outside the lock) on first request."""
        with self._lock:
            if key in self._values:
                self.hits += 1
                return self._values[key]
        value = make()
        with self._lock:
            self.misses += 1
            self._values.setdefault(key, value)
            return self._values[key]

    def __len__(self) -> int:
        return len(self._values)


class DaemonPool:
    """``size`` daemon worker threads (started on the first ``submit``) running jobs in order of
    submission; ``submit(fn, *args)`` gives a ``concurrent.futures.Future``. Never shut down or joined:
    a job still running when the process exits dies with it."""

    def __init__(self, size: int, name: str = "folio-fusion") -> None:
        self.size = max(1, int(size))
        self.name = name
        self._jobs: SimpleQueue[tuple[Future[Any], Callable[..., Any], tuple[Any, ...]]] = SimpleQueue()
        self._started = False
        self._lock = threading.Lock()

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        future: Future[Any] = Future()
        with self._lock:
            if not self._started:
                for i in range(self.size):
                    threading.Thread(target=self._work, name=f"{self.name}-{i}", daemon=True).start()
                self._started = True
        self._jobs.put((future, fn, args))
        return future

    def _work(self) -> None:
        while True:
            future, fn, args = self._jobs.get()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                result = fn(*args)
            except BaseException as exc:  # handed to the waiting caller, as a ThreadPoolExecutor does
                future.set_exception(exc)
            else:
                future.set_result(result)
            del future, fn, args


_POOLS: dict[int, DaemonPool] = {}
_POOLS_LOCK = threading.Lock()


def shared_pool(size: int) -> DaemonPool:
    """The process-wide fusion pool of ``size`` daemon workers (created once, never shut down)."""
    size = max(1, int(size))
    with _POOLS_LOCK:
        if size not in _POOLS:
            _POOLS[size] = DaemonPool(size)
        return _POOLS[size]


# --- extractive summaries ----------------------------------------------------------------------------


def central_sentences(text: str, n: int = SUMMARY_SENTENCES) -> list[str]:
    """The ``n`` sentences of ``text`` sharing most content words with the rest, in text order."""
    spans = [(s, e) for s, e in sentences(text) if 6 <= len(text[s:e].split()) <= 60]
    if not spans:
        return [text.strip()[:400]] if text.strip() else []
    bags = [set(content_words(text[s:e])) for s, e in spans]
    freq: Counter[str] = Counter(w for bag in bags for w in bag)
    scores = [sum(freq[w] - 1 for w in bag) / (len(bag) ** 0.5 or 1.0) for bag in bags]
    best = sorted(range(len(spans)), key=lambda i: (-scores[i], i))[:n]
    return [" ".join(text[spans[i][0] : spans[i][1]].split()) for i in sorted(best)]


def extractive_summary(chunk_texts: Sequence[str], n: int = SUMMARY_SENTENCES) -> str:
    """Map-reduce: central sentences per chunk, per section of chunks, then of the whole."""
    per_chunk = [" ".join(central_sentences(t, 2)) for t in chunk_texts if t.strip()]
    sections = [
        " ".join(central_sentences(" ".join(per_chunk[i : i + SECTION_CHUNKS]), n))
        for i in range(0, len(per_chunk), SECTION_CHUNKS)
    ]
    if len(sections) <= 1:
        return sections[0] if sections else ""
    return " ".join(central_sentences(" ".join(sections), n))


_SUMMARIES: dict[tuple[str, str, str], str] = {}
_SUMMARIES_LOCK = threading.Lock()


# --- the tools ----------------------------------------------------------------------------------------


def _location(hit: Hit) -> str:
    return f"{hit.book_id}/{hit.chunk_id}"


def _hit_row(hit: Hit, max_chars: int = 600) -> dict[str, Any]:
    return {
        "location_id": _location(hit),
        "book_id": hit.book_id,
        "chapter_id": hit.chapter_id,
        "chapter_title": hit.chapter_title,
        "start": hit.start,
        "end": hit.end,
        "score": round(hit.score, 4),
        "text": hit.text if len(hit.text) <= max_chars else hit.text[:max_chars] + "…",
    }


_SCOPE = {
    "type": "array",
    "items": {"type": "string"},
    "description": "chapter ids to search; empty for the whole books in play",
}
TOOL_SPECS: tuple[tuple[str, str, dict[str, Any], tuple[str, ...]], ...] = (
    (
        "book_concept_map_lookup",
        "Look up entities, themes and events of the books' concept maps; returns candidate chapter ids.",
        {"query": {"type": "string"}},
        ("query",),
    ),
    (
        "chapter_summary_get",
        "A summary of one chapter.",
        {"chapter_id": {"type": "string"}},
        ("chapter_id",),
    ),
    (
        "text_search",
        "Exact-word search (bm25): excerpts with their locations. Best for names, quotes and concrete facts.",
        {"query": {"type": "string"}, "scope": _SCOPE},
        ("query",),
    ),
    (
        "semantic_search",
        "Search by meaning: chunks with their locations. Best for abstract or conceptual questions.",
        {"query": {"type": "string"}, "scope": _SCOPE, "k": {"type": "integer", "minimum": 1, "maximum": 20}},
        ("query",),
    ),
    (
        "chunk_get",
        "The full text of one chunk, by its location_id.",
        {"location_id": {"type": "string"}},
        ("location_id",),
    ),
    ("book_synopsis_get", "A synthesis of a whole book.", {"book_id": {"type": "string"}}, ()),
)


class BookTools:
    """The book tools over the books in play, counted by one budget and cached in one session.

    Args:
        stores: ``BookStore`` per book id.
        concept_maps: ``ConceptMap`` per book id (a missing map gives no concept hits).
        encoder: query encoder with ``encode_query(text)``, or ``None`` (semantic search unavailable).
        budget: the question's tool budget.
        session: the conversation's cache.
        summarizer: ``text -> summary`` for the final reduce of summaries (an LLM), or ``None`` (extractive).
        k: default number of results of a search.
    """

    def __init__(
        self,
        stores: Mapping[str, Any],
        concept_maps: Mapping[str, ConceptMap],
        encoder: Any,
        budget: ToolBudget,
        session: Session,
        summarizer: Callable[[str], str] | None = None,
        k: int = 10,
    ) -> None:
        self.stores = dict(stores)
        self.concept_maps = dict(concept_maps)
        self.encoder = encoder
        self.budget = budget
        self.session = session
        self.summarizer = summarizer
        self.k = int(k)
        self._state: dict[str, str | None] = {
            "semantic_error": None if encoder is not None else "no encoder loaded"
        }
        self.seen: dict[str, Hit] = {}  # every hit any tool returned, by location id (agent citations)
        self._chapter_book = {cid: book_id for book_id, store in self.stores.items() for cid in store.titles}

    def for_books(self, book_ids: Collection[str] | None) -> BookTools:
        """The same tools (budget, session, seen hits shared) limited to ``book_ids`` (None/empty = all)."""
        ids = [b for b in (book_ids or ()) if b in self.stores]
        if not ids or set(ids) == set(self.stores):
            return self
        view = BookTools.__new__(BookTools)
        view.__dict__.update(self.__dict__)
        view.stores = {b: self.stores[b] for b in ids}
        return view

    @property
    def semantic_error(self) -> str | None:
        """Why semantic search cannot run in this question (None while it can); shared by all views."""
        return self._state["semantic_error"]

    @semantic_error.setter
    def semantic_error(self, reason: str | None) -> None:
        self._state["semantic_error"] = reason

    # --- helpers -------------------------------------------------------------------------------------
    def _books(self) -> tuple[str, ...]:
        return tuple(sorted(self.stores))

    def _by_book(self, scope: Collection[str] | None) -> dict[str, tuple[str, ...] | None]:
        if not scope:
            return dict.fromkeys(self.stores)
        out: dict[str, list[str]] = {}
        for cid in scope:
            book_id = self._chapter_book.get(cid)
            if book_id is not None:
                out.setdefault(book_id, []).append(cid)
        return {b: tuple(ids) for b, ids in out.items()}

    def _scope(self, scope: Collection[str] | None) -> tuple[list[Any], tuple[str, ...] | None]:
        """The stores to search and the chapter ids to keep (None: whole books) for a tool's scope."""
        by_book = self._by_book(scope)
        chapters = None if not scope else tuple(sorted(c for ids in by_book.values() for c in ids or ()))
        return [self.stores[b] for b in by_book], chapters

    def _remember(self, hits: Sequence[Hit]) -> None:
        for h in hits:
            self.seen.setdefault(_location(h), h)

    @staticmethod
    def _merge(per_book: Sequence[Sequence[Hit]], k: int) -> tuple[Hit, ...]:
        hits = sorted((h for hs in per_book for h in hs), key=lambda h: (-h.score, h.book_id, h.start))
        return tuple(hits[:k])

    # --- tools ----------------------------------------------------------------------------------------
    def concept_map_lookup(self, query: str) -> tuple[tuple[str, ConceptMatches], ...]:
        """``book_concept_map.lookup``: each book's matching concepts and candidate chapters."""
        self.budget.spend("book_concept_map.lookup")

        def make() -> tuple[tuple[str, ConceptMatches], ...]:
            return tuple(
                (b, self.concept_maps[b].lookup(query)) for b in self._books() if b in self.concept_maps
            )

        return self.session.cached(("concepts", self._books(), query), make)

    def text_search(
        self, query: str, scope: Collection[str] | None = None, k: int | None = None
    ) -> tuple[Hit, ...]:
        """``text_search``: bm25-ranked excerpts with locations, in ``scope`` (chapter ids) or everywhere."""
        self.budget.spend("text_search")
        k = int(k or self.k)
        key = ("text", self._books(), query, tuple(sorted(scope)) if scope else None, k)

        def make() -> tuple[Hit, ...]:
            books, chapters = self._scope(scope)
            return self._merge([i.lexical(query, k, ids, chapters) for i, ids in scopes(books)], k)

        hits = self.session.cached(key, make)
        self._remember(hits)
        return hits

    def semantic_search(
        self, query: str, scope: Collection[str] | None = None, k: int | None = None
    ) -> tuple[Hit, ...]:
        """``semantic_search``: chunks by cosine similarity; ``SemanticUnavailable`` when it cannot run
        (no encoder, or the index or encoder failed): such a call spends no tool budget."""
        if self.semantic_error is not None:
            raise SemanticUnavailable("semantic search", self.semantic_error)
        self.budget.spend("semantic_search")
        k = int(k or self.k)
        key = ("semantic", self._books(), query, tuple(sorted(scope)) if scope else None, k)

        def make() -> tuple[Hit, ...]:
            vector = remembered_query(self.encoder, query)
            books, chapters = self._scope(scope)
            return self._merge([i.semantic(vector, k, ids, chapters) for i, ids in scopes(books)], k)

        try:
            hits = self.session.cached(key, make)
        except FolioError:
            raise
        except Exception as exc:  # a broken index or encoder degrades to lexical-only
            self.budget.refund("semantic_search")
            self.semantic_error = f"{type(exc).__name__}: {exc}"
            raise SemanticUnavailable("semantic search", self.semantic_error) from None
        self._remember(hits)
        return hits

    def chunk(self, location_id: str) -> Hit:
        """``chunk.get``: the full chunk at ``BOOK_ID/CHUNK_ID`` (or a bare chunk id)."""
        self.budget.spend("chunk.get")
        book_id, _, chunk_id = location_id.rpartition("/")
        if not book_id:
            found = [b for b, s in self.stores.items() if chunk_id.split(".")[0] in s.titles]
            book_id = found[0] if found else ""
        if book_id not in self.stores:
            raise FolioError(location_id, "no such location in the books in play")
        hit = self.stores[book_id].chunk(chunk_id)
        self._remember([hit])
        return hit

    def chapter_summary(self, chapter_id: str) -> str:
        """``chapter_summary.get``: the chapter's summary (made on first request, then cached)."""
        self.budget.spend("chapter_summary.get")
        return self._summary(chapter_id)

    def _summary(self, chapter_id: str) -> str:
        book_id = self._chapter_book.get(chapter_id)
        if book_id is None:
            raise FolioError(chapter_id, "no such chapter in the books in play")
        key = (book_id, chapter_id, "llm" if self.summarizer else "extractive")
        with _SUMMARIES_LOCK:
            if key in _SUMMARIES:
                return _SUMMARIES[key]
        texts = [h.text for h in self.stores[book_id].chunks_in([chapter_id])]
        summary = extractive_summary(texts)
        if self.summarizer is not None and summary:
            summary = self.summarizer(summary)
        with _SUMMARIES_LOCK:
            return _SUMMARIES.setdefault(key, summary)

    def book_synopsis(self, book_id: str | None = None) -> str:
        """``book_synopsis.get``: title, author, main entities and themes, and the opening chapters' gist."""
        self.budget.spend("book_synopsis.get")
        book_id = book_id or (self._books()[0] if self.stores else "")
        if book_id not in self.stores:
            raise FolioError(book_id or "book", "no such book in play")
        key = (book_id, "", "synopsis")
        with _SUMMARIES_LOCK:
            if key in _SUMMARIES:
                return _SUMMARIES[key]
        d = self.stores[book_id].descriptor
        parts = [f"{d.get('title', '')} by {d.get('author', '')}."]
        cmap = self.concept_maps.get(book_id)
        if cmap is not None:
            parts.append("Main characters: " + ", ".join(e.name for e in cmap.entities[:8]) + ".")
            parts.append("Themes: " + "; ".join(t.label for t in cmap.themes[:5]) + ".")
        parts.append("Chapters: " + ", ".join(c["title"] for c in d["chapters"][:12]) + ".")
        parts.extend(self._summary(c["chapter_id"]) for c in d["chapters"][:2])
        synopsis = " ".join(p for p in parts if p)
        with _SUMMARIES_LOCK:
            return _SUMMARIES.setdefault(key, synopsis)

    # --- OpenAI tool calling ----------------------------------------------------------------------------
    @staticmethod
    def definitions() -> list[dict[str, Any]]:
        """OpenAI tool definitions (``tools=`` of a chat request) of every book tool."""
        return [
            {
                "type": "function",
                "function": {
                    "name": name,
                    "description": description,
                    "parameters": {
                        "type": "object",
                        "properties": properties,
                        "required": list(required),
                        "additionalProperties": False,
                    },
                },
            }
            for name, description, properties, required in TOOL_SPECS
        ]

    def call(self, name: str, arguments: Mapping[str, Any]) -> str:
        """Run a tool by its OpenAI name; the result (or the error) as JSON text for a tool message."""
        args = dict(arguments)
        try:
            if name == "book_concept_map_lookup":
                value: Any = [
                    {
                        "book_id": b,
                        "chapter_ids": list(m.chapter_ids),
                        "entities": [e.label for e in m.entities],
                        "themes": [t.label for t in m.themes],
                        "events": [v.label for v in m.events],
                    }
                    for b, m in self.concept_map_lookup(str(args.get("query", "")))
                ]
            elif name == "chapter_summary_get":
                value = {
                    "chapter_id": args.get("chapter_id"),
                    "summary": self.chapter_summary(str(args["chapter_id"])),
                }
            elif name == "text_search":
                value = [_hit_row(h) for h in self.text_search(str(args.get("query", "")), args.get("scope"))]
            elif name == "semantic_search":
                hits = self.semantic_search(str(args.get("query", "")), args.get("scope"), args.get("k"))
                value = [_hit_row(h) for h in hits]
            elif name == "chunk_get":
                value = _hit_row(self.chunk(str(args["location_id"])), max_chars=10_000)
            elif name == "book_synopsis_get":
                value = {"synopsis": self.book_synopsis(args.get("book_id"))}
            else:
                value = {"error": f"unknown tool {name!r}"}
        except BudgetExceeded:
            raise
        except (FolioError, KeyError, TypeError, ValueError) as exc:
            value = {"error": str(exc)}
        return json.dumps(value, ensure_ascii=False)


# --- pending source jobs (cross-source fusion) ---------------------------------------------------------


class PendingJobs:
    """Source jobs submitted to the fusion pool; ``collect`` waits for them until one deadline.

    Each job runs ``fn(clause)`` in a copy of the submitting thread's ``contextvars`` context. A job
    still running at the deadline is abandoned: it keeps running in the pool, and its result is dropped.
    """

    def __init__(self, pool: DaemonPool, jobs: Sequence[tuple[str, str, Callable[[str], Any]]]) -> None:
        import contextvars
        import time

        self.started = time.monotonic()
        self.futures = []
        for source, clause, fn in jobs:
            context = contextvars.copy_context()
            self.futures.append((source, clause, pool.submit(context.run, fn, clause)))

    def collect(
        self, timeout: float, deadline: Deadline | None = None
    ) -> tuple[list[tuple[str, str, Any]], list[tuple[str, str, str]]]:
        """(source, clause, result) of the jobs done by ``started + timeout`` (or by ``deadline``, when
        that is sooner); (source, clause, why) of the rest."""
        import time
        from concurrent.futures import wait

        until = self.started + float(timeout)
        why = f"timed out after {float(timeout):g} s"
        if deadline is not None and deadline.at < until:
            until, why = deadline.at, f"the ask's deadline of {deadline.seconds:g} s passed"
        wait([f for _, _, f in self.futures], timeout=max(0.0, until - time.monotonic()))
        done: list[tuple[str, str, Any]] = []
        failed: list[tuple[str, str, str]] = []
        for source, clause, future in self.futures:
            if not future.done():
                failed.append((source, clause, why))
            elif future.exception() is not None:
                exc = future.exception()
                reason = exc.reason if isinstance(exc, FolioError) else f"{type(exc).__name__}: {exc}"
                failed.append((source, clause, reason))
            else:
                done.append((source, clause, future.result()))
        return done, failed
