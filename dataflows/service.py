"""One warm Folio for many callers: the operations ``folio serve`` (HTTP, ``dataflows.server``) and
``folio mcp`` (MCP tools, ``dataflows.mcp_server``) expose, over one library and one config.

    service = Service("~/folio", zim_paths=["wikipedia.zim"])
    service.ask("Why does Ahab hunt the whale?")          # the CLI's `folio ask --json` shape
    job = service.ingest(["moby-dick.epub"]); service.job(job.job_id)

Every read goes through the same API as the CLI (``dataflows.api``, ``dataflows.asking``,
``dataflows.kiwix_query``) and returns the CLI's ``--json`` shape, so the process stays warm: the
encoder, the library index, the drivers, the open ZIM archives (or kiwix-serve client) and the LLM
connection are loaded once and shared by every request (the same process-wide resources a warm
``ask`` uses).

Writes (ingest, remove, sync) are jobs run one at a time on one background thread, in the order given, under
the library's writer lock; each book is committed in one transaction, so readers see the library
before or after a book, never half of one. A job's progress (chunks embedded of the chunks announced)
is polled with ``job(id)``; ``jobs()`` lists the recent ones (the last ``JOBS_KEPT``).

Settings: the library directory and config as for the CLI; ``zim_paths`` or ``kiwix_url`` add the
Kiwix source (ask, Kiwix search, article get). Limits (``MAX_QUESTION_CHARS``, ``MAX_K``) apply to every
caller; they raise ``FolioError`` (one line), which the fronts turn into a 4xx or a tool error.

A warmed service runs torch on one intra-op thread (``QUERY_THREADS``): a request's encode is a
handful of short texts, and torch's OpenMP threads spin-wait for each other whenever another
request or process holds a core (measured on the Potter questions, 2 shared cores under load: 735 CPU
ms a warm ask with torch's default 2 threads, 119 ms with one); concurrent requests still use every
core, each on its own thread.

Conversations: ``ask`` and ``book_tools`` take an optional conversation id; the calls of one
conversation share one session cache (``Session``), so a repeated lookup or search is served from it,
as within one ``folio ask``. Without an id each call has a fresh cache. A conversation's cache is not
cleared when a book is ingested or removed meanwhile: start a new conversation to see the change.

Limitations: one library per process; an ingest job run inside the service encodes on one thread
too; ingest paths are files on this machine (the HTTP API does not take uploads); jobs live in
memory (a restart forgets their history, never a committed book).
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from folio.dataflows import api
from folio.dataflows.asking import ask, ask_config, ask_driver, query_encoder, shared_resources
from folio.dataflows.library import Library
from folio.dataflows.summarizing import summarizer_for
from folio.nodes.backends.book_tools import BookTools, Session, ToolBudget
from folio.nodes.backends.progress import Progress
from folio.nodes.backends.workers import limit_torch_threads
from folio.nodes.core.kiwix_types import Article
from folio.nodes.core.ranking import HitFusion
from folio.nodes.core.types import ConceptMap, FolioError

MAX_QUESTION_CHARS = 2_000  # a question or query longer than this is refused
MAX_K = 100  # the most hits one search returns
MAX_PATHS = 1_000  # the most paths one ingest job takes
JOBS_KEPT = 50  # finished jobs remembered for polling
TOOL_CALLS_PER_REQUEST = 1  # an MCP / HTTP tool call is one call of its own budget
MAX_CONVERSATIONS = 256  # session caches kept, one per conversation id, the least recently used dropped
MAX_CONVERSATION_CHARS = 100  # the longest conversation id
QUERY_THREADS = 1  # torch intra-op threads of a service process (see the module docstring)


def version() -> str:
    """The installed Folio version ("0.0.0" when it runs from a tree that is not installed)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("folio")
    except PackageNotFoundError:
        return "0.0.0"


def checked_text(name: str, value: object, limit: int = MAX_QUESTION_CHARS) -> str:
    """``value`` as a non-empty string of at most ``limit`` characters, else a one-line ``FolioError``."""
    if not isinstance(value, str) or not value.strip():
        raise FolioError(name, "must be a non-empty string")
    if len(value) > limit:
        raise FolioError(name, f"too long ({len(value):,} characters; the limit is {limit:,})")
    return value


def checked_k(value: object, default: int | None = None) -> int | None:
    """A result count between 1 and ``MAX_K`` (None: the config's default)."""
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_K:
        raise FolioError("k", f"must be a whole number from 1 to {MAX_K}")
    return value


def article_dict(article: Article) -> dict[str, Any]:
    """An article as JSON: book, path, title, url, the clean text and its sections."""
    return {
        "book": article.book,
        "path": article.path,
        "title": article.title,
        "url": article.url,
        "text": article.text,
        "sections": [{"title": s.title, "paragraphs": list(s.paragraphs)} for s in article.sections],
    }


# --- jobs ----------------------------------------------------------------------------------------------
@dataclasses.dataclass
class Job:
    """One write job: its kind ("ingest" | "remove"), state and progress, and what it did."""

    job_id: str
    kind: str
    target: tuple[str, ...]
    state: str = "queued"  # queued | running | done | failed
    done: float = 0.0  # chunks embedded so far (ingest)
    total: float = 0.0  # chunks announced so far (ingest; grows as books are parsed)
    created: float = dataclasses.field(default_factory=time.time)
    started: float | None = None
    finished: float | None = None
    ingested: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    errors: list[str] = dataclasses.field(default_factory=list)
    removed: list[str] = dataclasses.field(default_factory=list)  # book ids (remove, sync)
    summary: str = ""  # a sync's one summary line

    def as_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["target"] = list(self.target)
        out["done"], out["total"] = round(self.done, 3), round(self.total, 3)  # fractions of chunks add up
        out["fraction"] = (
            min(1.0, round(self.done / self.total, 4)) if self.total else (1.0 if self.finished else 0.0)
        )
        return out


class JobProgress(Progress):
    """Progress sink that records an ingest's counts on its job (read by pollers)."""

    def __init__(self, job: Job) -> None:
        self._job = job
        self._lock = threading.Lock()

    def add_total(self, n: float) -> None:
        with self._lock:
            self._job.total += n

    def advance(self, n: float) -> None:
        with self._lock:
            self._job.done += n


# --- the service -----------------------------------------------------------------------------------
class Service:
    """Folio's operations over one library and config, safe to call from many threads at once."""

    def __init__(
        self,
        library: str | Path | Library | None = None,
        config: str | Path | Mapping[str, Any] | None = None,
        zim_paths: Sequence[str | os.PathLike[str]] | None = None,
        kiwix_url: str | None = None,
    ) -> None:
        self.library = api.resolve_library(library)
        self.config = ask_config(config, zim_paths, kiwix_url)
        self._writes = ThreadPoolExecutor(max_workers=1, thread_name_prefix="folio-write")
        self._jobs: OrderedDict[str, Job] = OrderedDict()
        self._jobs_lock = threading.Lock()
        self._ids = itertools.count(1)
        self.started = time.time()
        self._in_play: tuple[tuple, dict[str, Any], dict[str, ConceptMap]] | None = None
        self._conversations: OrderedDict[str, Session] = OrderedDict()

    # --- reading ---------------------------------------------------------------------------------
    def health(self) -> dict[str, Any]:
        """Liveness and what this process serves: version, library, book count, sources, uptime."""
        return {
            "status": "ok",
            "version": version(),
            "library": str(self.library.path),
            "books": len(self.library.descriptors()),
            "kiwix": self.config.get("kiwix") if self.kiwix_enabled else None,
            "llm": self.config.get("llm"),
            "uptime_s": round(time.time() - self.started, 1),
        }

    @property
    def kiwix_enabled(self) -> bool:
        cfg = self.config
        return bool((cfg.get("kiwix") == "libzim" and cfg.get("zim_paths")) or cfg.get("kiwix") == "http")

    def warm(self) -> None:
        """Load what the first request would (library index, encoder, drivers, Kiwix backend, LLM
        connection), so no caller pays it; torch to ``QUERY_THREADS`` threads when the encoder loads."""
        self.library.descriptors()
        if query_encoder(self.config, self.library)[0] is not None:
            limit_torch_threads(QUERY_THREADS)
        shared_resources(self.config, ask_driver(self.config))

    def session(self, conversation: object = None) -> Session:
        """A fresh session cache, or the one of ``conversation`` (an id the caller chooses): the cache of
        concept lookups and retrieval results that every ask and tool call of that conversation shares
        (the ``MAX_CONVERSATIONS`` most recently used are kept)."""
        if conversation is None:
            return Session()
        key = checked_text("conversation", conversation, MAX_CONVERSATION_CHARS)
        with self._jobs_lock:
            held = self._conversations.pop(key, None)  # (an empty Session is falsy: no ``or``)
            held = Session() if held is None else held
            self._conversations[key] = held
            while len(self._conversations) > MAX_CONVERSATIONS:
                self._conversations.popitem(last=False)
        return held

    def ask(
        self, question: object, conversation: object = None, filters: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """Answer a question from the books (those ``filters`` match: ``dataflows.filtering``) and the
        configured sources (``folio ask --json``); with a ``conversation`` id, in that conversation's
        session cache (the answer then says how many of its tool calls the cache served:
        ``session_cache_hits``)."""
        text = checked_text("question", question)
        session = self.session(conversation)
        before = session.hits
        out = ask(text, session=session, config=self.config, library=self.library, filters=filters).as_dict()
        if conversation is not None:
            out.update(conversation=conversation, session_cache_hits=session.hits - before)
        return out

    def search(
        self,
        query: object,
        mode: str | None = None,
        k: object = None,
        book: str | None = None,
        chapters: Sequence[str] | None = None,
        filters: Mapping[str, Any] | None = None,
    ) -> list[dict[str, Any]]:
        """Hits for a query (``folio search --json``), in the books ``filters`` match."""
        text = checked_text("query", query)
        if chapters is not None and len(chapters) > MAX_K:
            raise FolioError("chapter", f"at most {MAX_K} chapters")
        hits = api.search(
            text,
            library=self.library,
            book=book,
            chapter=list(chapters) if chapters else None,
            mode=mode,
            k=checked_k(k),
            config=self.config,
            filters=filters,
        )
        return [h.as_dict() for h in hits]

    def books(self, filters: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        """The library's books (``folio books --json``), those ``filters`` match."""
        return api.books(self.library, filters)

    def book(self, book: str) -> dict[str, Any]:
        """One book's row (``folio books --json``) with its chapters' ids and titles."""
        book_id = self.library.resolve_book(book)
        row = next(r for r in self.library.books() if r["book_id"] == book_id)
        store = self.library.store(book_id)
        chapters = [{"chapter_id": cid, "title": title} for cid, title in store.titles.items()]
        return {**row, "chapters": len(chapters), "contents": chapters}

    def concepts(self, query: object, book: str | None = None, k: object = None) -> list[dict[str, Any]]:
        """Concept-map matches (``folio concepts --json``)."""
        return api.concept_rows(checked_text("query", query), self.library, book, checked_k(k, 10) or 10)

    def chapter(self, book: str, chapter_id: str) -> dict[str, Any]:
        """One chapter's whole text, with the book's and chapter's titles."""
        store = self.library.store(self.library.resolve_book(book))
        if chapter_id not in store.titles:
            raise FolioError(f"{store.book_id}/{chapter_id}", "no such chapter")
        return {
            "book_id": store.book_id,
            "book_title": store.descriptor.get("title", ""),
            "chapter_id": chapter_id,
            "chapter_title": store.titles[chapter_id],
            "text": store.chapter_text(chapter_id),
        }

    def page_image(self, book: str, page: str, quote: str = "") -> bytes:
        """A PDF book's page (by its label) as a PNG with the quote's first words marked."""
        from folio.nodes.readers.pdf_image import page_index, page_png

        store = self.library.store(self.library.resolve_book(book))
        labels = store.descriptor.get("page_labels") or []
        if store.descriptor.get("format") != "pdf" or not labels:
            raise FolioError(store.book_id, "not a PDF book: it has no page images")
        return page_png(str(store.descriptor["source_file"]), page_index(labels, page), quote)

    def chunk(self, book: str, chunk_id: str) -> dict[str, Any]:
        """One chunk as a hit (score 0): its chapter, offsets and text."""
        store = self.library.store(self.library.resolve_book(book))
        try:
            return store.chunk(chunk_id).as_dict()
        except KeyError:
            raise FolioError(f"{store.book_id}/{chunk_id}", "no such chunk") from None

    def kiwix_search(self, query: object) -> dict[str, Any]:
        """The Kiwix articles and passages that answer a question (``folio kiwix --json``)."""
        from folio.dataflows.kiwix_query import kiwix_driver, run_kiwix_driver

        text = checked_text("query", query)
        dr = kiwix_driver(self._kiwix_config())
        backend = self._kiwix_backend()
        return run_kiwix_driver(dr, text, backend=backend, config=self.config).as_dict()

    def kiwix_article(self, book: object, path: object) -> dict[str, Any]:
        """One Kiwix article as clean text (redirects followed)."""
        book_name = checked_text("book", book, 200)
        article_path = checked_text("path", path, 2_000)
        self._kiwix_config()
        return article_dict(self._kiwix_backend().article(book_name, article_path))

    def kiwix_books(self) -> list[dict[str, Any]]:
        """The Kiwix books this process searches (name, title, language, article count)."""
        if not self.kiwix_enabled:
            return []
        return [dataclasses.asdict(b) for b in self._kiwix_backend().books()]

    def _kiwix_config(self) -> dict[str, Any]:
        if not self.kiwix_enabled:
            raise FolioError("kiwix", "no Kiwix source: serve with --zim PATH... or --kiwix-url URL")
        return self.config

    def _kiwix_backend(self) -> Any:
        return shared_resources(self.config, ask_driver(self.config), ["kiwix_backend"])["kiwix_backend"]

    # --- the book tools (MCP) --------------------------------------------------------------------
    def book_tools(self, limit: int = TOOL_CALLS_PER_REQUEST, conversation: object = None) -> BookTools:
        """The agent's book tools over every book, with a budget of ``limit`` calls (one request), in
        ``conversation``'s session cache (a fresh one without)."""
        stores, maps = self._books_in_play()
        encoder, _why = query_encoder(self.config, self.library)
        k = int(self.config.get("search_k") or 10)
        summarizer = summarizer_for(self.config)  # summaries: at most 5 LLM calls of their own
        fusion = HitFusion.from_config(self.config)  # the fusion of `folio search` (one retrieval path)
        session = self.session(conversation)
        return BookTools(
            stores, maps, encoder, ToolBudget(limit), session, summarizer=summarizer, k=k, fusion=fusion
        )

    def _books_in_play(self) -> tuple[dict[str, Any], dict[str, ConceptMap]]:
        """Every book's store and concept map, parsed once per library generation."""
        descriptors = self.library.descriptors()
        key = tuple((d["book_id"], d.get("content_hash", "")) for d in descriptors)
        with self._jobs_lock:
            held = self._in_play
        if held is not None and held[0] == key:
            return held[1], held[2]
        stores = {s.book_id: s for s in self.library.stores(None)}
        maps: dict[str, ConceptMap] = {}
        for book_id in stores:
            cmap = self.library.concept_map(book_id)
            if cmap is not None:
                maps[book_id] = cmap
        with self._jobs_lock:
            self._in_play = (key, stores, maps)
        return stores, maps

    # --- writing ---------------------------------------------------------------------------------
    def ingest(self, paths: Sequence[str]) -> Job:
        """Queue an ingest of book files or folders on this machine; returns the job at once."""
        if not paths or len(paths) > MAX_PATHS or not all(isinstance(p, str) and p.strip() for p in paths):
            raise FolioError("paths", f"give 1 to {MAX_PATHS} file or folder paths")
        missing = [p for p in paths if not Path(p).expanduser().exists()]
        if missing:
            raise FolioError(missing[0], "no such file or folder")
        return self._submit("ingest", tuple(paths))

    def sync(self, paths: Sequence[str]) -> Job:
        """Queue a sync of folders or Calibre libraries (``dataflows.syncing``; vanished books removed
        without asking: ``folio serve --watch``); returns the job at once."""
        if not paths or len(paths) > MAX_PATHS or not all(isinstance(p, str) and p.strip() for p in paths):
            raise FolioError("paths", f"give 1 to {MAX_PATHS} file or folder paths")
        return self._submit("sync", tuple(paths))

    def remove(self, book: str) -> Job:
        """Queue the removal of a book (an exact id or a unique prefix of at least 4 characters:
        ``Library.removal_target``); returns the job at once."""
        return self._submit("remove", (self.library.removal_target(book),))

    def removal(self, book: str) -> dict[str, Any]:
        """What ``remove(book)`` would take away (a dry run): the book's id and title; nothing changes."""
        return self.library.removal(book)

    def job(self, job_id: str) -> dict[str, Any]:
        """A job's state and progress."""
        with self._jobs_lock:
            job = self._jobs.get(job_id)
            if job is None:
                raise FolioError(job_id, "no such job")
            return job.as_dict()

    def jobs(self) -> list[dict[str, Any]]:
        """The recent jobs, newest first."""
        with self._jobs_lock:
            return [j.as_dict() for j in reversed(self._jobs.values())]

    def wait(self, job_id: str, timeout: float | None = None) -> dict[str, Any]:
        """Block until the job has finished (tests, scripts); its final state."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            state = self.job(job_id)
            if state["finished"] is not None:
                return state
            if deadline is not None and time.monotonic() > deadline:
                raise FolioError(job_id, f"still {state['state']} after {timeout} s")
            time.sleep(0.05)

    def close(self) -> None:
        """Finish the queued jobs and release the library."""
        self._writes.shutdown(wait=True)
        self.library.close()

    def _run_sync(self, job: Job) -> None:
        from folio.dataflows.syncing import run_sync

        done = run_sync(
            list(job.target), self.library, self.config, assume_yes=True, progress=JobProgress(job)
        )
        job.ingested = [
            {"book_id": s.book_id, "title": s.title, "chapters": s.n_chapters, "chunks": s.n_chunks}
            for s in done.ingested
        ]
        job.removed = list(done.removed_ids)
        job.errors = [str(e) for e in (*done.plan.problems, *done.errors)]
        job.summary = done.summary()

    def _submit(self, kind: str, target: tuple[str, ...]) -> Job:
        job = Job(job_id=f"{kind}-{next(self._ids)}", kind=kind, target=target)
        with self._jobs_lock:
            self._jobs[job.job_id] = job
            while len(self._jobs) > JOBS_KEPT:
                oldest = next(iter(self._jobs))
                if self._jobs[oldest].finished is None:
                    break
                del self._jobs[oldest]
        self._writes.submit(self._run, job)
        return job

    def _run(self, job: Job) -> None:
        job.state, job.started = "running", time.time()
        try:
            if job.kind == "ingest":
                report = api.ingest(
                    list(job.target), library=self.library, config=self.config, progress=JobProgress(job)
                )
                job.ingested = [
                    {"book_id": s.book_id, "title": s.title, "chapters": s.n_chapters, "chunks": s.n_chunks}
                    for s in report.ingested
                ]
                job.errors = [str(e) for e in report.errors]
            elif job.kind == "sync":
                self._run_sync(job)
            else:
                with self.library.writer():
                    self.library.remove(job.target[0])
            job.state = "failed" if job.errors else "done"
        except FolioError as exc:
            job.errors.append(str(exc))
            job.state = "failed"
        except Exception as exc:  # a job never takes the service down; its reason is its error
            job.errors.append(f"{job.kind} failed: {type(exc).__name__}: {exc}")
            job.state = "failed"
        finally:
            job.finished = time.time()
