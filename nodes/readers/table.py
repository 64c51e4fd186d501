"""The format table: which reader reads a file, by its magic bytes first and its suffix second.

``FORMATS`` holds one row per format (name, label, suffixes, magic test, reader module); ``BOOK_SUFFIXES``
is every suffix a book file may have (the folder scan reads it); ``read(source_path, data, max_bytes)``
picks the row and runs its reader. A file whose suffix names a binary format its bytes do not match is
refused in one line ("not a PDF: ..."). Adding a format is one reader module and one row here.
Limitations: a zip is a DOCX when it holds ``word/document.xml``, else it is read as an EPUB.
"""

from __future__ import annotations

import importlib
import io
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from folio.nodes.core.types import FolioError, ParsedBook


@dataclass(frozen=True)
class Format:
    """One row of the format table."""

    name: str  # ``ParsedBook.format`` and the ``--format`` filter value
    label: str  # for people: "PDF", "MOBI/AZW3"
    suffixes: tuple[str, ...]
    module: str  # ``folio.nodes.readers.<module>``, whose ``read(source_path, data, max_bytes)`` reads it
    magic: Callable[[bytes], bool] | None = None  # None: a text format, recognised by suffix only


def _is_zip(data: bytes) -> bool:
    return data[:4] in (b"PK\x03\x04", b"PK\x05\x06", b"PK\x07\x08")


def _is_docx(data: bytes) -> bool:
    if not _is_zip(data):
        return False
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            return "word/document.xml" in zf.namelist()
    except (zipfile.BadZipFile, OSError, EOFError):
        return False


def _is_mobi(data: bytes) -> bool:
    return data[60:68] in (b"BOOKMOBI", b"TEXtREAd")


def _is_fb2(data: bytes) -> bool:
    return b"<FictionBook" in data[:4096]


FORMATS: tuple[Format, ...] = (
    Format("docx", "DOCX", (".docx",), "docx", _is_docx),
    Format("epub", "EPUB", (".epub",), "epub", _is_zip),
    Format("pdf", "PDF", (".pdf",), "pdf", lambda data: data.lstrip()[:5] == b"%PDF-"),
    Format("mobi", "MOBI/AZW3", (".mobi", ".azw3", ".azw", ".prc"), "mobi", _is_mobi),
    Format("fb2", "FB2", (".fb2",), "fb2", _is_fb2),
    Format("html", "HTML", (".html", ".htm", ".xhtml"), "html"),
    Format("markdown", "Markdown", (".md", ".markdown"), "markdown"),
    Format("txt", "plain text", (".txt", ".text"), "plain_text"),
)
BOOK_SUFFIXES: tuple[str, ...] = tuple(s for f in FORMATS for s in f.suffixes)


def format_of(source_path: str, data: bytes) -> Format:
    """The row that reads this file: the first whose magic matches, else the one its suffix names (a
    binary format's suffix on bytes that do not match is a FolioError), else plain text."""
    for row in FORMATS:
        if row.magic is not None and row.magic(data):
            return row
    suffix = Path(source_path).suffix.lower()
    named = next((row for row in FORMATS if suffix in row.suffixes), FORMATS[-1])
    if named.magic is not None:
        what = "a zip archive" if named.name in ("epub", "docx") else f"a {named.label} file"
        raise FolioError(source_path, f"not {_article(named.label)}: the file is not {what}")
    return named


def _article(label: str) -> str:
    return f"an {label}" if label[0] in "AEFIO" else f"a {label}"


def read(source_path: str, data: bytes, max_bytes: int) -> ParsedBook:
    """The book parsed by its format's reader."""
    row = format_of(source_path, data)
    reader = importlib.import_module(f"folio.nodes.readers.{row.module}")
    book: ParsedBook = reader.read(source_path, data, max_bytes)
    return book
