"""Book parsing: an EPUB or plain-text file becomes a ``ParsedBook``, then a ``Manifest`` with stable ids.

Nodes: ``parsed_book(source_path)`` (dispatch by content: zip magic means EPUB, anything else is read as
text) and ``manifest(parsed_book)`` (content-derived ids: ``book_id`` from the file's base name, title and
author; ``chapter_id`` and ``content_hash`` from titles and texts). Config keys: ``max_book_bytes``
(default 200 MB: a larger file, or an EPUB whose contents unpack to more than ``ZIP_EXPANSION`` times
that, is refused before it is read). Bad input (missing, directory, not a regular file, too large,
empty, binary, not UTF-8, no real text, truncated zip, zip that is not an EPUB, DRM, XML entity
declarations, empty spine) raises ``FolioError(path, reason)``.

Reading is bounded: only a regular file is opened (a FIFO, device or socket is refused without opening
it; the file is opened non-blocking and checked again on its descriptor), its size is checked before
any byte is read, and at most ``max_book_bytes + 1`` bytes are read. An EPUB's XML documents (container,
package, navigation and content documents) are refused when they declare entities (``<!ENTITY``): no
entity expansion ("billion laughs") and no external entities; every lxml parser here also runs with
``resolve_entities=False`` and ``no_network=True``. A file name of any bytes works: ids hash the name's
bytes, and ``Manifest.source_file`` holds a non-UTF-8 name with its bad bytes escaped (``\\xNN``).

Chapter text is plain text: one line per paragraph, paragraphs separated by exactly ``"\\n\\n"``,
hard-wrapped lines joined with one space (a line ending in a hyphen after a letter joins a lower-case
next line without one: "candle-" / "light" -> "candle-light"), whitespace runs collapsed, invisible
format characters (soft hyphen, zero-width space, word joiner, BOM) removed, no HTML. The heading is the
chapter title and is not part of the text. Paragraphs without any letter or digit (``* * *`` scene
breaks) and illustration markers (``[Illustration: ...]`` in text, ``<figure>``/``<img>`` in EPUB) are
dropped.

EPUB rules (ebooklib reads the package, lxml the documents):

* Reading order is the spine (non-linear items only when the TOC points at them; the nav document never).
* Chapters start at TOC entries (nav for EPUB 3, NCX otherwise; every spine document when there is no
  TOC), split at the entries' anchors, so one document may hold many chapters. Which TOC level splits:
  an entry without a link is a label and its children take its place; an entry's children become
  chapters too when they point into other documents than the entry (a part made of chapter files) or
  when the entry is alone on its level (a book-level wrapper such as "SECTION IV"); otherwise children
  are sub-sections of one document and stay inside their parent (Sherlock's "A Scandal in Bohemia"
  I/II/III, the children's-literature "A Four-Leaved Clover" I-IV).
* Spine documents not in the TOC belong to the preceding chapter. Publisher furniture is dropped by its
  ``epub:type`` (cover, titlepage, halftitlepage, seriespage, imprint, colophon, copyright-page, toc,
  landmarks, loi, lot, page-list, pagebreak, noteref), as are ``class="pagenum"`` page numbers.
* Leading heading elements of a chapter (``h1``-``h6`` before any other text) are its heading and are not
  part of its text; later headings stay as paragraphs.
* ``mimetype`` need not be the first zip entry. Metadata: ``dc:title``, ``dc:creator`` (several joined
  with " and "), ``dc:language``.

Plain-text rules:

* UTF-8 (BOM stripped) or UTF-16 with a BOM; anything else is refused (re-save as UTF-8); CRLF/CR become LF.
* Project Gutenberg header and footer are cut (modern ``*** START OF ...`` / ``*** END OF ...`` markers,
  the old ``*END*THE SMALL PRINT!`` header and ``End of [the] Project Gutenberg...`` footers), as are
  "Produced by"/"Scanned by" credits right after the header. Title/author come from the header's
  ``Title:``/``Author:`` lines, else the file name (author "Unknown"); language from ``Language:``.
* A table of contents (a "CONTENTS" heading followed by entry lines) is removed, and its entries are
  authoritative: the chapter headings are the body blocks (one block of up to 3 lines, or a bare number
  block plus a short title block) that equal the next entries in order, compared on lower-cased letters
  and digits. This takes Moby-Dick's body "CHAPTER n." rather than the contents, and keeps its
  "EXTRACTS." sub-heading inside "EXTRACTS. (Supplied by a Sub-Sub-Librarian).". When fewer than half of
  the entries are found, or there is no table of contents, headings are detected by pattern:
  a block set off by at least two blank lines (the Gutenberg convention for headings) that is
  "CHAPTER/BOOK/PART/LETTER/STAVE n[. title]", a bare roman/arabic number ("I.", "XVI"), a named part
  ("Epilogue", "Preface", ...), or an all-caps title of up to 3 lines (capitals except short words:
  Grimm's "The DEATH of the HEN"); "CHAPTER n" labels count without the blank lines only when fewer than
  two headings are set off. A bare number followed by a short title-case line is one heading
  ("I. Introduction"). A lone empty heading right before another heading becomes its prefix
  ("HOW MRS FOX MARRIED AGAIN. FIRST VERSION."). "Transcriber's Notes" blocks are dropped up to the next
  heading.
* Gutenberg's underscore italics are dropped from paragraphs ("here—_here_—" -> "here—here—"; an
  underscore inside or right after a word stays: "snake_case", "31_st_").

Both formats, front matter: chapters with no text are dropped; chapters before the first *substantial*
one (at least 100 words in prose paragraphs: 8+ words, mostly lower-case letters, at most 10% numbers, a
sentence end) are front matter and dropped (title pages, contents, transcriber's notes, lists of
illustrations). Text before the first heading is such a chapter too, titled with the book title, so it is
kept only when it is substantial prose. A book without any substantial chapter keeps all its non-empty
chapters. Moby-Dick thus gives ETYMOLOGY, EXTRACTS, 135 chapters and the Epilogue in both formats.

Other formats (PDF, MOBI/AZW3, FB2, DOCX, HTML, Markdown) have their own readers in ``nodes/readers/``
(``readers.table`` picks one by magic bytes, then suffix); EPUB and text are in ``readers.epub``,
``readers.plain_text``.

Limitations: text encodings other than UTF-8/UTF-16-with-BOM are refused, not guessed;
heading detection in text without a table of contents is heuristic (a mixed-case story title with no
"CHAPTER" label is not found); footnotes stay inline where the EPUB puts them.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import unicodedata
from collections.abc import Sequence
from pathlib import Path

from folio.nodes.core.types import Chapter, FolioError, Manifest, ParsedBook
from folio.nodes.readers.common import megabytes as _megabytes
from folio.nodes.readers.common import storable as _storable
from folio.nodes.readers.table import read as read_book

# --- nodes -----------------------------------------------------------------------------------------


MAX_BOOK_BYTES = 200_000_000  # configs/default.yaml's ``max_book_bytes``


def parsed_book(source_path: str, max_book_bytes: int = MAX_BOOK_BYTES) -> ParsedBook:
    """The book at ``source_path`` parsed into chapters by its format's reader (``readers.table``)."""
    data = _source_bytes(source_path, int(max_book_bytes))
    return read_book(source_path, data, int(max_book_bytes))


def manifest(parsed_book: ParsedBook) -> Manifest:
    """The book's identity and chapters with content-derived ids (re-ingesting gives the same ids)."""
    titles_texts = [(c.title, c.text) for c in parsed_book.chapters]
    ids = _chapter_ids(titles_texts)
    source_name = Path(parsed_book.source_path).name
    return Manifest(
        book_id=_book_id(parsed_book.title, parsed_book.author, source_name),
        title=parsed_book.title,
        author=parsed_book.author,
        language=parsed_book.language,
        source_file=_storable(str(Path(parsed_book.source_path).resolve())),
        format=parsed_book.format,
        content_hash=_content_hash(titles_texts),
        chapters=tuple(
            Chapter(chapter_id=cid, order=i, title=c.title, text=c.text, pages=c.pages)
            for i, (cid, c) in enumerate(zip(ids, parsed_book.chapters, strict=True))
        ),
        page_labels=parsed_book.page_labels,
    )


# --- ids -------------------------------------------------------------------------------------------


def _slug(text: str) -> str:
    """Lower-case ASCII letters and digits joined by "-" (accents folded first)."""
    ascii_text = (
        unicodedata.normalize("NFKD", text.replace("’", "'")).encode("ascii", "ignore").decode("ascii")
    )
    return "-".join(re.findall(r"[a-z0-9]+", ascii_text.lower()))


def _book_id(title: str, author: str, source_name: str) -> str:
    """``<slug(title)[:40]>-<sha1(file name, title, author)[:8]>`` (a trailing "-" of the cut slug
    dropped)."""
    key = f"{source_name}\0{title}\0{author}".encode("utf-8", "surrogateescape")
    digest = hashlib.sha1(key).hexdigest()[:8]
    return f"{_slug(title)[:40].rstrip('-') or 'book'}-{digest}"


def _content_hash(titles_texts: Sequence[tuple[str, str]]) -> str:
    """sha256 of every chapter's ``title + "\\0" + text`` joined with ``"\\0\\0"``."""
    joined = "\0\0".join(f"{title}\0{text}" for title, text in titles_texts)
    return hashlib.sha256(joined.encode()).hexdigest()


def _chapter_ids(titles_texts: Sequence[tuple[str, str]]) -> list[str]:
    """``ch-<sha1(title, text)[:10]>``; a repeated id gets ``-2``, ``-3``... in reading order."""
    ids: list[str] = []
    seen: dict[str, int] = {}
    for title, text in titles_texts:
        base = "ch-" + hashlib.sha1(f"{title}\0{text}".encode()).hexdigest()[:10]
        seen[base] = seen.get(base, 0) + 1
        ids.append(base if seen[base] == 1 else f"{base}-{seen[base]}")
    return ids


# --- reading and sniffing --------------------------------------------------------------------------


def _file_kind(mode: int) -> str:
    """What a non-regular file is, for the one-line refusal."""
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _source_bytes(source_path: str, max_bytes: int = MAX_BOOK_BYTES) -> bytes:
    """The file's bytes, or a FolioError for a missing path, a directory, a FIFO/device/socket, a file
    larger than ``max_bytes`` (checked before reading) or an empty file."""
    try:
        info = os.stat(source_path)
    except FileNotFoundError:
        raise FolioError(source_path, "no such file") from None
    except OSError as exc:
        raise FolioError(source_path, f"cannot read the file: {exc.strerror or exc}") from None
    if stat.S_ISDIR(info.st_mode):
        raise FolioError(source_path, "is a directory, not a book file (give an .epub or .txt file)")
    try:
        fd = _regular_fd(source_path, info.st_mode)
    except OSError as exc:
        raise FolioError(source_path, f"cannot read the file: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        if size > max_bytes:
            raise FolioError(
                source_path,
                f"too large: {_megabytes(size)}, more than the {_megabytes(max_bytes)} limit"
                " (max_book_bytes)",
            )
        try:
            data = handle.read(max_bytes + 1)
        except OSError as exc:
            raise FolioError(source_path, f"cannot read the file: {exc.strerror or exc}") from None
    if len(data) > max_bytes:  # it grew while being read
        limit = _megabytes(max_bytes)
        raise FolioError(source_path, f"too large: more than the {limit} limit (max_book_bytes)")
    if not data.strip():
        raise FolioError(source_path, "empty file" if not data else "empty file (only whitespace)")
    return data


def _regular_fd(source_path: str, mode: int) -> int:
    """A read-only descriptor of the regular file ``source_path`` (a FIFO, device or socket is refused
    before it is opened; non-blocking open and a second check on the descriptor close the race)."""
    if not stat.S_ISREG(mode):
        raise FolioError(source_path, f"{_file_kind(mode)}, not a book file: only regular files are read")
    fd = os.open(source_path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise FolioError(source_path, f"{_file_kind(mode)}, not a book file: only regular files are read")
    os.set_blocking(fd, True)
    return fd
