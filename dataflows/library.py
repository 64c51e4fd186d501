"""The library directory: layout, the library-wide indexes, the DuckDB catalog, and book commits.

Layout (the library directory is the only state; delete it and nothing else remains)::

    LIBRARY/
      library.sqlite            every book: descriptor, concept map, chapters, chunks, FTS5, window vectors
      vectors-<G>.usearch       one HNSW over every window (generation G; see nodes.backends.library_index)
      catalog.duckdb            books (with authors, series, tags, identifiers, pubdate: JSON text for
                                lists), chapters, chunks (metadata only; rebuilt from library.sqlite)
      staging/                  books being written by ingest; never read by queries
      trash/                    a library's old per-book directories while they are upgraded
      cache/                    embeddings and Hamilton results (diskcache); summaries/summaries.db: chapter
                                summaries and synopses (nodes.backends.summary_store)
      .lock                     writer lock (one writer at a time per library)

Ingest writes a whole book into ``staging/`` (its rows, vectors, descriptor and concept map) and commits
it into the library-wide indexes in one transaction; ``recover()`` (run by every writer before it
starts) drops unfinished staging directories, vectors files no generation names, rebuilds a missing
HNSW from the stored vectors, and re-syncs the catalog, so a crash or a bad file at any point leaves
the library as it was before that book's ingest (or with the book whole). Stored summaries of a
book's chapters that changed (or of a removed book) are deleted after its commit and by ``recover()``
(``prune_library``); until then they are unreachable (keyed by the old chapter's content hash).

A library in the earlier per-book format (``books/<id>/book.sqlite``, ``vectors.usearch``, ...) is
upgraded in place the first time it is opened: its books are committed in batches (a progress bar on a
terminal) and each book directory is deleted only once its batch is committed; a book that cannot join
(another embedding model than the library's, a damaged store) is moved whole to ``not-upgraded/`` with
a one-line note.

Resources: one ``LibraryIndex`` per library directory per process (``shared_index``), with one SQLite
connection per thread and one memory-mapped HNSW; ``Library.close()`` releases them.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from folio.nodes.backends.book_store import BookStore
from folio.nodes.backends.library_index import DATABASE, LibraryIndex, StagedRows, VectorSettings
from folio.nodes.backends.progress import BarProgress, NullProgress, Progress
from folio.nodes.backends.summary_store import prune_library
from folio.nodes.core.types import ConceptMap, FolioError, StagedBook

UPGRADE_BATCH = 32  # books committed per transaction while upgrading a per-book library
MIN_PREFIX = 4  # the shortest id prefix `remove` takes
LISTED = 10  # matching ids named by a refused `remove`
UPGRADE_POLL_S = 0.2  # how often a reader looks whether another process has finished an upgrade

_INDEXES: dict[str, LibraryIndex] = {}
_INDEXES_LOCK = threading.Lock()
_CHECKED: set[str] = set()  # libraries whose format and vectors this process has checked
_VIEWS: dict[str, tuple[Any, dict[str, BookStore]]] = {}  # per library: (descriptors, views)


class WriterBusy(FolioError):
    """Another process (or thread) holds the library's writer lock."""


def shared_index(path: Path, key: str | None = None) -> LibraryIndex:
    """The process's one ``LibraryIndex`` of the library directory ``path`` (opened on first use);
    ``key``: ``path`` resolved, when the caller holds it."""
    key = key or str(path.resolve())
    index = _INDEXES.get(key)
    if index is not None:
        return index
    with _INDEXES_LOCK:
        index = _INDEXES.get(key)
        if index is None:
            index = _INDEXES[key] = LibraryIndex(path)
        return index


def close_index(path: Path) -> None:
    """Close the process's index of ``path`` (its connections and HNSW view), if open."""
    with _INDEXES_LOCK:
        index = _INDEXES.pop(str(path.resolve()), None)
        _CHECKED.discard(str(path.resolve()))
        _VIEWS.pop(str(path.resolve()), None)
    if index is not None:
        index.close()


CATALOG_SCHEMA = """
CREATE TABLE IF NOT EXISTS books(
    book_id VARCHAR PRIMARY KEY, title VARCHAR, author VARCHAR, language VARCHAR, source_file VARCHAR,
    format VARCHAR, content_hash VARCHAR, embedding_model VARCHAR, chunk_tokens INTEGER,
    n_chapters INTEGER, n_chunks INTEGER, n_windows INTEGER, authors VARCHAR, series VARCHAR,
    series_index DOUBLE, tags VARCHAR, identifiers VARCHAR, pubdate VARCHAR,
    ingested_at TIMESTAMP DEFAULT current_timestamp);
CREATE TABLE IF NOT EXISTS chapters(
    book_id VARCHAR, chapter_id VARCHAR, ord INTEGER, title VARCHAR, length INTEGER, n_chunks INTEGER);
CREATE TABLE IF NOT EXISTS chunks(
    book_id VARCHAR, chunk_id VARCHAR, chapter_id VARCHAR, ordinal INTEGER, start INTEGER, "end" INTEGER,
    n_tokens INTEGER);
"""


def default_library() -> Path:
    """``$FOLIO_LIBRARY``, else the per-user data directory (``$XDG_DATA_HOME/folio``)."""
    env = os.environ.get("FOLIO_LIBRARY")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "folio"


def _check_library_path(path: Path) -> None:
    """A ``FolioError`` naming ``path`` when it cannot be a library: not a directory, under a file, a
    name that is not UTF-8 text (SQLite and DuckDB take text paths) or too long."""
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:
        raise FolioError(str(path), "the library's path is not valid UTF-8: rename it") from None
    try:
        if path.exists() and not path.is_dir():
            raise FolioError(str(path), "not a directory: a library is a directory (--library DIR)")
        parent = next((p for p in path.absolute().parents if p.exists()), None)
        if parent is not None and not parent.is_dir():
            raise FolioError(str(parent), "not a directory: a library is a directory (--library DIR)")
    except OSError as exc:
        raise FolioError(str(path), f"not a usable library path ({exc.strerror or exc})") from None


class Library:
    """One library directory. Cheap to construct; the index is opened on first use and shared."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path).expanduser() if path is not None else default_library()
        _check_library_path(self.path)
        self.legacy_dir = self.path / "books"  # the earlier per-book format, upgraded on first open
        self.staging_dir = self.path / "staging"
        self.trash_dir = self.path / "trash"
        self.cache_dir = self.path / "cache"
        self.model_cache_dir = self.cache_dir / "models"  # derived encoders (the ONNX int8 export)
        self.catalog_path = self.path / "catalog.duckdb"
        self.database_path = self.path / DATABASE
        self._key = str(self.path.resolve())

    # --- the index -------------------------------------------------------------------------------
    def exists(self) -> bool:
        return self.database_path.exists() or self._legacy_books() != []

    @property
    def index(self) -> LibraryIndex:
        """The library's index (created on first use; on the process's first use a per-book library is
        upgraded and a missing or damaged vector index rebuilt, by ``writer()``)."""
        if self._key not in _CHECKED:
            if self._legacy_books():
                self._upgraded()
            elif shared_index(self.path, self._key).vectors_missing():
                with contextlib.suppress(WriterBusy), self.writer():  # busy: its writer recovers it
                    pass  # the writer's recover() rebuilds
            _CHECKED.add(self._key)
        return shared_index(self.path, self._key)

    def _upgraded(self) -> None:
        """Upgrade a per-book library under the writer lock, or, while another process holds it (that
        process upgrades first), wait until no per-book directory is left: a reader waits, never fails."""
        said = False
        while self._legacy_books():
            try:
                with self.writer():
                    return  # the writer's recover() upgraded it
            except WriterBusy:
                if not said:
                    print(f"folio: {self.path}: waiting for another process to upgrade it", file=sys.stderr)
                    said = True
                time.sleep(UPGRADE_POLL_S)

    def _legacy_books(self) -> list[Path]:
        """The book directories of the earlier per-book format (each folder under ``books/``, whole or
        damaged: a damaged one is set aside by the upgrade, never deleted)."""
        if not self.legacy_dir.is_dir():
            return []
        try:
            return sorted(d for d in self.legacy_dir.iterdir() if d.is_dir() and not d.is_symlink())
        except OSError:
            return []

    def upgrade(self, progress: Progress | None = None) -> int:
        """Commit every book of the earlier per-book format into the library-wide indexes (under
        ``writer()``), a batch per transaction; returns the number of books upgraded."""
        books = self._legacy_books()
        if not books:
            if self.legacy_dir.is_dir():
                shutil.rmtree(self.legacy_dir, ignore_errors=True)
            return 0
        if progress is None:
            progress = BarProgress("upgrading library", "book") if sys.stderr.isatty() else NullProgress()
        index = shared_index(self.path, self._key)
        for directory in books:
            if (problem := legacy_problem(directory)) is not None:
                self._set_aside(directory, f"not upgraded ({problem})")
        books = self._one_model([d for d in books if d.exists()], index)
        progress.add_total(len(books))
        try:
            for start in range(0, len(books), UPGRADE_BATCH):
                batch = books[start : start + UPGRADE_BATCH]
                try:
                    index.commit(add=[_staged_rows(d) for d in batch])
                except Exception:  # a damaged book: the others one by one, the damaged one set aside
                    batch = [d for d in batch if self._upgrade_alone(index, d)]
                for directory in batch:
                    moved = self.trash_dir / f"{directory.name}-{uuid.uuid4().hex[:8]}"
                    os.rename(directory, moved)
                    shutil.rmtree(moved, ignore_errors=True)
                progress.advance(len(batch))
        finally:
            progress.close()
        shutil.rmtree(self.legacy_dir, ignore_errors=True)
        return len(books)

    def _set_aside(self, directory: Path, why: str) -> None:
        """Move an old book directory that cannot be upgraded to ``not-upgraded/``, with a note."""
        target = self.path / "not-upgraded" / directory.name
        target.parent.mkdir(exist_ok=True)
        if target.exists():  # one set aside before under the same name
            target = target.with_name(f"{directory.name}-{uuid.uuid4().hex[:8]}")
        os.rename(directory, target)
        print(f"folio: {directory.name}: {why}; kept whole in {target}", file=sys.stderr)

    def _upgrade_alone(self, index: LibraryIndex, directory: Path) -> bool:
        try:
            index.commit(add=[_staged_rows(directory)])
        except Exception as exc:  # whatever is damaged: this book is set aside, the others go on
            why = exc.reason if isinstance(exc, FolioError) else f"{type(exc).__name__}: {exc}"
            self._set_aside(directory, f"not upgraded ({why})")
            return False
        return True

    def _one_model(self, books: list[Path], index: LibraryIndex) -> list[Path]:
        """The books embedded by the library's model (else the most common one); each other book is
        moved to ``not-upgraded/`` whole, with a one-line note (one index holds one model's vectors)."""
        models = {}
        for directory in books:
            try:
                models[directory] = json.loads((directory / "book.json").read_text(encoding="utf-8")).get(
                    "embedding_model", ""
                )
            except (OSError, ValueError):
                models[directory] = ""
        counts = Counter(models.values())
        model = index.settings().get("embedding_model") or max(counts, key=lambda m: (counts[m], m))
        keep = [d for d in books if models[d] == model]
        for directory in books:
            if models[directory] != model:
                other = models[directory] or "an unknown model"
                self._set_aside(
                    directory, f"embedded with {other}, not {model} (ingest it into another library)"
                )
        return keep

    # --- writing -------------------------------------------------------------------------------
    @contextlib.contextmanager
    def writer(self) -> Iterator[Library]:
        """Exclusive write access: takes the lock, recovers from any earlier crash, upgrades a
        per-book library."""
        try:
            for d in (self.staging_dir, self.trash_dir, self.cache_dir):
                d.mkdir(parents=True, exist_ok=True)
            lock = open(self.path / ".lock", "a+")  # noqa: SIM115 - closed by the with below
        except OSError as exc:
            raise FolioError(
                str(self.path), f"cannot write to the library ({exc.strerror or exc}); nothing was changed"
            ) from None
        with lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise WriterBusy(str(self.path), "another ingest is writing to this library") from None
            try:
                self.recover()
                yield self
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def new_staging_dir(self, book_hint: str) -> Path:
        directory = self.staging_dir / f"{book_hint[:40]}-{uuid.uuid4().hex[:8]}"
        directory.mkdir(parents=True)
        return directory

    def recover(self) -> None:
        """Undo what a crash left behind, finish an upgrade, then make the catalog match the index."""
        for leftover in self.trash_dir.iterdir() if self.trash_dir.exists() else ():
            shutil.rmtree(leftover, ignore_errors=True)
        for leftover in self.staging_dir.iterdir() if self.staging_dir.exists() else ():
            shutil.rmtree(leftover, ignore_errors=True)
        index = shared_index(self.path, self._key)
        index.remove_stale_vectors()
        if index.vectors_missing():
            index.rebuild_vectors()
        self.upgrade()
        self.sync_catalog()
        prune_library(index)  # summaries of chapters no longer in the library

    def install(self, staged: StagedBook) -> None:
        """Commit a complete staged book into the library (under ``writer()``), replacing a book of the
        same id, and record it in the catalog."""
        source = Path(staged.directory)
        if not (source / "book.json").exists():
            raise FolioError(staged.book_id, "staged book is incomplete; nothing was changed")
        settings = VectorSettings()
        if (source / "vectors.json").exists():
            settings = VectorSettings(**json.loads((source / "vectors.json").read_text(encoding="utf-8")))
        index = shared_index(self.path, self._key)
        index.commit(add=[_staged_rows(source)], settings=settings)
        shutil.rmtree(source, ignore_errors=True)
        self.sync_catalog()
        prune_library(index, [staged.book_id])  # a changed chapter's summaries go

    def remove(self, book_id: str) -> None:
        """Remove a book (under ``writer()``), in one transaction."""
        if book_id not in self.book_ids() and book_id not in dict(self.damaged_books()):
            raise FolioError(book_id, "no such book in the library")
        index = shared_index(self.path, self._key)
        index.commit(remove=[book_id])
        self.sync_catalog()
        prune_library(index, [book_id])  # its summaries go with it

    # --- catalog -------------------------------------------------------------------------------
    def descriptors(self) -> list[dict[str, Any]]:
        """The descriptor of every book, sorted by title then id (none when the library is new)."""
        if not self.exists():
            return []
        return list(self.index.descriptors())

    def sync_catalog(self) -> None:
        """Rewrite the catalog rows of books whose directory changed (one transaction)."""
        import duckdb

        books = {b["book_id"]: b for b in self.descriptors()}
        try:
            con = duckdb.connect(str(self.catalog_path))
            try:
                con.execute(CATALOG_SCHEMA)
                con.execute("SELECT authors, pubdate FROM books LIMIT 0")  # a catalog of an earlier schema
            except duckdb.Error:
                con.close()  # closed before the file goes: DuckDB keeps one open database per path
                raise
        except duckdb.Error:  # a damaged catalog: it is derived data, rebuilt from library.sqlite
            self.drop_catalog()
            con = duckdb.connect(str(self.catalog_path))
            con.execute(CATALOG_SCHEMA)
        try:
            have = {
                i: f"{key}|{title}|{author}|{series}|{tags}"
                for i, key, title, author, series, tags in con.execute(
                    "SELECT book_id, content_hash || '|' || embedding_model || '|' || chunk_tokens, title, "
                    "author, series, tags FROM books"
                ).fetchall()
            }
            want = {
                i: f"{b['content_hash']}|{b['embedding_model']}|{b['chunk_tokens']}|"
                f"{b['title']}|{b['author']}|{b.get('series')}|{_json_or_none(b.get('tags'))}"
                for i, b in books.items()
            }
            stale = [i for i in have if want.get(i) != have[i]]
            fresh = [i for i in want if have.get(i) != want[i]]
            if not stale and not fresh:
                return
            con.execute("BEGIN TRANSACTION")
            for book_id in stale:
                for table in ("books", "chapters", "chunks"):
                    con.execute(f"DELETE FROM {table} WHERE book_id = ?", [book_id])
            for book_id in fresh:
                b = books[book_id]
                con.execute(
                    "INSERT INTO books VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
                    "current_timestamp)",
                    [
                        b["book_id"],
                        b["title"],
                        b["author"],
                        b["language"],
                        b["source_file"],
                        b["format"],
                        b["content_hash"],
                        b["embedding_model"],
                        b["chunk_tokens"],
                        len(b["chapters"]),
                        b["n_chunks"],
                        b["n_windows"],
                        _json_or_none(b.get("authors")),
                        b.get("series"),
                        b.get("series_index"),
                        _json_or_none(b.get("tags")),
                        _json_or_none(b.get("identifiers")),
                        b.get("pubdate"),
                    ],
                )
                con.executemany(
                    "INSERT INTO chapters VALUES (?, ?, ?, ?, ?, ?)",
                    [
                        [book_id, c["chapter_id"], c["order"], c["title"], c["length"], c["n_chunks"]]
                        for c in b["chapters"]
                    ],
                )
                con.executemany(
                    "INSERT INTO chunks VALUES (?, ?, ?, ?, ?, ?, ?)",
                    [[book_id, *row] for row in self.index.chunk_rows(book_id)],
                )
            con.execute("COMMIT")
        finally:
            con.close()

    def damaged_books(self) -> list[tuple[str, str]]:
        """``(book id, problem)`` of the books whose stored descriptor cannot be read (left out of
        ``descriptors``; ``folio doctor`` names the fix)."""
        if not self.exists():
            return []
        return list(self.index.damaged_books())

    def drop_catalog(self) -> None:
        """Delete the catalog (and its write-ahead log); the next ``sync_catalog`` writes it anew."""
        for path in (self.catalog_path, self.catalog_path.with_name(self.catalog_path.name + ".wal")):
            try:
                path.unlink(missing_ok=True)
            except OSError as exc:  # a folder (or something else) where the catalog file should be
                raise FolioError(
                    str(path), f"the catalog cannot be replaced ({exc.strerror or exc}): move it away"
                ) from None

    def books(self) -> list[dict[str, Any]]:
        """Catalog rows: id, title, author(s), series, tags, language, format, source, chapters, chunks per
        book (from the library index)."""
        return [
            {
                "book_id": b["book_id"],
                "title": b["title"],
                "author": b["author"],
                "authors": b.get("authors") or [b["author"]],
                "series": b.get("series"),
                "series_index": b.get("series_index"),
                "tags": b.get("tags") or [],
                "language": b["language"],
                "format": b.get("format"),
                "identifiers": b.get("identifiers") or {},
                "pubdate": b.get("pubdate"),
                "source_file": b["source_file"],
                "chapters": len(b["chapters"]),
                "chunks": b["n_chunks"],
                "windows": b["n_windows"],
                "embedding_model": b["embedding_model"],
                "chunk_tokens": b["chunk_tokens"],
            }
            for b in self.descriptors()
        ]

    # --- reading -------------------------------------------------------------------------------
    def book_ids(self) -> list[str]:
        return [b["book_id"] for b in self.descriptors()]

    def resolve_book(self, ref: str) -> str:
        """A book id from an id, a unique id prefix, or a source file name."""
        if not ref.strip():
            raise FolioError(repr(ref), "no book named: give a book id")
        books = self.descriptors()
        for b in books:
            if ref in (b["book_id"], b["source_file"]) or Path(ref).name == b["source_file"]:
                return b["book_id"]
        matches = [b["book_id"] for b in books if b["book_id"].startswith(ref)]
        if len(matches) == 1:
            return matches[0]
        raise FolioError(ref, "no such book in the library" if not matches else "ambiguous book reference")

    def removal_target(self, ref: str) -> str:
        """The id of the book ``remove`` takes for ``ref``: an exact id (a damaged book's too) or a unique
        prefix of at least ``MIN_PREFIX`` characters; anything else is refused naming the matches."""
        return removal_target(ref, [*self.book_ids(), *(i for i, _ in self.damaged_books())])

    def removal(self, ref: str) -> dict[str, Any]:
        """What ``remove`` would take for ``ref`` (a dry run: nothing changes): its id and title."""
        book_id = self.removal_target(ref)
        title = next((b["title"] for b in self.descriptors() if b["book_id"] == book_id), "a damaged book")
        return {"book_id": book_id, "title": title, "dry_run": True}

    def _views(self) -> dict[str, BookStore]:
        """Every book's view, kept per library generation (one search of a large library builds none)."""
        index = self.index
        descriptors = index.descriptors()  # the same tuple while the generation holds
        held = _VIEWS.get(self._key)
        if held is None or held[0] is not descriptors:
            held = (descriptors, {d["book_id"]: BookStore(index, d) for d in descriptors})
            _VIEWS[self._key] = held
        return held[1]

    def store(self, book_id: str) -> BookStore:
        """The book's view on the library index."""
        view = self._views().get(book_id) if self.exists() else None
        if view is None:
            raise FolioError(book_id, f"no such book in the library {self.path}")
        return view

    def concept_map(self, book_id: str) -> ConceptMap | None:
        """The book's concept map, or None when the book has none or its stored map is damaged (the
        book still answers without it; ``folio doctor`` reports it)."""
        raw = self.index.concept_map(book_id)
        if raw is None:
            return None
        try:
            return ConceptMap.from_json(raw)
        except FolioError:
            return None

    def stores(self, book_ids: list[str] | None = None) -> list[BookStore]:
        """The views of ``book_ids`` (None: every book, by title)."""
        views = self._views() if self.exists() else {}
        if book_ids is None:
            return list(views.values())
        missing = [b for b in book_ids if b not in views]
        if missing:
            raise FolioError(missing[0], f"no such book in the library {self.path}")
        return [views[b] for b in book_ids]

    def close(self) -> None:
        """Release the process's index of this library (connections, HNSW view)."""
        close_index(self.path)


def removal_target(ref: str, book_ids: list[str]) -> str:
    """The one id of ``book_ids`` that ``ref`` names exactly, or as a prefix of at least ``MIN_PREFIX``
    characters; a one-line ``FolioError`` for an empty, blank, short, ambiguous or unknown ``ref``,
    listing the ids that match (at most ``LISTED``)."""
    if ref in book_ids:
        return ref
    if not ref.strip():
        raise FolioError(repr(ref), "no book named: give a book id (folio books lists them)")
    matches = sorted(i for i in set(book_ids) if i.startswith(ref))
    more = f" and {len(matches) - LISTED} more" if len(matches) > LISTED else ""
    listed = ", ".join(matches[:LISTED]) + more
    if len(ref) < MIN_PREFIX:
        hint = f"; it matches {listed}" if matches else ""
        raise FolioError(ref, f"give the whole book id or at least {MIN_PREFIX} of its characters{hint}")
    if not matches:
        raise FolioError(ref, "no such book in the library (folio books lists the ids)")
    if len(matches) > 1:
        raise FolioError(ref, f"ambiguous: it matches {listed}; give more of the id")
    return matches[0]


def legacy_problem(directory: Path) -> str | None:
    """What makes an earlier per-book directory unfit to upgrade (a missing or unreadable file: its
    descriptor, its store, its vectors), or None when its files are there to read."""
    try:
        descriptor = json.loads((directory / "book.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        return "book.json is missing"
    except (OSError, ValueError) as exc:
        return f"book.json is unreadable: {exc}"
    if not isinstance(descriptor, dict) or not isinstance(descriptor.get("book_id"), str):
        return "book.json names no book_id"
    if not (directory / "book.sqlite").is_file():
        return "book.sqlite is missing"
    if descriptor.get("n_windows") and not (directory / "vectors.npy").is_file():
        return "vectors.npy is missing"
    return None


def _json_or_none(value: Any) -> str | None:
    """A list or mapping of a descriptor as JSON text for the catalog (None when absent)."""
    return None if value is None else json.dumps(value, ensure_ascii=False, sort_keys=True)


def _staged_rows(directory: Path) -> StagedRows:
    """A staged (or earlier per-book) book directory as rows to commit."""
    try:
        descriptor = json.loads((directory / "book.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise FolioError(
            str(directory), f"not a readable book directory ({exc}); nothing was changed"
        ) from None
    concept_map = directory / "concept_map.json"
    return StagedRows(
        descriptor["book_id"],
        str(directory),
        descriptor,
        concept_map.read_bytes() if concept_map.exists() else None,
    )
