"""Book sources with their metadata: Calibre libraries, folders of ``metadata.opf`` files, plain folders.

``book_sources(paths, formats, readable)`` turns what a person names (book files, folders, Calibre
libraries) into ``BookSource`` rows: one file to ingest per book with the metadata to keep for it, or a
one-line problem for a book that has nothing Folio can read. Plain files and folders carry no metadata
(the reader takes it from the file); a folder holding ``metadata.db`` is a Calibre library; a folder
with ``metadata.opf`` files (Calibre's per-book sidecars) and no database is read book folder by book
folder.

Calibre: ``metadata.db`` is opened read-only (``mode=ro``, never written, no journal created), so it
works while Calibre runs; each book gives title, authors (in Calibre's order), series and index, tags,
languages, identifiers and publication date, and one format file chosen by ``formats`` (config
``book_formats``, default EPUB, AZW3, MOBI, PDF, FB2, DOCX, HTML, TXT) among those Folio reads
(``readable``: the suffixes ``folio ingest`` supports, ``dataflows.api.ingestible_suffixes``). A format
listed but missing on disk, a book whose formats Folio cannot read (a CBR comic), and a path that leaves
the library folder are one line for that book; the others go on. A database that is locked by a writer,
damaged, or of a schema Folio does not know is one line for the library.

Limitations: Calibre's custom columns are not read; a book's cover is not kept; ``metadata.opf``
sidecars are read only where there is no ``metadata.db`` (the database is Calibre's truth).
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import stat
import urllib.parse
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lxml import etree

from folio.nodes.core.types import FolioError

DATABASE = "metadata.db"
SIDECAR = "metadata.opf"
DEFAULT_FORMATS = ("epub", "azw3", "mobi", "pdf", "fb2", "docx", "html", "txt")
# the columns Folio reads; a database without them is of a schema Folio does not know
REQUIRED_COLUMNS = {
    "books": {"id", "title", "path", "series_index", "pubdate"},
    "data": {"book", "format", "name"},
    "authors": {"id", "name"},
    "books_authors_link": {"book", "author"},
}
UNDEFINED_DATE = "0101-01-01"  # Calibre's "no date"
COMICS = {"cbr", "cbz", "cb7", "cbt", "cbc"}


@dataclass(frozen=True)
class BookSource:
    """One book to ingest: its file (None when it has none Folio can read), the metadata to keep, or
    the one-line problem that stops it."""

    key: str  # where it comes from: the file, or "<library>#<calibre id>"
    path: Path | None
    metadata: dict[str, Any] = field(default_factory=dict)
    problem: str = ""

    def error(self) -> FolioError:
        return FolioError(self.key, self.problem)


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def file_stamp(path: Path, max_bytes: int | None = None) -> dict[str, Any]:
    """What a descriptor records of its source file: size, mtime (ns) and sha256 (``folio sync``
    compares them); nothing for a file that is not regular (a FIFO is never opened) or is larger than
    ``max_bytes`` (the reader refuses it)."""
    info = path.stat()
    if not stat.S_ISREG(info.st_mode) or (max_bytes is not None and info.st_size > max_bytes):
        return {}
    return {"file_size": info.st_size, "file_mtime_ns": info.st_mtime_ns, "file_sha256": file_sha256(path)}


def stored_name(path: Path) -> str:
    """``path`` resolved, as a descriptor's ``source_file`` holds it (non-UTF-8 bytes escaped)."""
    return os.fsencode(str(path.resolve())).decode("utf-8", "backslashreplace")


def is_calibre_library(path: Path) -> bool:
    return (path / DATABASE).is_file()


def has_sidecars(path: Path) -> bool:
    """A folder with ``metadata.opf`` files below it (a Calibre library without its database)."""
    return any(SIDECAR in names for _, _, names in os.walk(path))


def read_only_uri(path: Path) -> str:
    """The SQLite URI that opens ``path`` read-only (never written, no journal or lock file made)."""
    return f"file:{urllib.parse.quote(str(path.resolve()))}?mode=ro"


def _connect(database: Path) -> sqlite3.Connection:
    try:
        con = sqlite3.connect(read_only_uri(database), uri=True, timeout=2.0)
        con.execute("PRAGMA query_only = 1")
        return con
    except sqlite3.Error as exc:
        raise FolioError(str(database), f"cannot open the Calibre database ({exc})") from None


def _schema_problem(con: sqlite3.Connection) -> str | None:
    version = con.execute("PRAGMA user_version").fetchone()[0]
    for table, wanted in REQUIRED_COLUMNS.items():
        have = {row[1] for row in con.execute(f"PRAGMA table_info({table})")}
        if not wanted <= have:
            missing = ", ".join(sorted(wanted - have))
            return (
                f"a Calibre database of a schema Folio does not know (version {version}; "
                f"table {table} lacks {missing}): open the library in a current Calibre once"
            )
    return None


def _rows(con: sqlite3.Connection, sql: str) -> list[tuple[Any, ...]]:
    return list(con.execute(sql).fetchall())


def _optional_rows(con: sqlite3.Connection, sql: str) -> list[tuple[Any, ...]]:
    """Rows of a table an older or trimmed schema may lack (tags, series, languages, identifiers)."""
    try:
        return _rows(con, sql)
    except sqlite3.OperationalError:
        return []


def _grouped(pairs: Iterable[tuple[Any, Any]]) -> dict[Any, list[Any]]:
    out: dict[Any, list[Any]] = {}
    for key, value in pairs:
        out.setdefault(key, []).append(value)
    return out


def _calibre_rows(database: Path) -> tuple[list[tuple[Any, ...]], dict[str, dict[Any, Any]]]:
    """The books and their linked values of ``database``, read in one read transaction."""
    con = _connect(database)
    try:
        problem = _schema_problem(con)
        if problem:
            raise FolioError(str(database), problem)
        books = _rows(con, "SELECT id, title, path, series_index, pubdate FROM books ORDER BY id")
        linked = {
            "authors": _grouped(
                _rows(
                    con,
                    "SELECT l.book, a.name FROM books_authors_link l JOIN authors a ON a.id = l.author "
                    "ORDER BY l.book, l.id",
                )
            ),
            "formats": _grouped(
                (b, (f, n)) for b, f, n in _rows(con, "SELECT book, format, name FROM data ORDER BY id")
            ),
            "tags": _grouped(
                _optional_rows(
                    con,
                    "SELECT l.book, t.name FROM books_tags_link l JOIN tags t ON t.id = l.tag "
                    "ORDER BY t.name",
                )
            ),
            "series": dict(
                _optional_rows(
                    con, "SELECT l.book, s.name FROM books_series_link l JOIN series s ON s.id = l.series"
                )
            ),
            "languages": _grouped(
                _optional_rows(
                    con,
                    "SELECT l.book, g.lang_code FROM books_languages_link l "
                    "JOIN languages g ON g.id = l.lang_code ORDER BY l.item_order",
                )
            ),
            "identifiers": _grouped(
                (b, (t, v)) for b, t, v in _optional_rows(con, "SELECT book, type, val FROM identifiers")
            ),
        }
        return books, linked
    except sqlite3.OperationalError as exc:
        if "locked" in str(exc):
            raise FolioError(
                str(database), "the Calibre database is locked by a program writing to it: try again soon"
            ) from None
        raise FolioError(str(database), f"cannot read the Calibre database ({exc})") from None
    except sqlite3.DatabaseError as exc:
        raise FolioError(str(database), f"a damaged Calibre database ({exc})") from None
    finally:
        con.close()


def _date(value: Any) -> str | None:
    text = str(value or "")[:10]
    return None if not text or text.startswith(UNDEFINED_DATE) else text


def _index(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _inside(root: Path, path: Path) -> bool:
    return path.resolve().is_relative_to(root.resolve())


def chosen_format(
    folder: Path, formats: Sequence[tuple[str, str]], preference: Sequence[str], readable: Iterable[str]
) -> tuple[Path | None, str]:
    """The file of ``formats`` (``(FORMAT, file name without suffix)``) Folio ingests: the first by
    ``preference`` that Folio reads and that is on disk; else ``(None, the one-line reason)``."""
    readable = {s.lower().lstrip(".") for s in readable}
    order = {name.lower().lstrip("."): rank for rank, name in enumerate(preference)}
    listed = sorted(((fmt.lower(), name) for fmt, name in formats), key=lambda f: order.get(f[0], len(order)))
    if not listed:
        return None, "no book file is listed in the Calibre database"
    missing = []
    for fmt, name in listed:
        path = folder / f"{name}.{fmt}"
        if not path.is_file():
            missing.append(path.name)
        elif fmt in readable:
            return path, ""
    shown = ", ".join(fmt.upper() for fmt, _ in listed)
    if missing:
        return None, f"listed as {shown} but {', '.join(missing)} is missing on disk"
    if {fmt for fmt, _ in listed} & COMICS:
        return None, f"a comic archive ({shown}): Folio reads text books, not comics"
    return None, f"no format Folio reads ({shown})"


def calibre_books(root: Path, preference: Sequence[str], readable: Iterable[str]) -> list[BookSource]:
    """Every book of the Calibre library ``root`` with its metadata and chosen file (or its problem)."""
    books, linked = _calibre_rows(root / DATABASE)
    readable = tuple(readable)
    out = []
    for book_id, title, rel, series_index, pubdate in books:
        key = f"{root}#{book_id} {title}"
        folder = root / str(rel or "")
        if not rel or Path(str(rel)).is_absolute() or not _inside(root, folder):
            out.append(BookSource(key, None, problem=f"its path {rel!r} leaves the library folder: skipped"))
            continue
        path, problem = chosen_format(folder, linked["formats"].get(book_id, []), preference, readable)
        if path is not None and not _inside(root, path):
            path, problem = None, "its file leaves the library folder (a link): skipped"
        series = linked["series"].get(book_id)
        languages = linked["languages"].get(book_id, [])
        metadata = {
            "title": str(title),
            "authors": [str(a) for a in linked["authors"].get(book_id, [])],
            "series": series,
            "series_index": _index(series_index) if series else None,
            "tags": [str(t) for t in linked["tags"].get(book_id, [])],
            "language": languages[0] if languages else None,
            "identifiers": {str(t): str(v) for t, v in linked["identifiers"].get(book_id, [])},
            "pubdate": _date(pubdate),
            "calibre_id": int(book_id),
        }
        out.append(BookSource(str(path) if path else key, path, metadata, problem))
    return out


OPF_NS = {"opf": "http://www.idpf.org/2007/opf", "dc": "http://purl.org/dc/elements/1.1/"}


def opf_metadata(opf: Path) -> dict[str, Any]:
    """Title, authors, series, tags, language, identifiers and date of a ``metadata.opf`` sidecar."""
    parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False)
    try:
        root = etree.parse(str(opf), parser).getroot()
    except (etree.XMLSyntaxError, OSError) as exc:
        raise FolioError(str(opf), f"not a readable metadata.opf ({exc})") from None

    def texts(name: str) -> list[str]:
        return [
            " ".join(e.text.split())
            for e in root.iterfind(f".//dc:{name}", OPF_NS)
            if e.text and e.text.strip()
        ]

    meta = {e.get("name"): e.get("content") for e in root.iterfind(".//opf:meta", OPF_NS) if e.get("name")}
    ids = {}
    for e in root.iterfind(".//dc:identifier", OPF_NS):
        scheme = e.get(f"{{{OPF_NS['opf']}}}scheme") or e.get("scheme") or ""
        if e.text and scheme.lower() not in ("calibre", "uuid", ""):
            ids[scheme.lower()] = e.text.strip()
    creators = [
        " ".join((e.text or "").split())
        for e in root.iterfind(".//dc:creator", OPF_NS)
        if e.get(f"{{{OPF_NS['opf']}}}role", "aut") == "aut" and (e.text or "").strip()
    ]
    series = meta.get("calibre:series")
    titles, languages, dates = texts("title"), texts("language"), texts("date")
    return {
        "title": titles[0] if titles else None,
        "authors": creators,
        "series": series,
        "series_index": _index(meta.get("calibre:series_index")) if series else None,
        "tags": texts("subject"),
        "language": languages[0] if languages else None,
        "identifiers": ids,
        "pubdate": _date(dates[0]) if dates else None,
    }


def sidecar_books(
    root: Path, preference: Sequence[str], readable: Iterable[str], files: Iterable[Path]
) -> list[BookSource]:
    """The books of a folder of ``metadata.opf`` sidecars: per sidecar folder, the preferred readable
    book file beside it with the sidecar's metadata (a folder without one is one line); ``files``
    (the folder's book files) outside sidecar folders are kept as plain books."""
    readable = tuple(readable)
    known = {s.lower().lstrip(".") for s in (*preference, *readable)} | COMICS
    out = []
    folders = set()
    for directory, _, names in sorted(os.walk(root)):
        folder = Path(directory)
        if SIDECAR not in names:
            continue
        folders.add(folder)
        try:
            metadata = opf_metadata(folder / SIDECAR)
        except FolioError as exc:
            out.append(BookSource(str(folder / SIDECAR), None, problem=exc.reason))
            continue
        formats = [
            (Path(n).suffix.lstrip("."), Path(n).stem)
            for n in sorted(names)
            if Path(n).suffix.lower().lstrip(".") in known and (folder / n).is_file()
        ]
        path, problem = chosen_format(folder, formats, preference, readable)
        if not formats:
            problem = "a metadata.opf without a book file beside it"
        kept = {k: v for k, v in metadata.items() if v}
        out.append(BookSource(str(path or folder / SIDECAR), path, kept, problem))
    out.extend(BookSource(str(p), p) for p in files if p.parent not in folders)  # loose books
    return out
