"""The book tools (the tool budget, the in-session cache and the shared fusion thread pool live in
``nodes.backends.tool_runtime``, the tools' OpenAI definitions in ``nodes.backends.tool_specs``; both
re-exported here).

``BookTools`` exposes the book tools as a Python API and as OpenAI tool definitions (``definitions()``,
``call(name, arguments)``):

- ``book_concept_map_lookup(query)`` (``book_concept_map.lookup``): candidate chapters from the concept maps.
- ``chapter_summary_get(chapter_id)`` (``chapter_summary.get``): a chapter summary, made on its first
  request and stored in the library (``backends.summary_store``: keyed by the chapter's content hash
  and the summariser), so later requests and processes read it back. Extractive map-reduce (chunk →
  section → chapter), or with an ``LLMSummarizer`` map-reduce with at most 5 LLM calls
  (``backends.summaries``); an LLM summary that cannot be made in the question's budget or deadline is
  the extractive one, with a note (in the tool's JSON ``notes`` and ``BookTools.summary_notes``).
- ``search(query, scope, k)``: the hybrid search of ``folio search`` (words and meaning fused by the
  configured ``HitFusion``): the same ranked hits as ``folio search``, HTTP ``/api/search`` and the ask
  book flow for the same query, scope and config (``nodes/core/ranking.py``: one retrieval path).
- ``text_search(query, scope)``: exact excerpts (FTS5 bm25) with locations (``folio search --mode lexical``).
- ``semantic_search(query, scope, k)``: chunks by meaning (needs the encoder and the vector index;
  ``folio search --mode semantic``).
- ``chunk_get(location_id)`` (``chunk.get``): a full chunk; a location id is ``BOOK_ID/CHUNK_ID``.
- ``book_synopsis_get(book_id)`` (``book_synopsis.get``): the book's synopsis, stored the same way:
  extractive (title, concept map, chapter titles, first chapter summaries), or with the LLM a
  map-reduce over every chapter's summary (the stored LLM one, else the extractive one).

Every tool call (cached or not) and every LLM request spends one unit of the ``ToolBudget`` (a
summariser built on the question's budgeted client spends its calls there too); the call
after the last unit is refused with ``BudgetExceeded``. A semantic search that cannot run (no encoder,
a broken vector index or encoder) spends nothing. A ``Session`` caches concept-map lookups and
search results for one conversation. ``escalating(1)`` gives a view that allows one widening (a
whole-book search after a search in chosen chapters), as the pipeline's book flow does: the agent's
second widening is refused with an error it reads (``WideningRefused``), which spends no budget.
``invalid_tool_call(name, arguments_json)`` says why an agent's tool call must not run (unknown tool,
arguments that are not a JSON object of ``TOOL_SPECS``' required strings), None when it may.
``shared_pool(size)`` is the one long-lived thread pool of a
process for cross-source fusion: a ``DaemonPool`` of daemon threads, never joined, so a source job that
fusion abandoned at its deadline never keeps the process from exiting (a ``ThreadPoolExecutor``'s
workers are joined at interpreter exit).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from folio.nodes.backends.encoder import remembered_query
from folio.nodes.backends.llm import LLMError
from folio.nodes.backends.summaries import (
    EXTRACTIVE_ID,
    LLMSummarizer,
    Summary,
    extractive_summary,
    synopsis_header,
)
from folio.nodes.backends.summary_store import (
    SummaryKey,
    SummaryStore,
    summary_store,
    synopsis_hash,
    text_hash,
)
from folio.nodes.backends.tool_runtime import BudgetExceeded as BudgetExceeded
from folio.nodes.backends.tool_runtime import DaemonPool as DaemonPool
from folio.nodes.backends.tool_runtime import PendingJobs as PendingJobs
from folio.nodes.backends.tool_runtime import SemanticUnavailable as SemanticUnavailable
from folio.nodes.backends.tool_runtime import Session as Session
from folio.nodes.backends.tool_runtime import ToolBudget as ToolBudget
from folio.nodes.backends.tool_runtime import WideningRefused as WideningRefused
from folio.nodes.backends.tool_runtime import shared_pool as shared_pool
from folio.nodes.backends.tool_specs import TOOL_SPECS as TOOL_SPECS
from folio.nodes.backends.tool_specs import hit_row, location_id, tool_definitions
from folio.nodes.core.concept_lookup import concept_map_lookup
from folio.nodes.core.ranking import HitFusion, ranked_lexical, ranked_semantic, search_text
from folio.nodes.core.types import BookHits, ConceptMap, ConceptMatches, FolioError, Hit

SUMMARY_RESERVE = 1  # budget calls an LLM summary leaves for the answer (or agent turn) that reads it
_SUMMARIES: dict[SummaryKey, str] = {}  # this process's summaries (the store may be unavailable)
_SUMMARIES_LOCK = threading.Lock()


def forget_summaries() -> None:
    """Empty this process's memory of summaries (the library's store keeps them): as a new process."""
    with _SUMMARIES_LOCK:
        _SUMMARIES.clear()


# --- the tools ----------------------------------------------------------------------------------------


class BookTools:
    """The book tools over the books in play, counted by one budget and cached in one session.

    Args:
        stores: ``BookStore`` per book id.
        concept_maps: ``ConceptMap`` per book id (a missing map gives no concept hits).
        encoder: query encoder with ``encode_query(text)``, or ``None`` (semantic search unavailable).
        budget: the question's tool budget.
        session: the conversation's cache.
        summarizer: an ``LLMSummarizer`` (map-reduce chapter summaries and synopses with an LLM), or
            ``None`` (extractive).
        k: default number of results of a search.
        fusion: how ``search`` fuses its lexical and semantic lists (default: convex, 0.7 on words).
        summaries: the ``SummaryStore`` to read and write summaries (default: the library's, found from
            the stores' index directory; None there: this process's memory only).
    """

    def __init__(
        self,
        stores: Mapping[str, Any],
        concept_maps: Mapping[str, ConceptMap],
        encoder: Any,
        budget: ToolBudget,
        session: Session,
        summarizer: LLMSummarizer | None = None,
        k: int = 10,
        summaries: SummaryStore | None = None,
        fusion: HitFusion | None = None,
    ) -> None:
        self.stores = dict(stores)
        self.concept_maps = dict(concept_maps)
        self.encoder = encoder
        self.budget = budget
        self.session = session
        self.summarizer = summarizer
        self.summaries = summaries
        self.summary_notes: list[str] = []  # notes of this question's summaries (shared by views)
        self.k = int(k)
        self.fusion = fusion or HitFusion()
        self._state: dict[str, str | None] = {
            "semantic_error": None if encoder is not None else "no encoder loaded"
        }
        self._widening: dict[str, int | None] = {"allowed": None, "made": 0, "scoped": 0}
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

    def escalating(self, widenings: int = 1) -> BookTools:
        """A view of the same tools (budget, session, seen hits shared) that allows ``widenings``
        whole-book searches after a search in chosen chapters (the single escalation of the book flow);
        a further one raises ``WideningRefused``."""
        view = BookTools.__new__(BookTools)
        view.__dict__.update(self.__dict__)
        view._widening = {"allowed": int(widenings), "made": 0, "scoped": 0}
        return view

    def _check_widening(self, scope: Collection[str] | None) -> None:
        """Count a scoped search, or a whole-book search after one (a widening); refuse a widening past
        the allowed number."""
        state = self._widening
        if scope:
            state["scoped"] = 1
            return
        if not state["scoped"] or state["allowed"] is None:
            return
        if int(state["made"] or 0) >= int(state["allowed"]):
            raise WideningRefused(
                "search",
                "the search was already widened to the whole book(s) once: search inside chapters, or "
                "answer from what was found (or say the books do not hold it)",
            )
        state["made"] = int(state["made"] or 0) + 1
        state["scoped"] = 0

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
            self.seen.setdefault(location_id(h), h)

    # --- tools ----------------------------------------------------------------------------------------
    def concept_map_lookup(self, query: str) -> tuple[tuple[str, ConceptMatches], ...]:
        """``book_concept_map.lookup``: each book's matching concepts and candidate chapters."""
        self.budget.spend("book_concept_map.lookup")

        def make() -> tuple[tuple[str, ConceptMatches], ...]:
            return tuple(
                (b, concept_map_lookup(self.concept_maps[b], query))
                for b in self._books()
                if b in self.concept_maps
            )

        return self.session.cached(("concepts", self._books(), query), make)

    def _lexical(self, query: str, scope: Collection[str] | None, k: int) -> tuple[Hit, ...]:
        """The lexical list of ``folio search`` (``search_depth(k)`` deep), spending one ``text_search``."""
        self.budget.spend("text_search")
        key = ("text", self._books(), query, tuple(sorted(scope)) if scope else None, k)

        def make() -> tuple[Hit, ...]:
            books, chapters = self._scope(scope)
            return ranked_lexical(books, query, k, chapters)

        return self.session.cached(key, make)

    def _semantic(self, query: str, scope: Collection[str] | None, k: int) -> tuple[Hit, ...]:
        """The semantic list of ``folio search`` (``search_depth(k)`` deep), spending one
        ``semantic_search``; ``SemanticUnavailable`` (nothing spent) when it cannot run."""
        if self.semantic_error is not None:
            raise SemanticUnavailable("semantic search", self.semantic_error)
        self.budget.spend("semantic_search")
        key = ("semantic", self._books(), query, tuple(sorted(scope)) if scope else None, k)

        def make() -> tuple[Hit, ...]:
            vector = remembered_query(self.encoder, search_text(query))
            books, chapters = self._scope(scope)
            return ranked_semantic(books, vector, k, chapters)

        try:
            return self.session.cached(key, make)
        except FolioError:
            raise
        except Exception as exc:  # a broken index or encoder degrades to lexical-only
            self.budget.refund("semantic_search")
            self.semantic_error = f"{type(exc).__name__}: {exc}"
            raise SemanticUnavailable("semantic search", self.semantic_error) from None

    def search(self, query: str, scope: Collection[str] | None = None, k: int | None = None) -> BookHits:
        """``search``: ``folio search``'s hybrid ranking in ``scope`` (chapter ids) or the whole books: the
        lexical and semantic lists (one ``text_search`` and one ``semantic_search`` of the budget) fused
        by ``self.fusion``; lexical only, with a note, when semantic search cannot run."""
        self._check_widening(scope)
        k = int(k or self.k)
        lexical = self._lexical(query, scope, k)
        notes: tuple[str, ...] = ()
        try:
            semantic = self._semantic(query, scope, k)
        except SemanticUnavailable:
            semantic, notes = (), ("Semantic search unavailable",)
        titles = " + ".join(sorted(str(s.descriptor.get("title") or b) for b, s in self.stores.items()))
        where = f"{len(scope)} chapter(s) of {titles}" if scope else f"the whole of {titles}"
        where = where if titles else "the library, which holds no books yet"
        hits = self.fusion(lexical, semantic, k)
        self._remember(hits)
        searched = (f"search({query!r}) in {where}: {len(hits)} hit(s)",)
        return BookHits(query, hits, lexical, semantic, tuple(scope) if scope else None, searched, notes)

    def text_search(
        self, query: str, scope: Collection[str] | None = None, k: int | None = None
    ) -> tuple[Hit, ...]:
        """``text_search``: bm25-ranked excerpts with locations, in ``scope`` (chapter ids) or everywhere
        (``folio search --mode lexical``)."""
        self._check_widening(scope)
        k = int(k or self.k)
        hits = self._lexical(query, scope, k)[:k]
        self._remember(hits)
        return hits

    def semantic_search(
        self, query: str, scope: Collection[str] | None = None, k: int | None = None
    ) -> tuple[Hit, ...]:
        """``semantic_search``: chunks by cosine similarity (``folio search --mode semantic``);
        ``SemanticUnavailable`` when it cannot run (no encoder, or the index or encoder failed): such a
        call spends no tool budget."""
        self._check_widening(scope)
        k = int(k or self.k)
        hits = self._semantic(query, scope, k)[:k]
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
        """``chapter_summary.get``: the chapter's summary (made on first request, then stored)."""
        return self.chapter_summary_with_notes(chapter_id).text

    def chapter_summary_with_notes(self, chapter_id: str) -> Summary:
        """``chapter_summary.get`` with the summary's notes (one call of the budget)."""
        self.budget.spend("chapter_summary.get")
        return self.summary_of(chapter_id)

    def book_synopsis(self, book_id: str | None = None) -> str:
        """``book_synopsis.get``: the book's synopsis (made on first request, then stored)."""
        self.budget.spend("book_synopsis.get")
        return self.synopsis_of(book_id).text

    # --- summaries (no budget of their own: the tools above spend it) ----------------------------------
    def summary_of(self, chapter_id: str) -> Summary:
        """The chapter's summary: stored (or remembered) under its content hash and summariser, else made
        now (map-reduce with the LLM summariser when there is one, else extractive) and stored. An LLM
        summary that cannot be made (too few calls left in the budget, a failed or timed-out call) is
        the extractive one, with a note."""
        book_id = self._chapter_book.get(chapter_id)
        if book_id is None:
            raise FolioError(chapter_id, "no such chapter in the books in play")
        view = self.stores[book_id]
        digest = text_hash(view.chapter_text(chapter_id))
        notes: list[str] = []
        texts: list[str] = []
        if self.summarizer is not None:
            key = SummaryKey(book_id, "chapter", chapter_id, digest, self.summarizer.id)
            found = self._recall(key, notes)
            if found is not None:
                return found
            texts = [h.text for h in view.chunks_in([chapter_id])]
            summarizer = self.summarizer
            title, chapter = str(view.descriptor.get("title", "")), view.titles.get(chapter_id, "")
            made = self._by_llm(
                lambda: summarizer.chapter(title, chapter, texts),
                summarizer.chapter_calls(len(texts)),
                "chapter summary",
                notes,
            )
            if made is not None:
                return self._keep(key, made, notes)
        key = SummaryKey(book_id, "chapter", chapter_id, digest, EXTRACTIVE_ID)
        found = self._recall(key, notes)
        if found is not None:
            return found
        texts = texts or [h.text for h in view.chunks_in([chapter_id])]
        return self._keep(key, extractive_summary(texts), notes)

    def synopsis_of(self, book_id: str | None = None) -> Summary:
        """The book's synopsis, stored like chapter summaries. With the LLM summariser: map-reduce over
        every chapter's summary (the LLM one where stored, else the extractive one); else extractive:
        title and author, main characters and themes (concept map), chapter titles and the first two
        chapters' summaries."""
        book_id = book_id or (self._books()[0] if self.stores else "")
        if book_id not in self.stores:
            raise FolioError(book_id or "book", "no such book in play")
        d = self.stores[book_id].descriptor
        digest = synopsis_hash(d)
        notes: list[str] = []
        if self.summarizer is not None:
            key = SummaryKey(book_id, "synopsis", "", digest, self.summarizer.id)
            found = self._recall(key, notes)
            if found is not None:
                return found
            chapters = [(c["title"], self._chapter_for_synopsis(c["chapter_id"])) for c in d["chapters"]]
            summarizer = self.summarizer
            made = self._by_llm(
                lambda: self._with_concepts(book_id, summarizer.synopsis(d, chapters)),
                summarizer.synopsis_calls(chapters),
                "synopsis",
                notes,
            )
            if made is not None:
                return self._keep(key, made, notes)
        key = SummaryKey(book_id, "synopsis", "", digest, EXTRACTIVE_ID)
        found = self._recall(key, notes)
        if found is not None:
            return found
        parts = [synopsis_header(d)]
        cmap = self.concept_maps.get(book_id)
        if cmap is not None:
            parts.append("Main characters: " + ", ".join(e.name for e in cmap.entities[:8]) + ".")
            parts.append("Themes: " + "; ".join(t.label for t in cmap.themes[:5]) + ".")
        parts.append("Chapters: " + ", ".join(c["title"] for c in d["chapters"][:12]) + ".")
        parts.extend(self._chapter_for_synopsis(c["chapter_id"], llm=False) for c in d["chapters"][:2])
        return self._keep(key, " ".join(p for p in parts if p), notes)

    def _chapter_for_synopsis(self, chapter_id: str, llm: bool = True) -> str:
        """A chapter's summary for a synopsis, never made by the LLM here (an LLM summary of every
        chapter would cost calls without bound): the stored LLM one (``llm``), else the extractive one."""
        book_id = self._chapter_book[chapter_id]
        view = self.stores[book_id]
        digest = text_hash(view.chapter_text(chapter_id))
        if llm and self.summarizer is not None:
            found = self._recall(SummaryKey(book_id, "chapter", chapter_id, digest, self.summarizer.id), [])
            if found is not None:
                return found.text
        key = SummaryKey(book_id, "chapter", chapter_id, digest, EXTRACTIVE_ID)
        found = self._recall(key, [])
        if found is not None:
            return found.text
        return self._keep(key, extractive_summary([h.text for h in view.chunks_in([chapter_id])]), []).text

    def _with_concepts(self, book_id: str, synopsis: str) -> str:
        cmap = self.concept_maps.get(book_id)
        if cmap is None or not cmap.entities:
            return synopsis
        return synopsis + "\n\nMain characters: " + ", ".join(e.name for e in cmap.entities[:8]) + "."

    def _store(self, book_id: str) -> SummaryStore | None:
        """The summary store of ``book_id``'s library (None: this process's memory only)."""
        if self.summaries is not None:
            return self.summaries
        directory = getattr(getattr(self.stores[book_id], "index", None), "directory", None)
        return summary_store(directory) if directory is not None else None

    def _recall(self, key: SummaryKey, notes: list[str]) -> Summary | None:
        """The summary of ``key`` from this process's memory or the library's store, else None."""
        with _SUMMARIES_LOCK:
            text = _SUMMARIES.get(key)
        if text is None:
            store = self._store(key.book_id)
            text = store.get(key) if store is not None else None
            if text is None:
                return None
            with _SUMMARIES_LOCK:
                _SUMMARIES[key] = text
        return Summary(text, key.summariser, False, tuple(notes))

    def _keep(self, key: SummaryKey, text: str, notes: list[str]) -> Summary:
        """Remember ``text`` under ``key`` in this process and store it in the library (a store that
        cannot be written: one note, the summary kept for this process only)."""
        with _SUMMARIES_LOCK:
            _SUMMARIES[key] = text
        store = self._store(key.book_id)
        if store is not None and not store.put(key, text):
            note = f"summaries are not stored in the library ({store.problem}): kept for this process only"
            notes.append(note)
        self._note(notes)
        return Summary(text, key.summariser, True, tuple(notes))

    def _by_llm(self, make: Callable[[], str], calls: int, what: str, notes: list[str]) -> str | None:
        """``make()`` (an LLM summary of ``calls`` calls), or None with a note when the question's budget
        has fewer than ``calls + SUMMARY_RESERVE`` left or a call fails (the caller gives the extractive
        summary)."""
        budget = self.summarizer.budget if self.summarizer is not None else None
        if budget is not None and budget.left < calls + SUMMARY_RESERVE:
            notes.append(
                f"an LLM {what} takes {calls} call(s) and one more is kept for the answer, but "
                f"{budget.left} are left for this question: extractive {what} given"
            )
            return None
        try:
            return make()
        except LLMError as exc:
            notes.append(f"LLM {what} failed ({exc.reason}): extractive {what} given")
            return None

    def _note(self, notes: Sequence[str]) -> None:
        for note in notes:
            if note not in self.summary_notes:
                self.summary_notes.append(note)

    # --- OpenAI tool calling ----------------------------------------------------------------------------
    @staticmethod
    def definitions() -> list[dict[str, Any]]:
        """OpenAI tool definitions (``tools=`` of a chat request) of every book tool."""
        return tool_definitions()

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
                self.budget.spend("chapter_summary.get")
                summary = self.summary_of(str(args["chapter_id"]))
                value = {"chapter_id": args.get("chapter_id"), "summary": summary.text}
                value.update({"notes": list(summary.notes)} if summary.notes else {})
            elif name == "search":
                found = self.search(str(args.get("query", "")), args.get("scope"), args.get("k"))
                value = [hit_row(h) for h in found.hits]
            elif name == "text_search":
                value = [hit_row(h) for h in self.text_search(str(args.get("query", "")), args.get("scope"))]
            elif name == "semantic_search":
                hits = self.semantic_search(str(args.get("query", "")), args.get("scope"), args.get("k"))
                value = [hit_row(h) for h in hits]
            elif name == "chunk_get":
                value = hit_row(self.chunk(str(args["location_id"])), max_chars=10_000)
            elif name == "book_synopsis_get":
                self.budget.spend("book_synopsis.get")
                synopsis = self.synopsis_of(args.get("book_id"))
                value = {"synopsis": synopsis.text}
                value.update({"notes": list(synopsis.notes)} if synopsis.notes else {})
            else:
                value = {"error": f"unknown tool {name!r}"}
        except BudgetExceeded:
            raise
        except (FolioError, KeyError, TypeError, ValueError) as exc:
            value = {"error": str(exc)}
        return json.dumps(value, ensure_ascii=False)


def invalid_tool_call(name: str, arguments_json: str) -> str | None:
    """Why a model's tool call must not run (unknown tool, arguments not a JSON object, a required
    argument missing or empty); None when it may run."""
    specs = {spec[0]: spec for spec in TOOL_SPECS}
    if name not in specs:
        return f"unknown tool {name!r}: use one of {', '.join(specs)}"
    try:
        args = json.loads(arguments_json or "{}")
    except json.JSONDecodeError as exc:
        return f"the arguments are not valid JSON ({exc.msg})"
    if not isinstance(args, dict):
        return "the arguments must be a JSON object"
    _, _, properties, required = specs[name]
    for key in required:
        value = args.get(key)
        if properties.get(key, {}).get("type") == "string" and not (isinstance(value, str) and value.strip()):
            return f"argument {key!r} must be a non-empty string"
    return None
