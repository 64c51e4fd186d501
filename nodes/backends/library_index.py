"""The library-wide indexes: one SQLite database and a few usearch HNSW segments over every book.

Files in the library directory::

    library.sqlite          (WAL) meta, books (descriptor + concept map), chapters, chunks, chunks_fts
                            (FTS5, external content, porter unicode61 remove_diacritics 2), windows
                            (window key -> chunk, with the window's float32 vector), segments (the
                            vectors files of the current generation, ``nodes.backends.vector_segments``)
    vectors-<G>.usearch     an HNSW segment written by generation G, never changed after; keys = window
                            keys (a run of them)

A query is one index lookup whatever the number of books: lexical search is one FTS5 statement with
library-wide term statistics, filtered by book and chapter columns; semantic search asks each HNSW segment
for candidates and re-scores their union exactly from the stored float32 vectors (so a quantised index
costs little quality), or, for a scope of some books or chapters, an exact scan of that scope's
vectors (cached per book, bounded). Hits carry their book and chapter.

Writes (``commit``) add and remove whole books in one SQLite transaction (``BEGIN IMMEDIATE``,
``synchronous=FULL``); the new windows go to a new segment file (with the newest segments the merge
policy folds in), written and fsynced before that transaction commits, and the transaction records
the new generation and its list of segments: a crash at any step leaves the old library or the new
one. A removed book's windows stay in their segment as dead keys until a fold or ``compact``.
``recover`` removes a vectors file no segment names and rebuilds one segment of every window when a
file is missing or damaged. Keys of chunks and windows are never reused.

Resources: one connection per process and thread, opened lazily and closed by ``close`` (SQLite's
default page cache, about 2 MB per connection); one memory-mapped view per segment per process (one
file descriptor each, at most ``MAX_SEGMENTS``); opening reads no per-book state (the descriptors are
read on first use, cached per generation); nothing is left to the garbage collector.

Limitations: the HNSW settings (connectivity, expansion, scalar kind) and the embedding model are
fixed by the library's first book with vectors; a book embedded by another model is refused (ingest
it into another library). A commit that folds segments rebuilds their HNSW from the stored vectors
(about 4 builds per window over its life; a fold stays under ``INLINE_MERGE_WINDOWS`` windows while the
library holds at most ``MAX_SEGMENTS`` files). A library this process may not write is read without
its write-ahead log when the log is empty or absent (SQLite's ``immutable``): a writer of another user
committing at the same time is not seen.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from folio.nodes.backends.vector_segments import (
    Segment,
    after_removal,
    build_index,
    merge_plan,
    save_index,
    search_breadths,
    window_batches,
)
from folio.nodes.backends.vector_segments import usearch_index as usearch_index  # callers import it here
from folio.nodes.core.text import (
    fts_match_expression,
    fts_phrase_expression,
    fts_phrases,
    fts_shingles,
    fts_tokens,
)
from folio.nodes.core.types import FolioError, Hit

FORMAT_VERSION = 2
DATABASE = "library.sqlite"
PHRASE_BONUS = 1.0  # a verbatim phrase of the query: + the best bm25 score of the query in scope
SHINGLE_BONUS = 0.5  # all of the query's 3-word runs held: + this share of the best score
BM25_K1, BM25_B = 1.2, 0.75  # FTS5's built-in bm25 parameters, kept by the scoped variant
STATS_CACHE = 256  # scopes whose term-statistics base (chunks, mean length) is kept per generation
EXPANSION_SEARCH = 128  # HNSW search breadth: final top-10 agreement with exact 0.948 at 64, 0.983 here
EXACT_MAX_WINDOWS = 50_000  # a scope up to this many windows is scored exactly, a larger one by the HNSW
VECTOR_CACHE_BYTES = 256 * 2**20  # per-book vectors kept for scoped searches (LRU)
DTYPES = ("f32", "f16", "i8")

SCHEMA = """
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
    text, content='chunks', content_rowid='rowid', tokenize='porter unicode61 remove_diacritics 2');
"""

_CHUNK_COLUMNS = (
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


def checkpoint(step: str) -> None:
    """A named step of a write (``commit``); does nothing. Crash tests replace it to kill the process
    at that step."""


@dataclass(frozen=True)
class StagedRows:
    """One book to write: its staged directory (``book.sqlite`` with chapters, chunks and windows;
    ``vectors.npy``), its descriptor and its concept map (JSON bytes, or None)."""

    book_id: str
    directory: str
    descriptor: dict[str, Any]
    concept_map: bytes | None


@dataclass(frozen=True)
class VectorSettings:
    """The library HNSW's settings (fixed by its first book with vectors)."""

    connectivity: int = 16
    expansion_add: int = 128
    dtype: str = "i8"


def _in(column: str, values: Collection[str] | Collection[int]) -> tuple[str, list[object]]:
    return f"{column} IN ({','.join('?' * len(values))})", list(values)


def _scope(book_ids: Collection[str] | None, chapter_ids: Collection[str] | None) -> tuple[str, list[object]]:
    """`` AND ...`` restricting chunk alias ``c`` to the books and chapters (None: no restriction)."""
    sql, params = "", []
    for column, values in (("c.book_id", book_ids), ("c.chapter_id", chapter_ids)):
        if values is not None:
            clause, ps = _in(column, sorted(set(values)))
            sql += f" AND {clause}"
            params.extend(ps)
    return sql, params


def _hit(row: Sequence[Any], score: float) -> Hit:
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


def best_per_chunk(rowids: np.ndarray, sims: np.ndarray, k: int) -> list[tuple[int, float]]:
    """The ``k`` chunks with the best window similarity, as ``(chunk rowid, similarity)``."""
    best: dict[int, float] = {}
    for rowid, sim in zip(rowids.tolist(), sims.tolist(), strict=True):
        if sim > best.get(rowid, -2.0):
            best[rowid] = sim
    return sorted(best.items(), key=lambda kv: (-kv[1], kv[0]))[:k]


def _varint(blob: bytes) -> int:
    """SQLite's variable-length integer at the start of ``blob`` (FTS5 ``docsize`` rows)."""
    value = 0
    for i, byte in enumerate(blob[:9]):
        if i == 8:
            return (value << 8) | byte
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            break
    return value


def bm25_idf(rows: int, hits: int) -> float:
    """FTS5's bm25 idf of a phrase found in ``hits`` of ``rows`` rows (never below 1e-6)."""
    idf = math.log((rows - hits + 0.5) / (hits + 0.5))
    return idf if idf > 0 else 1e-6


def _scoped_bm25(api: Any, avgdl: Any, *idfs: Any) -> float:
    """FTS5 auxiliary function: bm25 (positive: higher is better) with the given mean row length and
    per-phrase idfs, so that a search of some books ranks by those books' statistics."""
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
    wanted = {"meta", "books", "chapters", "chunks", "windows", "segments", "chunks_fts"}
    keys = {row[0] for row in conn.execute("SELECT key FROM meta")}
    mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
    return (
        wanted <= tables
        and {"format_version", "generation", "next_chunk", "next_window"} <= keys
        and (str(mode).lower() == "wal")
    )


class LibraryIndex:
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
                conn.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(Exception):
                    conn.execute("ROLLBACK")
                raise

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
            conn.register_fts5_function("scoped_bm25", _scoped_bm25)  # type: ignore[arg-type]
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
        where, params = _in("c.rowid", list(rowids))
        return {
            row[0]: row
            for row in conn.execute(f"SELECT {_CHUNK_COLUMNS} FROM chunks c WHERE {where}", params)
        }

    def chunk(self, book_id: str, chunk_id: str) -> Hit:
        with self._reading() as conn:
            rows = list(
                conn.execute(
                    f"SELECT {_CHUNK_COLUMNS} FROM chunks c WHERE c.book_id = ? AND c.chunk_id = ?",
                    (book_id, chunk_id),
                )
            )
        if not rows:
            raise FolioError(book_id, f"no chunk {chunk_id!r}")
        return _hit(rows[0], 0.0)

    def chunks_in(self, book_id: str, chapter_ids: Collection[str] | None = None) -> list[Hit]:
        """All chunks of the book (of the given chapters), in reading order."""
        scope, params = _scope(None, chapter_ids)
        sql = f"SELECT {_CHUNK_COLUMNS} FROM chunks c WHERE c.book_id = ?{scope} ORDER BY c.ordinal"
        with self._reading() as conn:
            return [_hit(row, 0.0) for row in conn.execute(sql, [book_id, *params])]

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

    # --- lexical -----------------------------------------------------------------------------------
    @staticmethod
    def _per_expression(
        conn: Any, wrap: str, expressions: Sequence[str], scope: tuple[str, list[object]]
    ) -> tuple:
        """One value per expression, in one statement: ``wrap`` filled with ``FROM chunks_fts ... WHERE
        chunks_fts MATCH ?`` over the chunks in scope (``EXISTS(SELECT 1 {})``, ``(SELECT count(*) {})``)."""
        where, params = scope
        join = " JOIN chunks c ON c.rowid = chunks_fts.rowid" if where else ""
        one = wrap.format(f"FROM chunks_fts{join} WHERE chunks_fts MATCH ?{where}")
        return conn.execute(
            "SELECT " + ", ".join([one] * len(expressions)), [p for e in expressions for p in (e, *params)]
        ).fetchone()

    def _present(self, conn: Any, expressions: Sequence[str], scope: tuple[str, list[object]]) -> list[str]:
        """The MATCH expressions that match some chunk in scope (one statement)."""
        if not expressions:
            return []
        flags = self._per_expression(conn, "EXISTS(SELECT 1 {})", expressions, scope)
        return [e for e, flag in zip(expressions, flags, strict=True) if flag]

    def _scope_stats(self, conn: Any, scope: tuple[str, list[object]]) -> tuple[int, float]:
        """``(chunks, mean FTS5 tokens per chunk)`` in scope (cached per generation and scope)."""
        key = "stats:" + scope[0] + repr(scope[1])

        def make(c: Any) -> tuple[int, float]:
            sizes = [
                _varint(bytes(sz))
                for (sz,) in c.execute(
                    "SELECT d.sz FROM chunks_fts_docsize d JOIN chunks c ON c.rowid = d.id "
                    f"WHERE 1{scope[0]}",
                    scope[1],
                )
            ]
            return len(sizes), (sum(sizes) / len(sizes) if sizes else 1.0)

        value: tuple[int, float] = self._cached(conn, key, make)
        with self._lock:
            stats = [k for k in self._by_generation if k.startswith("stats:")]
            for old in stats[: max(0, len(stats) - STATS_CACHE)]:
                del self._by_generation[old]
        return value

    def _bm25_sql(
        self, conn: Any, terms: Sequence[str], scope: tuple[str, list[object]]
    ) -> tuple[str, list[object], int]:
        """The bm25 expression for the query's terms and its parameters, and the number of chunks in
        scope: FTS5's own bm25 for the whole library, else the same formula over the scope's statistics
        (chunks, mean length, each term's chunks in scope), so a book searched alone ranks as if indexed
        alone and books searched together share one set of statistics."""
        if not scope[0]:
            count = self._cached(
                conn, "chunk_count", lambda c: int(c.execute("SELECT count(*) FROM chunks").fetchone()[0])
            )
            return "-bm25(chunks_fts)", [], count
        rows, avgdl = self._scope_stats(conn, scope)
        hits = self._per_expression(conn, "(SELECT count(*) {})", terms, scope)
        idfs = [bm25_idf(rows, int(h)) for h in hits]
        return f"scoped_bm25(chunks_fts, ?{', ?' * len(idfs)})", [avgdl, *idfs], rows

    def lexical(
        self,
        query: str,
        k: int = 10,
        book_ids: Collection[str] | None = None,
        chapter_ids: Collection[str] | None = None,
        per_book: bool = False,
    ) -> list[Hit]:
        """bm25-ranked chunks with phrase and proximity bonuses, in one statement; any query string is
        safe (no FTS5 syntax errors). ``per_book``: at most ``k`` hits of each book.

        A chunk's score is its bm25 over the query's content words (the statistics of the books searched,
        whatever chapters are kept: FTS5's own for the whole library, ``_bm25_sql``) plus,
        in units of the best ``-bm25`` in scope, ``PHRASE_BONUS`` when it holds one of
        ``fts_phrases(query)`` verbatim and ``SHINGLE_BONUS`` times the share of ``fts_shingles(query)``
        it holds: a chunk holding the line typed ranks above every chunk that only repeats its words.
        """
        expression = fts_match_expression(query)
        if expression is None or k <= 0 or (book_ids is not None and not book_ids):
            return []
        if chapter_ids is not None and not chapter_ids:
            return []
        scope = _scope(book_ids, chapter_ids)
        books = _scope(book_ids, None)  # statistics and bonus runs: the books' (chapters only filter)
        with self._reading() as conn:
            bonuses: list[tuple[str, float]] = []
            phrase = fts_phrase_expression(fts_phrases(query))
            if phrase is not None:
                bonuses.append((phrase, PHRASE_BONUS))
            shingles = self._present(
                conn, [fts_phrase_expression((s,)) or "" for s in fts_shingles(query)], books
            )
            bonuses.extend((s, SHINGLE_BONUS / len(shingles)) for s in shingles)
            bonus_sql = " + ".join(
                f"{weight!r} * (b.r IN (SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ?))"
                for _, weight in bonuses
            )
            bm25, bm25_params, rows = self._bm25_sql(conn, expression.split(" OR "), books)
            join = " JOIN chunks c ON c.rowid = chunks_fts.rowid" if scope[0] else ""
            head = (
                f"WITH b AS MATERIALIZED (SELECT chunks_fts.rowid AS r, {bm25} AS s FROM chunks_fts{join} "
                f"WHERE chunks_fts MATCH ?{scope[0]}), "
                "top AS (SELECT max(max(s), ?) AS best FROM b), "
                f"scored AS (SELECT b.r AS r, b.s + top.best * ({bonus_sql or '0'}) AS score "
                "FROM b JOIN top)"
            )
            if per_book:  # at most k of each book
                sql = (
                    f"{head}, ranked AS (SELECT scored.r AS r, scored.score AS score, ROW_NUMBER() OVER "
                    "(PARTITION BY c.book_id ORDER BY scored.score DESC, c.rowid) AS n "
                    "FROM scored JOIN chunks c ON c.rowid = scored.r) "
                    f"SELECT {_CHUNK_COLUMNS}, ranked.score FROM ranked JOIN chunks c ON c.rowid = ranked.r "
                    "WHERE ranked.n <= ? ORDER BY ranked.score DESC, c.rowid"
                )
            else:
                sql = (
                    f"{head}, best AS (SELECT r, score FROM scored ORDER BY score DESC, r LIMIT ?) "
                    f"SELECT {_CHUNK_COLUMNS}, best.score FROM best JOIN chunks c ON c.rowid = best.r "
                    "ORDER BY best.score DESC, c.rowid"
                )
            rare = math.log(max(rows - 0.5, 1.5) / 1.5)  # idf of a word in one chunk: the least bonus
            params: list[object] = [*bm25_params, expression, *scope[1], rare]
            params.extend(e for e, _ in bonuses)
            params.append(int(k))
            return [_hit(row, row[8]) for row in conn.execute(sql, params)]

    def books_holding(self, text: str, book_ids: Collection[str] | None = None) -> frozenset[str]:
        """The books (of ``book_ids``) some chunk of which holds the words of ``text`` in this order."""
        expression = fts_phrase_expression((tuple(fts_tokens(text)),))
        if expression is None:
            return frozenset()
        where, params = _scope(book_ids, None)
        sql = (
            "SELECT DISTINCT c.book_id FROM chunks_fts JOIN chunks c ON c.rowid = chunks_fts.rowid "
            f"WHERE chunks_fts MATCH ?{where}"
        )
        with self._reading() as conn:
            return frozenset(r[0] for r in conn.execute(sql, [expression, *params]))

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
            view.expansion_search = EXPANSION_SEARCH  # type: ignore[misc]  # a setter at run time
            self._views[generation] = view
            return view

    def _segment_views(self, segments: Sequence[Segment]) -> list[Any] | None:
        """The views of ``segments`` (None when a file is missing); views of other segments are dropped
        (their files closed), so the open files follow the library's segments."""
        with self._lock:
            wanted = {s.generation for s in segments}
            for old in [g for g in self._views if g not in wanted]:
                del self._views[old]
        views = [self._view(s.generation) for s in segments]
        return None if any(v is None for v in views) else views

    def _book_vectors(
        self, conn: Any, generation: int, book_id: str
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(chunk rowids, chapter ids, vectors)`` of the book's windows (LRU cache, bounded bytes)."""
        key = (generation, book_id)
        with self._lock:
            if key in self._vector_cache:
                self._vector_cache.move_to_end(key)
                return self._vector_cache[key]
        rows = list(
            conn.execute(
                "SELECT w.chunk_rowid, c.chapter_id, w.vector FROM windows w JOIN chunks c "
                "ON c.rowid = w.chunk_rowid WHERE w.book_id = ? ORDER BY w.key",
                (book_id,),
            )
        )
        rowids = np.array([r[0] for r in rows], dtype=np.int64)
        chapters = np.array([r[1] for r in rows], dtype=object)
        matrix = vector_matrix([r[2] for r in rows]) if rows else np.zeros((0, 1), dtype=np.float32)
        value = (rowids, chapters, matrix)
        with self._lock:
            self._vector_cache[key] = value
            self._cache_bytes += matrix.nbytes
            while self._cache_bytes > VECTOR_CACHE_BYTES and len(self._vector_cache) > 1:
                _, (_, _, old) = self._vector_cache.popitem(last=False)
                self._cache_bytes -= old.nbytes
        return value

    def _scope_windows(self, conn: Any, book_ids: Collection[str] | None) -> int:
        if book_ids is None:
            return self._cached(
                conn, "window_count", lambda c: int(c.execute("SELECT count(*) FROM windows").fetchone()[0])
            )
        where, params = _in("book_id", sorted(set(book_ids)))
        return int(conn.execute(f"SELECT count(*) FROM windows WHERE {where}", params).fetchone()[0])

    def _exact(
        self,
        conn: Any,
        generation: int,
        q: np.ndarray,
        k: int,
        book_ids: Collection[str],
        chapter_ids: Collection[str] | None,
    ) -> list[tuple[int, float]]:
        rowids, sims = [], []
        allowed = set(chapter_ids) if chapter_ids is not None else None
        for book_id in sorted(set(book_ids)):
            ids, chapters, matrix = self._book_vectors(conn, generation, book_id)
            if not len(ids):
                continue
            mask = np.ones(len(ids), dtype=bool) if allowed is None else np.isin(chapters, list(allowed))
            rowids.append(ids[mask])
            sims.append(np.asarray(matrix[mask] @ q, dtype=np.float64))
        if not rowids:
            return []
        return best_per_chunk(np.concatenate(rowids), np.concatenate(sims), k)

    def _approximate(
        self,
        conn: Any,
        views: Sequence[tuple[Segment, Any]],
        q: np.ndarray,
        k: int,
        count: int,
        book_ids: Collection[str] | None,
        chapter_ids: Collection[str] | None,
    ) -> list[tuple[int, float]]:
        """Every segment's HNSW candidates (``count`` live ones each), re-scored exactly from their stored
        vectors, kept when in scope: the merge across segments is exact."""
        keys: list[int] = []
        breadths = search_breadths([s for s, _ in views], count)
        for (_, view), breadth in zip(views, breadths, strict=True):
            matches = view.search(q, min(breadth, len(view)), threads=1)  # one query: no thread pool
            keys.extend(int(x) for x in np.asarray(matches.keys).ravel().tolist())
        if not keys:
            return []
        where, params = _in("w.key", keys)
        scope, scope_params = _scope(book_ids, chapter_ids)
        rows = list(
            conn.execute(
                f"SELECT w.chunk_rowid, w.vector FROM windows w JOIN chunks c ON c.rowid = w.chunk_rowid "
                f"WHERE {where}{scope}",
                [*params, *scope_params],
            )
        )
        if not rows:
            return []
        matrix = vector_matrix([r[1] for r in rows])
        return best_per_chunk(
            np.array([r[0] for r in rows], dtype=np.int64), np.asarray(matrix @ q, dtype=np.float64), k
        )

    def semantic(
        self,
        query_vector: np.ndarray,
        k: int = 10,
        book_ids: Collection[str] | None = None,
        chapter_ids: Collection[str] | None = None,
    ) -> list[Hit]:
        """Chunks ranked by the cosine similarity of their best window to the query vector (exact
        float32 scores): the whole library through the HNSW, a scope of books or chapters exactly."""
        if k <= 0 or (book_ids is not None and not book_ids) or (chapter_ids is not None and not chapter_ids):
            return []
        q = np.asarray(query_vector, dtype=np.float32).ravel()
        for attempt in range(2):
            stale = False
            with self._reading() as conn:
                generation = self._generation(conn)
                segments = self._segments(conn)
                total = sum(s.live for s in segments)
                if total == 0:
                    return []
                if book_ids is None and chapter_ids is not None:  # chapters of any book: theirs, exactly
                    where, params = _in("chapter_id", sorted(set(chapter_ids)))
                    book_ids = [
                        r[0]
                        for r in conn.execute(f"SELECT DISTINCT book_id FROM chapters WHERE {where}", params)
                    ]
                    if not book_ids:
                        return []
                scoped = self._scope_windows(conn, book_ids) if book_ids is not None else total
                if book_ids is not None and (chapter_ids is not None or scoped <= EXACT_MAX_WINDOWS):
                    top = self._exact(conn, generation, q, k, book_ids, chapter_ids)
                else:
                    views = self._segment_views(segments)
                    if views is None:
                        stale = True  # a writer removed a file between our reads, or it is missing
                    else:
                        want = int(max(4 * k, k + 16) * max(1.0, total / max(scoped, 1)))
                        pairs = list(zip(segments, views, strict=True))
                        top = self._approximate(conn, pairs, q, k, want, book_ids, chapter_ids)
                        if book_ids is not None and len(top) < k:
                            top = self._exact(conn, generation, q, k, book_ids, chapter_ids)
                if not stale:
                    rows = self.chunks_by_rowid(conn, [r for r, _ in top])
                    return [_hit(rows[r], s) for r, s in top if r in rows]
            if attempt == 0 and self.generation() != generation:
                continue
            break
        raise FolioError(
            str(self.damaged_vectors() or self.vectors_path(generation)),
            "the vector index is missing; reopen the library to rebuild it",
        )

    # --- writing -----------------------------------------------------------------------------------
    def _staged(self, book: StagedRows) -> tuple[list[tuple], list[tuple], list[tuple], np.ndarray]:
        """Chapters, chunks and windows rows of a staged ``book.sqlite``, and its vectors."""
        import apsw

        directory = Path(book.directory)
        try:
            conn = apsw.Connection(str(directory / "book.sqlite"), flags=apsw.SQLITE_OPEN_READONLY)
        except apsw.Error as exc:
            raise FolioError(
                book.book_id, f"staged book is unreadable ({exc}); nothing was changed"
            ) from None
        try:
            chapters = list(conn.execute("SELECT chapter_id, ord, title, text FROM chapters ORDER BY ord"))
            chunks = list(
                conn.execute(
                    "SELECT rowid, chunk_id, chapter_id, ordinal, start, end, n_tokens, text FROM chunks "
                    "ORDER BY rowid"
                )
            )
            windows = list(
                conn.execute("SELECT window_id, chunk_rowid, start, end FROM windows ORDER BY window_id")
            )
        except apsw.Error as exc:
            raise FolioError(
                book.book_id, f"staged book is unreadable ({exc}); nothing was changed"
            ) from None
        finally:
            conn.close()
        if windows:
            vectors = np.load(directory / "vectors.npy", mmap_mode="r")
            if len(vectors) < len(windows):
                raise FolioError(
                    book.book_id, "staged vectors are fewer than its windows; nothing was changed"
                )
        else:
            vectors = np.zeros((0, 0), dtype=np.float32)
        return chapters, chunks, windows, vectors

    def _settings_for(
        self, meta: dict[str, str], books: Sequence[StagedRows], settings: VectorSettings
    ) -> dict[str, str]:
        """The library's model and HNSW settings; a book from another model or size is refused."""
        out: dict[str, str] = {
            k: meta[k]
            for k in ("embedding_model", "ndim", "connectivity", "expansion_add", "dtype")
            if k in meta
        }
        for book in books:
            model = str(book.descriptor.get("embedding_model", ""))
            if "embedding_model" in out and out["embedding_model"] != model:
                raise FolioError(
                    book.descriptor.get("source_file") or book.book_id,
                    f"embedded with {model}, but this library holds books embedded with "
                    f"{out['embedding_model']}: "
                    "ingest it into another library (--library) or re-ingest every book with one model",
                )
            out.setdefault("embedding_model", model)
        out.setdefault("connectivity", str(settings.connectivity))
        out.setdefault("expansion_add", str(settings.expansion_add))
        out.setdefault("dtype", settings.dtype)
        return out

    def _write_segments(
        self,
        conn: Any,
        generation: int,
        segments: Sequence[Segment],
        removed: Sequence[int],
        new: tuple[int, int],
        settings: dict[str, str],
    ) -> Path | None:
        """Inside the commit's transaction: the segments of ``generation``: ``segments`` less the
        ``removed`` keys, and the windows of keys ``new`` (first, last) written with the newest segments
        the merge policy folds to ``vectors-<generation>.usearch``; records
        them in the ``segments`` table. Returns the file written (None when only rows changed)."""
        kept = after_removal(segments, removed)
        fresh = max(0, new[1] - new[0] + 1)
        fold = merge_plan([s.live for s in kept], fresh) if fresh else 0  # a removal writes no file
        written = None
        if fresh or fold:
            folded = kept[len(kept) - fold :]
            kept = kept[: len(kept) - fold]
            lo = folded[0].lo if folded else new[0]
            hi = max(new[1], folded[-1].hi if folded else new[1])
            index, size = build_index(settings, window_batches(conn, lo, hi))
            if size:
                written = self.vectors_path(generation)
                checkpoint("segment_built")
                save_index(index, written)
                kept.append(Segment(generation, lo, hi, size, size))
        conn.execute("DELETE FROM segments")
        conn.executemany(
            "INSERT INTO segments VALUES (?, ?, ?, ?, ?)",
            [(s.generation, s.lo, s.hi, s.size, s.live) for s in kept],
        )
        return written

    def commit(
        self,
        add: Sequence[StagedRows] = (),
        remove: Sequence[str] = (),
        settings: VectorSettings = VectorSettings(),
    ) -> None:
        """Replace the books of ``add`` (adding new ones) and drop the books of ``remove``, in one
        transaction with the next generation's HNSW; readers see the library before or after."""
        staged = [(book, *self._staged(book)) for book in add]
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        written: Path | None = None
        try:
            checkpoint("begin")
            meta = self._meta(conn)
            segments = self._segments(conn)
            generation = int(meta["generation"])
            lib = self._settings_for(meta, add, settings)
            affected = sorted({b.book_id for b in add} | set(remove))
            old_keys: list[int] = []
            if affected:
                where, params = _in("book_id", affected)
                old_keys = [r[0] for r in conn.execute(f"SELECT key FROM windows WHERE {where}", params)]
                conn.execute(
                    "INSERT INTO chunks_fts(chunks_fts, rowid, text) "
                    "SELECT 'delete', rowid, text FROM chunks "
                    f"WHERE {where}",
                    params,
                )
                for table in ("windows", "chunks", "chapters", "books"):
                    conn.execute(f"DELETE FROM {table} WHERE {where}", params)
            checkpoint("deleted")
            next_chunk, next_window = int(meta["next_chunk"]), int(meta["next_window"])
            for book, chapters, chunks, windows, vectors in staged:
                conn.executemany(
                    "INSERT INTO chapters VALUES (?, ?, ?, ?, ?)", [(book.book_id, *c) for c in chapters]
                )
                base = next_chunk - min((c[0] for c in chunks), default=0)
                conn.executemany(
                    "INSERT INTO chunks VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [(base + c[0], book.book_id, *c[1:]) for c in chunks],
                )
                conn.execute(
                    "INSERT INTO chunks_fts(rowid, text) SELECT rowid, text FROM chunks WHERE book_id = ?",
                    (book.book_id,),
                )
                next_chunk = base + max((c[0] for c in chunks), default=next_chunk - base - 1) + 1
                if windows:
                    matrix = np.ascontiguousarray(vectors[[w[0] for w in windows]], dtype=np.float32)
                    lib.setdefault("ndim", str(matrix.shape[1]))
                    if int(lib["ndim"]) != matrix.shape[1]:
                        raise FolioError(
                            book.book_id,
                            f"vectors of {matrix.shape[1]} dimensions, the library's have {lib['ndim']}",
                        )
                    keys = np.arange(next_window, next_window + len(windows), dtype=np.int64)
                    conn.executemany(
                        "INSERT INTO windows VALUES (?, ?, ?, ?, ?, ?)",
                        [
                            (int(key), book.book_id, base + w[1], w[2], w[3], matrix[i].tobytes())
                            for i, (key, w) in enumerate(zip(keys, windows, strict=True))
                        ],
                    )
                    next_window += len(windows)
                descriptor = json.dumps(book.descriptor, ensure_ascii=False)
                conn.execute(
                    "INSERT INTO books VALUES (?, ?, ?, ?)",
                    (book.book_id, str(book.descriptor.get("title", "")), descriptor, book.concept_map),
                )
            checkpoint("inserted")
            if "ndim" in lib:
                written = self._write_segments(
                    conn, generation + 1, segments, old_keys, (int(meta["next_window"]), next_window - 1), lib
                )
            checkpoint("vectors_written")
            updates = {
                **lib,
                "generation": str(generation + 1),
                "next_chunk": str(next_chunk),
                "next_window": str(next_window),
            }
            conn.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", list(updates.items()))
            conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(Exception):  # SQLite may have rolled back already (a full disk)
                conn.execute("ROLLBACK")
            if written is not None:
                written.unlink(missing_ok=True)
            raise
        checkpoint("committed")
        with contextlib.suppress(apsw_busy()):  # readers still in the log: the next commit truncates it
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the database file alone holds the library
        self.remove_stale_vectors()
        checkpoint("cleaned")

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

    def compact(self) -> int:
        """Fold every vector segment into one file (a new generation, one transaction, as ``commit``),
        then let FTS5 merge its own segments (``optimize``); returns the number of windows indexed. Also
        how a missing or damaged vectors file is rebuilt (``rebuild_vectors``)."""
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        written: Path | None = None
        try:
            meta = self._meta(conn)
            generation = int(meta["generation"])
            if "ndim" in meta:  # no segment kept: one new one over every key
                top = int(meta["next_window"]) - 1
                written = self._write_segments(conn, generation + 1, (), (), (1, top), meta)
            checkpoint("compacted")
            conn.execute("INSERT OR REPLACE INTO meta VALUES ('generation', ?)", (str(generation + 1),))
            conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(Exception):
                conn.execute("ROLLBACK")
            if written is not None:
                written.unlink(missing_ok=True)
            raise
        checkpoint("committed")
        with self._lock:
            self._views.clear()
        conn.execute("INSERT INTO chunks_fts(chunks_fts) VALUES ('optimize')")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        self.remove_stale_vectors()
        return sum(seg.live for seg in self.segments())

    def segments(self) -> tuple[Segment, ...]:
        """The current generation's vector segments, oldest first."""
        with self._reading() as conn:
            return self._segments(conn)

    def rebuild_vectors(self) -> int:
        """Write one vectors file of every stored window again (a missing or damaged file), as a new
        generation; returns the number of windows indexed."""
        with self._lock:
            self._views.clear()  # drop damaged views before their files are replaced
        return self.compact()

    def lexical_problem(self) -> str | None:
        """Why the FTS5 index does not match the chunks (its ``integrity-check``), or None."""
        import apsw

        try:
            self._conn().execute("INSERT INTO chunks_fts(chunks_fts, rank) VALUES ('integrity-check', 1)")
        except apsw.Error as exc:
            return str(exc)
        return None

    def check(self) -> list[str]:
        """Problems found (empty when whole): FTS5 integrity, counts against descriptors, the HNSW."""
        problems: list[str] = []
        lexical = self.lexical_problem()
        if lexical is not None:
            problems.append(f"lexical index: {lexical}")
        with self._reading() as conn:
            segments = self._segments(conn)
            for seg in segments:
                live = conn.execute(
                    "SELECT count(*) FROM windows WHERE key BETWEEN ? AND ?", (seg.lo, seg.hi)
                ).fetchone()[0]
                if live != seg.live:
                    path = self.vectors_path(seg.generation)
                    problems.append(f"{path}: {seg.live} live windows recorded, {live} stored")
            counts = dict(conn.execute("SELECT book_id, count(*) FROM chunks GROUP BY book_id"))
            windows = dict(conn.execute("SELECT book_id, count(*) FROM windows GROUP BY book_id"))
            for (descriptor,) in conn.execute("SELECT descriptor FROM books"):
                d = json.loads(descriptor)
                if (
                    counts.get(d["book_id"], 0) != d["n_chunks"]
                    or windows.get(d["book_id"], 0) != d["n_windows"]
                ):
                    problems.append(f"{d['book_id']}: chunks or windows do not match its descriptor")
            total = sum(windows.values())
        if total != sum(seg.live for seg in segments):
            problems.append(f"{self.directory}: the vector segments do not cover every window")
        damaged = self.damaged_vectors()
        if damaged is not None:
            problems.append(f"{damaged}: missing, damaged or incomplete")
        return problems
