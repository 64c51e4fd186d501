"""The library's stored chapter summaries and synopses: ``LIBRARY/cache/summaries/summaries.db``.

A summary is computed on its first request (extractive, or map-reduce with an LLM:
``nodes.backends.summaries``) and stored here, so the next process (``folio summary``, ``folio ask``,
``folio serve``, ``folio mcp``) reads it back instead of summarising again. One SQLite table (WAL, so
readers never wait for a writer)::

    summaries(book_id, kind, chapter_id, content_hash, summariser, text, created)
      kind          "chapter", or "synopsis" (chapter_id "")
      content_hash  sha256 of the chapter's text (``text_hash``); a synopsis: of the book's content
                    hash and chapter ids (``synopsis_hash``)
      summariser    "extractive-v1", or "llm:<model>:v<prompt version>"

A changed chapter has another hash, so it is summarised again; ``prune`` (run by the library after a
book is committed or removed, and by every writer's ``recover``) deletes the rows that no longer match
a chapter of the library, and ``drop`` a removed book's. It is derived data under ``cache/``: ``folio
cache clear`` deletes it, ``folio doctor`` checks it and clears it when damaged.

Degradation: a store that cannot be opened or written (a read-only library, a damaged file, a writer
holding the lock past ``BUSY_SECONDS``) never fails a request: ``get`` gives None, ``put`` False, and
``problem`` says why (callers add one note and keep the summary for the process only). A read-only
library's existing file is still read.

Limitations: a summary computed by a reader while a writer re-ingests its book may be stored under
the old chapter's hash after the prune; it is never read again (its key matches no chapter) and the
next write of that book, or the next ``recover``, deletes it.
"""

from __future__ import annotations

import contextlib
import hashlib
import sqlite3
import threading
import time
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from folio.nodes.backends.book_store import BookStore
from folio.nodes.core.types import FolioError

STORE_DIR = ("cache", "summaries")
STORE_FILE = "summaries.db"
BUSY_SECONDS = 2.0  # a write waits this long for another writer, then the summary is not stored

SCHEMA = """
CREATE TABLE IF NOT EXISTS summaries(
    book_id TEXT NOT NULL, kind TEXT NOT NULL, chapter_id TEXT NOT NULL, content_hash TEXT NOT NULL,
    summariser TEXT NOT NULL, text TEXT NOT NULL, created REAL NOT NULL,
    PRIMARY KEY(book_id, kind, chapter_id, content_hash, summariser));
"""


@dataclass(frozen=True)
class SummaryKey:
    """What a stored summary is keyed by."""

    book_id: str
    kind: str  # "chapter" or "synopsis"
    chapter_id: str  # "" for a synopsis
    content_hash: str
    summariser: str


def text_hash(text: str) -> str:
    """The content hash of a chapter's text (sha256, hex)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def synopsis_hash(descriptor: dict[str, Any]) -> str:
    """The content hash a book's synopsis is keyed by: its content hash and chapter ids."""
    ids = "|".join(str(c.get("chapter_id", "")) for c in descriptor.get("chapters", ()))
    return text_hash(f"{descriptor.get('content_hash', '')}|{ids}")


def store_path(library_dir: str | Path) -> Path:
    """Where a library keeps its summaries."""
    return Path(library_dir).joinpath(*STORE_DIR, STORE_FILE)


def current_keys(view: Any) -> set[tuple[str, str, str]]:
    """``(kind, chapter_id, content_hash)`` of every summary a book view (``BookStore``) can have now."""
    keys = {("chapter", cid, text_hash(view.chapter_text(cid))) for cid in view.titles}
    keys.add(("synopsis", "", synopsis_hash(view.descriptor)))
    return keys


class SummaryStore:
    """The summaries of one library; thread-safe (one connection behind a lock), opened lazily."""

    def __init__(self, path: str | Path, busy_seconds: float = BUSY_SECONDS) -> None:
        self.path = Path(path)
        self.busy_seconds = float(busy_seconds)
        self.problem: str | None = None  # why the last operation could not read or write, else None
        self._conn: sqlite3.Connection | None = None
        self._read_only = False
        self._lock = threading.Lock()

    # --- connection ---------------------------------------------------------------------------------
    def _open(self, create: bool) -> sqlite3.Connection | None:
        """The connection (reopened when the file was deleted, e.g. by ``folio cache clear``); None when
        there is no store and ``create`` is False, or it cannot be opened (``problem`` says why)."""
        if self._conn is not None and self.path.exists():
            return self._conn
        self._close()
        if not self.path.exists() and not create:
            return None
        conn: sqlite3.Connection | None = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=self.busy_seconds, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.executescript(SCHEMA)
            self._read_only = False
        except (OSError, sqlite3.Error) as exc:
            if conn is not None:
                with contextlib.suppress(sqlite3.Error):
                    conn.close()
            conn = self._open_read_only(exc)
        self._conn = conn
        return conn

    def _open_read_only(self, why: BaseException) -> sqlite3.Connection | None:
        """The existing file opened for reading (a read-only library), else None with ``problem``."""
        self.problem = _reason(why)
        if not self.path.exists():
            return None
        try:
            conn = sqlite3.connect(f"file:{self.path}?mode=ro&immutable=1", uri=True, check_same_thread=False)
            conn.execute("SELECT count(*) FROM summaries").fetchone()
        except sqlite3.Error as exc:
            self.problem = _reason(exc)
            return None
        self._read_only = True
        return conn

    def _close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(sqlite3.Error):
                self._conn.close()
            self._conn = None

    def close(self) -> None:
        """Close the connection (a later call opens it again)."""
        with self._lock:
            self._close()

    # --- reading and writing -----------------------------------------------------------------------
    def get(self, key: SummaryKey) -> str | None:
        """The stored summary of ``key``, or None (not stored, or the store cannot be read)."""
        with self._lock:
            conn = self._open(create=False)
            if conn is None:
                return None
            try:
                row = conn.execute(
                    "SELECT text FROM summaries WHERE book_id = ? AND kind = ? AND chapter_id = ? "
                    "AND content_hash = ? AND summariser = ?",
                    (key.book_id, key.kind, key.chapter_id, key.content_hash, key.summariser),
                ).fetchone()
            except sqlite3.Error as exc:
                self.problem = _reason(exc)
                return None
        return None if row is None else str(row[0])

    def put(self, key: SummaryKey, text: str) -> bool:
        """Store ``text`` under ``key``; False (with ``problem``) when it cannot be written."""
        with self._lock:
            conn = self._open(create=True)
            if conn is None:
                return False
            if self._read_only:
                return False
            try:
                with conn:
                    conn.execute(
                        "INSERT OR REPLACE INTO summaries VALUES (?, ?, ?, ?, ?, ?, ?)",
                        (
                            key.book_id,
                            key.kind,
                            key.chapter_id,
                            key.content_hash,
                            key.summariser,
                            text,
                            time.time(),
                        ),
                    )
            except sqlite3.Error as exc:
                self.problem = _reason(exc)
                return False
        self.problem = None
        return True

    def _delete(self, sql: str, params: Iterable[Any]) -> int:
        with self._lock:
            conn = self._open(create=False)
            if conn is None or self._read_only:
                return 0
            try:
                with conn:
                    return conn.execute(sql, tuple(params)).rowcount
            except sqlite3.Error as exc:
                self.problem = _reason(exc)
                return 0

    def drop(self, book_id: str) -> int:
        """Delete every summary of ``book_id``; the number deleted."""
        return self._delete("DELETE FROM summaries WHERE book_id = ?", (book_id,))

    def prune(self, book_id: str, keep: Collection[tuple[str, str, str]]) -> int:
        """Delete the summaries of ``book_id`` whose ``(kind, chapter_id, content_hash)`` is not in
        ``keep``; the number deleted."""
        wanted = set(keep)
        stale = [k for k in self.keys(book_id) if k not in wanted]
        return sum(
            self._delete(
                "DELETE FROM summaries "
                "WHERE book_id = ? AND kind = ? AND chapter_id = ? AND content_hash = ?",
                (book_id, *k),
            )
            for k in stale
        )

    def _rows(self, sql: str, params: Iterable[Any] = ()) -> list[tuple]:
        with self._lock:
            conn = self._open(create=False)
            if conn is None:
                return []
            try:
                return [tuple(r) for r in conn.execute(sql, tuple(params))]
            except sqlite3.Error as exc:
                self.problem = _reason(exc)
                return []

    def keys(self, book_id: str) -> set[tuple[str, str, str]]:
        """``(kind, chapter_id, content_hash)`` of the stored summaries of ``book_id``."""
        sql = "SELECT DISTINCT kind, chapter_id, content_hash FROM summaries WHERE book_id = ?"
        return {(str(a), str(b), str(c)) for a, b, c in self._rows(sql, (book_id,))}

    def book_ids(self) -> list[str]:
        """The books that have stored summaries."""
        return [str(r[0]) for r in self._rows("SELECT DISTINCT book_id FROM summaries ORDER BY 1")]

    def rows(self, book_id: str | None = None) -> list[tuple[str, str, str, str, str, str]]:
        """``(book_id, kind, chapter_id, content_hash, summariser, text)`` of the stored summaries."""
        sql = "SELECT book_id, kind, chapter_id, content_hash, summariser, text FROM summaries"
        found = self._rows(sql + " WHERE book_id = ?", (book_id,)) if book_id else self._rows(sql)
        return sorted((str(a), str(b), str(c), str(d), str(e), str(f)) for a, b, c, d, e, f in found)


def _reason(exc: BaseException) -> str:
    text = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"


_STORES: dict[str, SummaryStore] = {}
_STORES_LOCK = threading.Lock()


def summary_store(library_dir: str | Path) -> SummaryStore:
    """The process's one ``SummaryStore`` of the library directory ``library_dir``."""
    key = str(Path(library_dir).resolve())
    with _STORES_LOCK:
        store = _STORES.get(key)
        if store is None:
            store = _STORES[key] = SummaryStore(store_path(key))
        return store


def prune_library(index: Any, book_ids: Collection[str] | None = None) -> int:
    """Delete the stored summaries of ``book_ids`` (None: every book that has some) that match no
    chapter (or synopsis) of the library ``index`` holds now; a book no longer in it loses them all.
    Returns the number deleted; never fails a write (a book whose chapters cannot be read is skipped)."""
    store = summary_store(index.directory)
    if not store.path.exists():
        return 0
    descriptors = {d["book_id"]: d for d in index.descriptors()}
    deleted = 0
    for book_id in store.book_ids() if book_ids is None else book_ids:
        descriptor = descriptors.get(book_id)
        if descriptor is None:
            deleted += store.drop(book_id)
            continue
        try:
            keys = current_keys(BookStore(index, descriptor))
        except FolioError:  # a chapter that cannot be read: left for `folio doctor`; its rows wait
            continue
        deleted += store.prune(book_id, keys)
    return deleted
