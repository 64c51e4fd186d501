"""The library index's storage (``nodes.backends.library_index``): the schema, per-thread SQLite
connections, the descriptors and chunks, the vector segments and their memory-mapped views, and the
vectors files a generation needs. ``IndexSearch``, ``IndexWrite`` and ``IndexRecovery`` build on it.

Config: none (the constants below). Limitations: see ``nodes.backends.library_index``.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from folio.nodes.backends.neighbours import skip_meta
from folio.nodes.backends.postings import fts5_tokenizer
from folio.nodes.backends.postings_runs import KEPT, RUNS_SCHEMA, RUNS_TABLES
from folio.nodes.backends.vector_segments import (
    Segment,
    usearch_index,
)
from folio.nodes.core.text import STOPWORDS
from folio.nodes.core.types import FolioError, Hit

FORMAT_VERSION = 2
DATABASE = "library.sqlite"
BM25_K1, BM25_B = 1.2, 0.75  # FTS5's built-in bm25 parameters, kept by the scoped variant
EXPANSION_SEARCH = 128  # HNSW search breadth: final top-10 agreement with exact 0.948 at 64, 0.983 here
DTYPES = ("f32", "f16", "i8")
FTS_TOKENIZE = "porter unicode61 remove_diacritics 2"  # chunks_fts's tokenizer, read by the postings too

SCHEMA = (
    """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS books(
    book_id TEXT PRIMARY KEY, title TEXT NOT NULL, descriptor TEXT NOT NULL, concept_map BLOB);
CREATE TABLE IF NOT EXISTS chapters(
    book_id TEXT NOT NULL, chapter_id TEXT NOT NULL, ord INTEGER NOT NULL, title TEXT NOT NULL,
    text TEXT NOT NULL, PRIMARY KEY(book_id, chapter_id));
CREATE TABLE IF NOT EXISTS chunks(
    rowid INTEGER PRIMARY KEY, book_id TEXT NOT NULL, chunk_id TEXT NOT NULL, chapter_id TEXT NOT NULL,
    ordinal INTEGER NOT NULL, start INTEGER NOT NULL, end INTEGER NOT NULL, n_tokens INTEGER NOT NULL,
    text TEXT NOT NULL, UNIQUE(book_id, chunk_id));
CREATE INDEX IF NOT EXISTS chunks_chapter ON chunks(book_id, chapter_id, ordinal);
CREATE TABLE IF NOT EXISTS windows(
    key INTEGER PRIMARY KEY, book_id TEXT NOT NULL, chunk_rowid INTEGER NOT NULL, start INTEGER,
    end INTEGER, vector BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS windows_book ON windows(book_id, key);
CREATE TABLE IF NOT EXISTS segments(
    generation INTEGER PRIMARY KEY, lo INTEGER NOT NULL, hi INTEGER NOT NULL, size INTEGER NOT NULL,
    live INTEGER NOT NULL);
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(
    text, content='chunks', content_rowid='rowid', tokenize='"""
    + FTS_TOKENIZE
    + """');
CREATE TABLE IF NOT EXISTS postings(
    term TEXT NOT NULL, lo INTEGER NOT NULL, records BLOB NOT NULL, PRIMARY KEY(term, lo)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS postings_lo ON postings(lo);
CREATE TABLE IF NOT EXISTS terms(id INTEGER PRIMARY KEY, term TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS neighbours(
    term TEXT NOT NULL, lo INTEGER NOT NULL, near BLOB NOT NULL, PRIMARY KEY(term, lo)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS neighbours_lo ON neighbours(lo);
"""
    + RUNS_SCHEMA
)

CHUNK_COLUMNS = (
    "c.rowid, c.book_id, c.chunk_id, c.chapter_id, c.start, c.end, c.text, "
    "coalesce((SELECT title FROM chapters h WHERE h.book_id = c.book_id AND h.chapter_id = c.chapter_id), '')"
)


DAMAGED = (
    "damaged library database ({}): run `folio doctor`; if it stays damaged, move it away and "
    "`folio ingest` the books again"
)
DESCRIPTOR_KEYS = {"book_id": str, "title": str, "author": str, "source_file": str, "chapters": list}
DESCRIPTOR_COUNTS = ("n_chunks", "n_windows")


def descriptor_problem(book_id: str, raw: str | bytes) -> str | None:
    """Why a book's stored descriptor (JSON) cannot be read, or None when it can."""
    try:
        descriptor = json.loads(raw)
    except (ValueError, TypeError) as exc:
        return f"its descriptor is not JSON ({exc})"
    if not isinstance(descriptor, dict):
        return "its descriptor is not a JSON object"
    for key, kind in DESCRIPTOR_KEYS.items():
        if not isinstance(descriptor.get(key), kind):
            return f"its descriptor has no valid {key!r}"
    for key in DESCRIPTOR_COUNTS:
        value = descriptor.get(key)
        if isinstance(value, bool) or not isinstance(value, int):
            return f"its descriptor has no valid {key!r}"
    if descriptor["book_id"] != book_id:
        return f"its descriptor names another book ({descriptor['book_id']!r})"
    if not all(isinstance(c, dict) and {"chapter_id", "title"} <= set(c) for c in descriptor["chapters"]):
        return "its descriptor has a chapter without id or title"
    return None


def sql_in(column: str, values: Collection[str] | Collection[int]) -> tuple[str, list[object]]:
    return f"{column} IN ({','.join('?' * len(values))})", list(values)


SCOPE_LIST_MAX = 64  # a scope of more books or chapters is one JSON parameter (``json_each``)
Scope = tuple[str, list[object]]  # `` AND ...`` SQL and its parameters


def sql_scope(book_ids: Collection[str] | None, chapter_ids: Collection[str] | None) -> Scope:
    """`` AND ...`` restricting chunk alias ``c`` to the books and chapters (None: no restriction). A long
    list is one JSON parameter: a statement repeats its scope per rowid span and per phrase, and a search
    routed to hundreds of books would pass SQLite's limit of 32,766 parameters."""
    sql, params = "", list[object]()
    for column, values in (("c.book_id", book_ids), ("c.chapter_id", chapter_ids)):
        if values is None:
            continue
        ordered = sorted(set(values))
        if len(ordered) > SCOPE_LIST_MAX:
            sql += f" AND {column} IN (SELECT value FROM json_each(?))"
            params.append(json.dumps(ordered))
        else:
            clause, ps = sql_in(column, ordered)
            sql += f" AND {clause}"
            params.extend(ps)
    return sql, params


def fts_select(
    columns: str, params: Sequence[object], match: str, where: Scope, spans: Sequence[tuple[int, int]]
) -> Scope:
    """``SELECT columns FROM chunks_fts ... WHERE chunks_fts MATCH ?`` over the chunks ``where`` keeps,
    once per rowid span (joined by ``UNION ALL``: FTS5 walks only those stretches of the postings) or
    once over the whole index when there is none; with its parameters."""
    join = " JOIN chunks c ON c.rowid = chunks_fts.rowid" if where[0] else ""
    one = f"SELECT {columns} FROM chunks_fts{join} WHERE chunks_fts MATCH ?"
    if not spans:
        return one + where[0], [*params, match, *where[1]]
    sql = " UNION ALL ".join(f"{one} AND chunks_fts.rowid BETWEEN ? AND ?{where[0]}" for _ in spans)
    return sql, [p for lo, hi in spans for p in (*params, match, lo, hi, *where[1])]


def row_hit(row: Sequence[Any], score: float) -> Hit:
    _, book_id, chunk_id, chapter_id, start, end, text, title = row[:8]
    return Hit(
        book_id=book_id,
        chapter_id=chapter_id,
        chapter_title=title,
        chunk_id=chunk_id,
        start=start,
        end=end,
        score=float(score),
        text=text,
    )


def vector_matrix(blobs: Sequence[bytes]) -> np.ndarray:
    """The stored float32 window vectors (``windows.vector`` blobs) as one matrix, a row per blob."""
    return np.stack([np.frombuffer(b, dtype=np.float32) for b in blobs])


def scoped_bm25(api: Any, /, *args: Any) -> float:
    """FTS5 auxiliary function ``scoped_bm25(chunks_fts, avgdl, idf...)``: bm25 (positive: higher is
    better) with the given mean row length and per-phrase idfs, so that a search of some books ranks by
    those books' statistics."""
    avgdl, *idfs = args
    norm = BM25_K1 * (1 - BM25_B + BM25_B * api.column_size(0) / avgdl)
    score = 0.0
    for i, idf in enumerate(idfs):
        tf = len(api.phrase_locations(i)[0])
        if tf:
            score += idf * tf * (BM25_K1 + 1) / (tf + norm)
    return score


def _read_only(directory: Path, database: Path) -> bool:
    """True when this process may read the library but not write it (a folder or database it may not
    write: another user's library, a read-only mount)."""
    if directory.is_dir() and not os.access(directory, os.W_OK):
        return True
    return database.exists() and not os.access(database, os.W_OK)


def _read_only_uri(database: Path) -> str:
    """A read-only SQLite URI for ``database``: with its write-ahead log when one is there to read (SQLite
    reads it through the shared-memory file), else ``immutable`` (SQLite cannot create the ``-shm`` file
    in a folder it may not write)."""
    from urllib.parse import quote

    wal = database.with_name(database.name + "-wal")
    has_log = wal.exists() and wal.stat().st_size > 0
    return f"file:{quote(os.fsencode(database))}?{'mode=ro' if has_log else 'immutable=1'}"


def apsw_busy() -> type[Exception]:
    """SQLite's "database is locked" error class (apsw is imported lazily)."""
    import apsw

    return apsw.BusyError


def _meta_complete(conn: Any) -> bool:
    """The database is in WAL mode and holds every table of ``SCHEMA`` and the meta rows (a library
    that opening need not write)."""
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table')")}
    wanted = {"meta", "books", "chapters", "chunks", "windows", "segments", "chunks_fts", "postings"}
    wanted |= {"terms", "neighbours", *RUNS_TABLES}
    keys = {row[0] for row in conn.execute("SELECT key FROM meta")}
    mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
    return (
        wanted <= tables
        and {"format_version", "generation", "next_chunk", "next_window"} <= keys
        and (str(mode).lower() == "wal")
    )


class IndexStore:
    """The library's one SQLite database and one HNSW; per-thread connections, a shared HNSW view.
    A library this process may not write is opened read-only (``read_only``): every read works, a
    write fails as SQLite's read-only error."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self.path = self.directory / DATABASE
        self._local = threading.local()
        self._connections: dict[threading.Thread, Any] = {}
        self._lock = threading.RLock()
        self._views: dict[int, Any] = {}  # segment generation -> memory-mapped HNSW view
        self._vector_cache: OrderedDict[tuple[int, str], tuple[np.ndarray, np.ndarray, np.ndarray]] = (
            OrderedDict()
        )
        self._cache_bytes = 0
        self._by_generation: dict[str, tuple[int, Any]] = {}
        self.read_only = _read_only(self.directory, self.path)
        if not self.read_only:
            try:
                self.directory.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise FolioError(
                    str(self.directory), f"cannot create the library ({exc.strerror or exc})"
                ) from None
        with self._lock, self.database_errors():
            conn = self._conn()
            tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if tables and "meta" not in tables:
                raise FolioError(
                    str(self.path),
                    "not a Folio library database (it holds other tables): use another --library",
                )
            if self.read_only:
                if "meta" not in tables:
                    raise FolioError(
                        str(self.directory), "cannot write to the library (read-only), which is empty"
                    )
                return
            if "meta" in tables and _meta_complete(conn):
                return  # an existing library: opening it writes nothing (a reader never takes the write lock)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("BEGIN IMMEDIATE")  # waits for a writer (the busy timeout), never fails on one
            try:
                conn.execute(SCHEMA)
                conn.execute(
                    "INSERT OR IGNORE INTO meta VALUES ('format_version', ?), ('generation', '0'), "
                    "('next_chunk', '1'), ('next_window', '1')",
                    (str(FORMAT_VERSION),),
                )
                if conn.execute("SELECT 1 FROM chunks LIMIT 1").fetchone() is None:  # postings from the start
                    conn.execute("INSERT OR IGNORE INTO meta VALUES ('postings', 'complete')")
                    self._start_neighbours(conn)
                conn.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(Exception):
                    conn.execute("ROLLBACK")
                raise

    @staticmethod
    def _start_neighbours(conn: Any) -> None:
        """Inside a write transaction: the marks that the library keeps word neighbours from now on, with
        its stop words' tokens (``nodes.backends.neighbours``), and postings runs; a mark there is kept."""
        skipped = skip_meta(fts5_tokenizer(conn, FTS_TOKENIZE), STOPWORDS)
        conn.execute("INSERT OR IGNORE INTO meta VALUES ('neighbours', ?), (?, 'kept')", (skipped, KEPT))

    # --- connections -----------------------------------------------------------------------------
    def _conn(self) -> Any:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            import apsw

            try:
                if self.read_only:
                    conn = apsw.Connection(
                        _read_only_uri(self.path), flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI
                    )
                else:
                    conn = apsw.Connection(str(self.path))
            except apsw.Error as exc:
                raise FolioError(str(self.path), f"cannot open the library database ({exc})") from None
            conn.set_busy_timeout(60_000)
            with self.database_errors():
                conn.execute("PRAGMA synchronous=FULL; PRAGMA foreign_keys=OFF;")
            conn.register_fts5_function("scoped_bm25", scoped_bm25)
            self._local.conn = conn
            with self._lock:
                for thread in [t for t in self._connections if not t.is_alive()]:
                    with contextlib.suppress(Exception):  # a finished thread's connection
                        self._connections.pop(thread).close()
                self._connections[threading.current_thread()] = conn
        return conn

    @contextmanager
    def database_errors(self) -> Iterator[None]:
        """SQLite's "malformed" / "not a database" errors as one ``FolioError`` naming the database."""
        import apsw

        try:
            yield
        except (apsw.CorruptError, apsw.NotADBError) as exc:
            raise FolioError(str(self.path), DAMAGED.format(exc)) from None

    @contextmanager
    def _reading(self) -> Iterator[Any]:
        """A connection inside one read transaction (a consistent snapshot)."""
        conn = self._conn()
        if conn.in_transaction:
            yield conn
            return
        with self.database_errors():
            conn.execute("BEGIN")
            try:
                yield conn
            finally:
                conn.execute("COMMIT")

    def close(self) -> None:
        """Close every connection and drop the HNSW view (idempotent; a later query opens anew)."""
        with self._lock:
            for conn in self._connections.values():
                with contextlib.suppress(Exception):  # a finished thread's connection may be gone
                    conn.close()
            self._connections.clear()
            self._local = threading.local()
            self._views.clear()
            self._vector_cache.clear()
            self._cache_bytes = 0
            self._by_generation.clear()

    # --- meta --------------------------------------------------------------------------------------
    @staticmethod
    def _meta(conn: Any) -> dict[str, str]:
        return dict(conn.execute("SELECT key, value FROM meta"))

    @staticmethod
    def _generation(conn: Any) -> int:
        """The generation the connection's snapshot holds."""
        return int(conn.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()[0])

    def generation(self) -> int:
        with self._reading() as conn:
            return self._generation(conn)

    def _cached(self, conn: Any, name: str, make: Callable[[Any], Any]) -> Any:
        """``make(conn)`` computed once per generation."""
        generation = self._generation(conn)
        with self._lock:
            held = self._by_generation.get(name)
            if held is not None and held[0] == generation:
                return held[1]
        value = make(conn)
        with self._lock:
            self._by_generation[name] = (generation, value)
        return value

    def vectors_path(self, generation: int) -> Path:
        return self.directory / f"vectors-{generation}.usearch"

    # --- books ---------------------------------------------------------------------------------
    def _books(self) -> tuple[tuple[dict[str, Any], ...], tuple[tuple[str, str], ...]]:
        """``(readable descriptors sorted by title then id, (book id, problem) of the damaged ones)``,
        cached per generation."""

        def make(conn: Any) -> tuple[tuple[dict[str, Any], ...], tuple[tuple[str, str], ...]]:
            rows, damaged = [], []
            for book_id, raw in conn.execute("SELECT book_id, descriptor FROM books ORDER BY book_id"):
                problem = descriptor_problem(book_id, raw)
                if problem is None:
                    rows.append(json.loads(raw))
                else:
                    damaged.append((book_id, problem))
            ordered = tuple(sorted(rows, key=lambda b: (b["title"].lower(), b["book_id"])))
            return ordered, tuple(damaged)

        with self._reading() as conn:
            return self._cached(conn, "books", make)

    def descriptors(self) -> tuple[dict[str, Any], ...]:
        """Every readable book's descriptor, sorted by title then id (cached per generation); a book
        whose descriptor is damaged is left out (``damaged_books``), never failing the others."""
        return self._books()[0]

    def damaged_books(self) -> tuple[tuple[str, str], ...]:
        """``(book id, problem)`` of the books whose stored descriptor cannot be read."""
        return self._books()[1]

    def book_counts(self) -> dict[str, tuple[int, int, int]]:
        """Per book id: ``(chunks, windows, windows whose vector is not the library's size)``."""
        with self._reading() as conn:
            ndim = int(self._meta(conn).get("ndim") or 0)
            counts = {
                b: [n, 0, 0] for b, n in conn.execute("SELECT book_id, count(*) FROM chunks GROUP BY 1")
            }
            for book_id, n, bad in conn.execute(
                "SELECT book_id, count(*), sum(length(vector) != ?) FROM windows GROUP BY 1", (4 * ndim,)
            ):
                counts.setdefault(book_id, [0, 0, 0])[1:] = [n, int(bad or 0) if ndim else 0]
            for (book_id,) in conn.execute("SELECT book_id FROM books"):
                counts.setdefault(book_id, [0, 0, 0])
        return {b: (c[0], c[1], c[2]) for b, c in counts.items()}

    def rebuild_lexical(self) -> None:
        """Rebuild the FTS5 index from the chunks (a damaged lexical index)."""
        with self.database_errors():
            self._conn().execute("INSERT INTO chunks_fts(chunks_fts) VALUES ('rebuild')")

    def concept_map(self, book_id: str) -> bytes | None:
        with self._reading() as conn:
            row = conn.execute("SELECT concept_map FROM books WHERE book_id = ?", (book_id,)).fetchone()
        return bytes(row[0]) if row and row[0] is not None else None

    def settings(self) -> dict[str, str]:
        with self._reading() as conn:
            return self._meta(conn)

    # --- reading chunks ----------------------------------------------------------------------------
    def chunks_by_rowid(self, conn: Any, rowids: Sequence[int]) -> dict[int, tuple]:
        if not rowids:
            return {}
        where, params = sql_in("c.rowid", list(rowids))
        return {
            row[0]: row for row in conn.execute(f"SELECT {CHUNK_COLUMNS} FROM chunks c WHERE {where}", params)
        }

    def chunk(self, book_id: str, chunk_id: str) -> Hit:
        with self._reading() as conn:
            rows = list(
                conn.execute(
                    f"SELECT {CHUNK_COLUMNS} FROM chunks c WHERE c.book_id = ? AND c.chunk_id = ?",
                    (book_id, chunk_id),
                )
            )
        if not rows:
            raise FolioError(book_id, f"no chunk {chunk_id!r}")
        return row_hit(rows[0], 0.0)

    def chunks_in(self, book_id: str, chapter_ids: Collection[str] | None = None) -> list[Hit]:
        """All chunks of the book (of the given chapters), in reading order."""
        scope, params = sql_scope(None, chapter_ids)
        sql = f"SELECT {CHUNK_COLUMNS} FROM chunks c WHERE c.book_id = ?{scope} ORDER BY c.ordinal"
        with self._reading() as conn:
            return [row_hit(row, 0.0) for row in conn.execute(sql, [book_id, *params])]

    def chapter_text(self, book_id: str, chapter_id: str) -> str:
        with self._reading() as conn:
            row = conn.execute(
                "SELECT text FROM chapters WHERE book_id = ? AND chapter_id = ?", (book_id, chapter_id)
            ).fetchone()
        if row is None:
            raise FolioError(book_id, f"no chapter {chapter_id!r}")
        return str(row[0])

    def chunk_rows(self, book_id: str) -> list[tuple]:
        """``(chunk_id, chapter_id, ordinal, start, end, n_tokens)`` of the book's chunks (no text)."""
        sql = (
            "SELECT chunk_id, chapter_id, ordinal, start, end, n_tokens FROM chunks "
            "WHERE book_id = ? ORDER BY ordinal"
        )
        with self._reading() as conn:
            return [tuple(r) for r in conn.execute(sql, (book_id,))]

    def window_spans(self, book_id: str) -> list[tuple[str, int, int]]:
        """``(chapter_id, start, end)`` of the book's windows, in window order."""
        sql = (
            "SELECT c.chapter_id, w.start, w.end FROM windows w JOIN chunks c ON c.rowid = w.chunk_rowid "
            "WHERE w.book_id = ? ORDER BY w.key"
        )
        with self._reading() as conn:
            return [tuple(r) for r in conn.execute(sql, (book_id,))]

    def window_vectors(self, book_id: str) -> tuple[tuple[str, ...], np.ndarray]:
        """``(chunk id of each window, float32 vectors)`` of the book, in window order."""
        with self._reading() as conn:
            rows = list(
                conn.execute(
                    "SELECT c.chunk_id, w.vector FROM windows w JOIN chunks c ON c.rowid = w.chunk_rowid "
                    "WHERE w.book_id = ? ORDER BY w.key",
                    (book_id,),
                )
            )
        if not rows:
            return (), np.zeros((0, 0), dtype=np.float32)
        return tuple(r[0] for r in rows), vector_matrix([r[1] for r in rows])

    # --- semantic ----------------------------------------------------------------------------------
    def _segments(self, conn: Any) -> tuple[Segment, ...]:
        """The vector segments of the connection's snapshot, oldest first (cached per generation). A
        library written before segments has one: ``vectors-<generation>.usearch`` over every window."""

        def make(c: Any) -> tuple[Segment, ...]:
            import apsw

            try:
                rows = list(c.execute("SELECT generation, lo, hi, size, live FROM segments ORDER BY lo"))
            except apsw.SQLError:  # no segments table: a read-only library of the earlier layout
                rows = []
            if rows:
                return tuple(Segment(*r) for r in rows)
            windows = int(c.execute("SELECT count(*) FROM windows").fetchone()[0])
            if not windows:
                return ()
            top = int(self._meta(c).get("next_window", 1)) - 1
            return (Segment(self._generation(c), 0, max(top, 0), windows, windows),)

        segments: tuple[Segment, ...] = self._cached(conn, "segments", make)
        return segments

    def _view(self, generation: int) -> Any:
        """The memory-mapped HNSW segment written by ``generation`` (None when its file is missing)."""
        with self._lock:
            if generation in self._views:
                return self._views[generation]
            path = self.vectors_path(generation)
            if not path.exists():
                return None
            Index = usearch_index()
            try:
                view = Index.restore(str(path), view=True)
            except Exception as exc:
                raise FolioError(
                    str(path), f"damaged vector index ({exc}); reopen the library to rebuild it"
                ) from None
            if view is None:
                raise FolioError(str(path), "damaged vector index; reopen the library to rebuild it")
            # usearch's stubs declare expansion_search read-only; the property has a setter at run time
            view.expansion_search = EXPANSION_SEARCH  # type: ignore[misc]
            self._views[generation] = view
            return view

    def segment_files(self) -> list[Path]:
        """The vectors files of the current generation's segments, oldest first."""
        with self._reading() as conn:
            return [self.vectors_path(seg.generation) for seg in self._segments(conn)]

    def remove_stale_vectors(self) -> None:
        """Delete vectors files (and unfinished temporaries) no segment of the current generation names."""
        keep = {p.name for p in self.segment_files()}
        for path in self.directory.glob("vectors-*.usearch*"):
            if path.name not in keep:
                path.unlink(missing_ok=True)

    def damaged_vectors(self) -> Path | None:
        """The first vectors file the library needs that is missing, damaged or not the size its segment
        records (or the current generation's file when windows have no segment); None when whole. A
        generation that a writer replaced while this looked is looked at again (its file may already be
        gone), so a reader never mistakes a commit for damage."""
        for _attempt in range(5):
            generation = self.generation()
            damaged = self._damaged_vectors_once()
            if damaged is None or self.generation() == generation:
                return damaged
        return None  # a writer keeps committing: it leaves each generation whole

    def _damaged_vectors_once(self) -> Path | None:
        with self._reading() as conn:
            segments = self._segments(conn)
            if not segments:
                has = conn.execute("SELECT EXISTS(SELECT 1 FROM windows)").fetchone()[0]
                return self.vectors_path(self._generation(conn)) if has else None
        for seg in segments:
            try:
                view = self._view(seg.generation)
            except FolioError:
                return self.vectors_path(seg.generation)
            if view is None or len(view) != seg.size:
                return self.vectors_path(seg.generation)
        return None

    def vectors_missing(self) -> bool:
        """The library has windows but a vectors file it needs is missing, damaged or incomplete."""
        return self.damaged_vectors() is not None
