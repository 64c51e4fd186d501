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
hard-wrapped lines joined with one space, whitespace runs collapsed, invisible format characters (soft
hyphen, zero-width space, word joiner, BOM) removed, no HTML. The heading is the chapter title and is
not part of the text. Paragraphs without any letter or digit (``* * *`` scene breaks) and illustration
markers (``[Illustration: ...]`` in text, ``<figure>``/``<img>`` in EPUB) are dropped.

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

Both formats, front matter: chapters with no text are dropped; chapters before the first *substantial*
one (at least 100 words in prose paragraphs: 8+ words, mostly lower-case letters, at most 10% numbers, a
sentence end) are front matter and dropped (title pages, contents, transcriber's notes, lists of
illustrations). Text before the first heading is such a chapter too, titled with the book title, so it is
kept only when it is substantial prose. A book without any substantial chapter keeps all its non-empty
chapters. Moby-Dick thus gives ETYMOLOGY, EXTRACTS, 135 chapters and the Epilogue in both formats.

Limitations: no PDF/MOBI; text encodings other than UTF-8/UTF-16-with-BOM are refused, not guessed;
heading detection in text without a table of contents is heuristic (a mixed-case story title with no
"CHAPTER" label is not found); footnotes stay inline where the EPUB puts them.
"""

from __future__ import annotations

import hashlib
import html.entities
import os
import re
import stat
import unicodedata
import warnings
import zipfile
import zlib
from collections.abc import Iterable, Sequence
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import unquote

from lxml import etree
from lxml import html as lxml_html

from folio.nodes.types import Chapter, FolioError, Manifest, ParsedBook, RawChapter

# --- nodes -----------------------------------------------------------------------------------------


MAX_BOOK_BYTES = 200_000_000  # configs/default.yaml's ``max_book_bytes``
ZIP_EXPANSION = 4  # an EPUB's contents may unpack to at most this many times ``max_book_bytes``


def parsed_book(source_path: str, max_book_bytes: int = MAX_BOOK_BYTES) -> ParsedBook:
    """The book at ``source_path`` parsed into chapters (EPUB by zip magic, else plain text)."""
    data = _source_bytes(source_path, int(max_book_bytes))
    if _is_zip(data):
        return _epub_book(source_path, int(max_book_bytes))
    if source_path.lower().endswith(".epub"):
        raise FolioError(source_path, "not an EPUB: the file is not a zip archive")
    return _text_book(source_path, data)


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
            Chapter(chapter_id=cid, order=i, title=title, text=text)
            for i, (cid, (title, text)) in enumerate(zip(ids, titles_texts, strict=True))
        ),
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

_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF8", "a GIF image"),
    (b"%PDF", "a PDF (convert it to EPUB or plain text first)"),
    (b"\x1f\x8b", "a gzip archive"),
    (b"Rar!", "a RAR archive"),
    (b"7z\xbc\xaf", "a 7-Zip archive"),
    (b"\xd0\xcf\x11\xe0", "an MS Office document"),
)


def _storable(path: str) -> str:
    """``path`` as valid UTF-8 text: the bytes of a non-UTF-8 file name escaped as ``\\xNN``."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def _megabytes(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n < 10e6 else f"{n / 1e6:.0f} MB"


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


def _is_zip(data: bytes) -> bool:
    return data[:4] in (b"PK\x03\x04", b"PK\x05\x06", b"PK\x07\x08")


def _binary_kind(data: bytes) -> str | None:
    """What a non-text file looks like ("a PNG image", ...), or None when it may be text."""
    for magic, kind in _MAGIC:
        if data.startswith(magic):
            return kind
    if data[60:68] == b"BOOKMOBI":
        return "a Kindle/MOBI book (convert it to EPUB first)"
    if b"\0" in data[:65536]:
        return "binary data (it contains NUL bytes)"
    return None


def _decoded_text(data: bytes, source: str) -> str:
    """UTF-8 (BOM stripped) or UTF-16 with a BOM; anything else is a FolioError, never a guess."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError:
            raise FolioError(source, "broken UTF-16 text; re-save the file as UTF-8") from None
    kind = _binary_kind(data)
    if kind:
        raise FolioError(source, f"not a text or EPUB file: looks like {kind}")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        bad = data[exc.start : exc.start + 1].hex()
        raise FolioError(
            source, f"not valid UTF-8 text (byte 0x{bad} at offset {exc.start}); re-save the file as UTF-8"
        ) from None
    controls = sum(1 for ch in text[:65536] if ord(ch) < 32 and ch not in "\t\n\r\f\v")
    if controls > 0.01 * min(len(text), 65536):
        raise FolioError(source, "not a text file: it is full of control characters (binary data?)")
    return text


# --- shared text helpers ---------------------------------------------------------------------------

_INVISIBLE = dict.fromkeys(map(ord, "\u00ad\u200b\u2060\ufeff"))
_WS = re.compile(r"\s+")
_PROSE_MIN_WORDS = 8
_SUBSTANTIAL_WORDS = 100


def _clean_inline(text: str) -> str:
    """Invisible format characters removed and whitespace runs collapsed to one space."""
    return _WS.sub(" ", text.translate(_INVISIBLE)).strip()


def _unwrapped(lines: Iterable[str]) -> str:
    """One paragraph from hard-wrapped lines: joined with single spaces, whitespace collapsed."""
    return _clean_inline(" ".join(lines))


def _norm_key(text: str) -> str:
    """Lower-case letters and digits separated by single spaces (for comparing headings)."""
    folded = unicodedata.normalize("NFKD", text)
    folded = "".join(ch for ch in folded if not unicodedata.combining(ch)).lower()
    return " ".join(re.findall(r"[^\W_]+", folded))


def _is_prose(paragraph: str) -> bool:
    """A paragraph of running text: 8+ words, mostly lower-case letters, few numbers, a sentence end."""
    tokens = paragraph.split()
    letters = [ch for ch in paragraph if ch.isalpha()]
    lower = sum(1 for ch in letters if ch.islower())
    numbers = sum(1 for t in tokens if any(ch.isdigit() for ch in t))
    return (
        len(tokens) >= _PROSE_MIN_WORDS
        and lower >= 0.5 * max(len(letters), 1)
        and numbers <= 0.1 * len(tokens)
        and re.search(r"[.!?]", paragraph) is not None
    )


def _is_substantial(paragraphs: Sequence[str]) -> bool:
    """At least 100 words in prose paragraphs."""
    return sum(len(p.split()) for p in paragraphs if _is_prose(p)) >= _SUBSTANTIAL_WORDS


def _book_chapters(sections: Sequence[tuple[str, Sequence[str]]]) -> tuple[RawChapter, ...]:
    """Sections to chapters: no-text paragraphs and empty sections dropped, leading front matter dropped."""
    kept = [
        (title, [p for p in paragraphs if any(ch.isalnum() for ch in p)]) for title, paragraphs in sections
    ]
    kept = [(title, paragraphs) for title, paragraphs in kept if paragraphs]
    first = next((i for i, (_, paragraphs) in enumerate(kept) if _is_substantial(paragraphs)), 0)
    return tuple(RawChapter(title=title, text="\n\n".join(paragraphs)) for title, paragraphs in kept[first:])


def _checked_chapters(chapters: tuple[RawChapter, ...], source: str) -> tuple[RawChapter, ...]:
    if not chapters or not any(re.search(r"[^\W\d_]{2,}", c.text) for c in chapters):
        raise FolioError(source, "no readable text found in this book")
    return chapters


# --- Project Gutenberg -----------------------------------------------------------------------------

_PG_START = re.compile(
    r"^\s*\*{3}\s*START OF (?:THE|THIS) PROJECT GUTENBERG.*$|^\s*\*+\s*END\*?\s*THE SMALL PRINT.*$",
    re.IGNORECASE | re.MULTILINE,
)
_PG_END = re.compile(
    r"^\s*\*{3}\s*END OF (?:THE|THIS) PROJECT GUTENBERG.*$"
    r"|^\s*End of (?:the |this )?Project Gutenberg.*$"
    r"|^\s*End Project Gutenberg.*$"
    r"|^\s*\*{3}\s*START: FULL LICENSE.*$",
    re.IGNORECASE | re.MULTILINE,
)
_PG_CREDIT = re.compile(
    r"^(?:produced|scanned|transcribed|prepared|e-?text prepared|this e-?text was prepared|"
    r"this e-?book was produced)\s+by\b",
    re.IGNORECASE,
)


def _gutenberg_split(text: str) -> tuple[str, str]:
    """``(header, body)``: the Project Gutenberg header and footer cut off (no-op without markers).

    The body also loses the "Produced by ..." / "Scanned by ..." credit paragraphs that follow the header.
    """
    header = ""
    starts = list(_PG_START.finditer(text))
    if starts:
        last = starts[-1]
        header, text = text[: last.start()], text[last.end() :]
    end = _PG_END.search(text)
    if end:
        text = text[: end.start()]
    paragraphs = re.split(r"\n[ \t]*\n", text.lstrip("\n"))
    while paragraphs and (not paragraphs[0].strip() or _PG_CREDIT.match(paragraphs[0].strip())):
        paragraphs.pop(0)
    return header, "\n\n".join(paragraphs)


_LANGUAGES = {
    "english": "en",
    "french": "fr",
    "german": "de",
    "spanish": "es",
    "italian": "it",
    "portuguese": "pt",
    "dutch": "nl",
    "latin": "la",
    "finnish": "fi",
    "swedish": "sv",
    "danish": "da",
    "norwegian": "no",
    "russian": "ru",
    "chinese": "zh",
    "japanese": "ja",
    "greek": "el",
    "polish": "pl",
    "hungarian": "hu",
    "esperanto": "eo",
}


def _gutenberg_metadata(header: str) -> dict[str, str]:
    """``title``/``author``/``language`` from "Title:", "Author:", "Language:" lines (continuations
    joined)."""
    found: dict[str, str] = {}
    lines = header.splitlines()
    for i, line in enumerate(lines):
        match = re.match(r"^\s*(Title|Author|Language)\s*:\s*(.*\S)\s*$", line)
        if not match or match.group(1).lower() in found:
            continue
        value = match.group(2)
        for follow in lines[i + 1 :]:
            if not follow.strip() or not follow.startswith((" ", "\t")):
                break
            value += " " + follow.strip()
        found[match.group(1).lower()] = _clean_inline(value)
    if "language" in found:
        found["language"] = _LANGUAGES.get(found["language"].split()[0].lower(), found["language"])
    return found


# --- plain text: blocks, headings, table of contents -----------------------------------------------

# A block is ``(blank_lines_before, lines)``: lines are the raw (unstripped) lines of one paragraph.
_Block = tuple[int, tuple[str, ...]]

_ILLUSTRATION = re.compile(r"\[Illustrations?(?:[:.][^\]]*)?\]", re.IGNORECASE)
_WORD_NUMBERS = (
    "one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|"
    "sixteen|seventeen|eighteen|nineteen|twenty|first|second|third|fourth|fifth|sixth|seventh|"
    "eighth|ninth|tenth|last"
)
_LABEL = re.compile(
    rf"^(?:chapter|book|part|letter|stave|canto)\s+(?:\d+|[ivxlcdm]+|{_WORD_NUMBERS})\b(?P<rest>.*)$",
    re.IGNORECASE,
)
_BARE_NUMBER = re.compile(
    r"^(?:(?=[IVXLCDM])M{0,4}(?:CM|CD|D?C{0,3})(?:XC|XL|L?X{0,3})(?:IX|IV|V?I{0,3})|\d{1,3})\.?$"
)
_NAMED = re.compile(
    r"^(?:prologue|epilogue|preface|introduction|conclusion|afterword|foreword|postscript|appendix|"
    r"envoi|l'envoi|finale)\.?$",
    re.IGNORECASE,
)
_SMALL_WORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "nor",
        "but",
        "of",
        "in",
        "on",
        "at",
        "to",
        "by",
        "for",
        "with",
        "from",
        "into",
        "upon",
        "as",
        "o",
    ]
)
_CONTENTS = frozenset({"contents", "table of contents", "the contents", "list of contents"})


def _label_rest(title: str) -> str:
    """What follows a "Chapter N"-style label in ``title`` ("" when it has no label)."""
    m = _LABEL.match(title)
    return m["rest"] if m else ""


def _text_blocks(body: str) -> list[_Block]:
    """Paragraph blocks of a text: runs of non-blank lines, with the count of blank lines before each."""
    blocks: list[_Block] = []
    blank, lines = 0, []
    for line in body.split("\n"):
        if line.strip():
            lines.append(line.rstrip())
            continue
        if lines:
            blocks.append((blank, tuple(lines)))
            blank, lines = 0, []
        blank += 1
    if lines:
        blocks.append((blank, tuple(lines)))
    return blocks


def _is_caps_title(line: str) -> bool:
    """An all-caps title line: words in capitals except short/small words, which may be lower-case
    ("The DEATH of the HEN", "The FISHERMAN and his WIFE"); at least half of the letters capitals."""
    text = re.sub(r"\([^)]*\)", " ", line).strip()
    words = re.findall(r"[^\W\d_]+", text)
    if not words or len(text) > 80 or re.search(r"\S\s{3,}\S", text):
        return False
    if not any(len(w) >= 3 and w.isupper() for w in words) or _norm_key(text) in {"the end", "finis", "end"}:
        return False
    upper = sum(len(w) for w in words if w.isupper())
    return upper * 2 >= sum(len(w) for w in words) and all(
        w.isupper() or len(w) <= 3 or w.lower() in _SMALL_WORDS for w in words
    )


def _heading_kind(line: str) -> str | None:
    """Classify one raw line: "label" (CHAPTER n...), "number" (bare I./XVI/12), "named"
    (Epilogue...), "caps" (all-caps title), or None for ordinary text."""
    if re.search(r"\S\s{3,}\S", line.strip()):
        return None  # a table row ("TITLE-PAGE.        PAGE")
    line = _clean_inline(line)
    if not line or len(line) > 100:
        return None
    if _LABEL.match(line):
        return "label"
    if _BARE_NUMBER.match(line):
        return "number"
    if _NAMED.match(line):
        return "named"
    if _is_caps_title(line):
        return "caps"
    return None


def _is_title_line(line: str) -> bool:
    """A short title-case line usable as the title after a bare number ("Down the Rabbit-Hole")."""
    line = _clean_inline(line)
    words = re.findall(r"[^\W\d_]+(?:['’-][^\W\d_]+)*", line)
    if not words or len(line) > 60 or len(words) > 10 or line[:1] in "\"'“‘(":
        return False
    if line.endswith((",", ";", ":")):
        return False
    return all(w[0].isupper() for w in words if len(w) >= 4 or w.lower() not in _SMALL_WORDS)


def _joined_title(label: str, title: str) -> str:
    """``"I" + "Introduction"`` -> ``"I. Introduction"``; ``"CHAPTER I." + "..."`` -> ``"CHAPTER I. ..."``."""
    return f"{label} {title}" if label.endswith((".", ":", "—", "-")) else f"{label}. {title}"


def _block_text(block: _Block) -> str:
    return _unwrapped(line.strip() for line in block[1])


def _is_prose_block(block: _Block) -> bool:
    """Running text (ends a table of contents): 25+ words, long lines, mostly lower-case."""
    text = _block_text(block)
    lines = block[1]
    mean_len = sum(len(line.strip()) for line in lines) / len(lines)
    return len(text.split()) >= 25 and mean_len >= 40 and _is_prose(text)


def _toc_runs(toc_blocks: Sequence[_Block]) -> list[tuple[int, str]]:
    """Entry candidates of a table of contents: runs of 1-3 consecutive lines inside one block,
    as ``(position of the run's last line, normalised text)``, in reading order."""
    runs: list[tuple[int, str]] = []
    position = 0
    for _, lines in toc_blocks:
        for i in range(len(lines)):
            for k in range(1, 4):
                if i + k <= len(lines):
                    runs.append((position + i + k - 1, _norm_key(" ".join(lines[i : i + k]))))
        position += len(lines)
    return sorted(runs)


def _toc_span(blocks: Sequence[_Block]) -> tuple[int, int] | None:
    """``(start, end)`` block indices of a table of contents (a CONTENTS heading and its entries), or None."""
    for start, block in enumerate(blocks):
        if len(block[1]) != 1 or _norm_key(block[1][0]) not in _CONTENTS:
            continue
        end = start + 1
        keys: set[str] = set()
        while end < len(blocks) and not _is_prose_block(blocks[end]):
            key = _norm_key(_block_text(blocks[end]))
            pair = key + " " + _norm_key(_block_text(blocks[end + 1])) if end + 1 < len(blocks) else ""
            if keys and (key in keys or pair in keys):
                break  # the body starts: a heading that repeats an entry
            keys.update(text for _, text in _toc_runs([blocks[end]]))
            end += 1
        if end - start >= 2 and sum(len(b[1]) for b in blocks[start + 1 : end]) >= 2:
            return start, end
    return None


def _toc_headings(blocks: Sequence[_Block], toc_blocks: Sequence[_Block]) -> dict[int, tuple[int, str]]:
    """Headings that match the table of contents in order: ``{block index: (blocks used, title)}``."""
    runs = _toc_runs(toc_blocks)
    headings: dict[int, tuple[int, str]] = {}
    pointer = -1  # position (line index) of the last matched entry
    i = 0
    while i < len(blocks):
        options = []
        if len(blocks[i][1]) <= 3:
            first = _block_text(blocks[i])
            if i + 1 < len(blocks) and len(blocks[i + 1][1]) == 1 and len(first) <= 20:
                second = _block_text(blocks[i + 1])
                options.append((2, _norm_key(first + " " + second), _joined_title(first, second)))
            options.append((1, _norm_key(first), first))
        matched = False
        for used, key, title in options:
            hit = next((pos for pos, text in runs if pos > pointer and text == key), None)
            if key and hit is not None:
                headings[i] = (used, title)
                pointer, matched = hit, True
                i += used
                break
        if not matched:
            i += 1
    return headings


def _block_heading(blocks: Sequence[_Block], i: int, strict: bool) -> tuple[int, str] | None:
    """``(blocks used, title)`` when block ``i`` is a heading by pattern (0 used: heading line + text).

    Headings must be set off by 2+ blank lines; with ``strict`` False, "CHAPTER n" labels need not be.
    """
    blank, lines = blocks[i]
    first = _clean_inline(lines[0])
    kind = _heading_kind(lines[0])
    set_off = blank >= 2 or i == 0
    if kind == "label" and strict and not set_off:
        return None
    if kind == "label" and len(lines) > 3:
        return 0, first  # "CHAPTER I." followed by text in the same block
    if kind == "label":
        title = _block_text(blocks[i])
    elif kind in ("number", "named") and len(lines) == 1 and set_off:
        title = first
    elif kind == "caps" and set_off and len(lines) <= 3 and all(_is_caps_title(x) for x in lines):
        return 1, _block_text(blocks[i])
    else:
        return None
    bare = kind == "number" or (kind == "label" and not _label_rest(title).strip(" .:"))
    if bare and i + 2 < len(blocks) and len(blocks[i + 1][1]) == 1:
        subtitle = blocks[i + 1][1][0]
        if _is_title_line(subtitle) and _heading_kind(subtitle) not in ("label", "number"):
            return 2, _joined_title(title, _clean_inline(subtitle))
    return 1, title


def _pattern_headings(blocks: Sequence[_Block]) -> dict[int, tuple[int, str]]:
    """Headings found by pattern (see the module docstring): ``{block index: (blocks used, title)}``.

    When fewer than two headings are set off by blank lines, "CHAPTER n" labels count anywhere.
    """
    for strict in (True, False):
        headings: dict[int, tuple[int, str]] = {}
        i = 0
        while i < len(blocks):
            found = _block_heading(blocks, i, strict)
            if found:
                headings[i] = found
            i += max(found[0], 1) if found else 1
        if len(headings) >= 2:
            break
    return headings


def _text_sections(body: str, book_title: str) -> list[tuple[str, list[str]]]:
    """A Gutenberg-stripped text cut into ``(title, paragraphs)`` sections at its headings."""
    blocks = _text_blocks(_ILLUSTRATION.sub("", body))
    span = _toc_span(blocks)
    headings: dict[int, tuple[int, str]] = {}
    if span:
        toc_blocks = blocks[span[0] + 1 : span[1]]
        blocks = blocks[: span[0]] + blocks[span[1] :]
        headings = _toc_headings(blocks, toc_blocks)
        entries = sum(len(b[1]) for b in toc_blocks)
        if len(headings) < max(2, entries // 2):
            headings = {}
    by_pattern = not headings
    if by_pattern:
        headings = _pattern_headings(blocks)
    sections: list[tuple[str, list[str]]] = [(book_title, [])]
    i = 0
    while i < len(blocks):
        if _is_transcriber_note(blocks[i]):
            sections.append(("", []))  # editorial, not the book: dropped up to the next heading
            i += 1
            continue
        if i in headings:
            used, title = headings[i]
            sections.append((title, []))
            if used == 0:  # heading line followed by text in the same block
                sections[-1][1].append(_unwrapped(x.strip() for x in blocks[i][1][1:]))
                used = 1
            i += used
            continue
        sections[-1][1].append(_block_text(blocks[i]))
        i += 1
    sections = _merged_headings(sections) if by_pattern else sections
    return [(title, paragraphs) for title, paragraphs in sections if title]


def _is_transcriber_note(block: _Block) -> bool:
    """A "Transcriber's Notes:" label line (at the start of a block)."""
    first = block[1][0].strip()
    return len(first) <= 40 and re.match(r"(original )?transcriber s notes?\b", _norm_key(first)) is not None


def _merged_headings(sections: list[tuple[str, list[str]]]) -> list[tuple[str, list[str]]]:
    """A lone empty heading directly followed by a heading with text is its prefix ("HOW MRS FOX MARRIED
    AGAIN" + "FIRST VERSION."); runs of empty headings (a contents list) are left alone."""
    out = list(sections[:1])
    for k in range(1, len(sections)):
        title, paragraphs = sections[k]
        prev_title, prev_paragraphs = out[-1]
        lone = len(out) >= 2 and bool(out[-2][1]) and not prev_paragraphs
        if lone and paragraphs:
            out[-1] = (_joined_title(prev_title, title), paragraphs)
            continue
        out.append((title, paragraphs))
    return out


def _text_book(source_path: str, data: bytes) -> ParsedBook:
    text = _decoded_text(data, source_path).replace("\r\n", "\n").replace("\r", "\n")
    header, body = _gutenberg_split(text)
    meta = _gutenberg_metadata(header)
    title = meta.get("title") or _storable(Path(source_path).stem)
    chapters = _checked_chapters(_book_chapters(_text_sections(body, title)), source_path)
    return ParsedBook(
        source_path=source_path,
        format="txt",
        title=title,
        author=meta.get("author") or "Unknown",
        language=meta.get("language") or "und",
        chapters=chapters,
    )


# --- EPUB: container checks ------------------------------------------------------------------------

_FONT_OBFUSCATION = frozenset({"http://www.idpf.org/2008/embedding", "http://ns.adobe.com/pdf/enc#RC"})
_FONT_SUFFIXES = (".otf", ".ttf", ".woff", ".woff2", ".eot")


_XML_SUFFIXES = (".xml", ".opf", ".ncx", ".xhtml", ".html", ".htm", ".svg", ".smil")
_ENTITY_DECLARATIONS = tuple("<!ENTITY".encode(codec) for codec in ("utf-8", "utf-16-le", "utf-16-be"))


def _epub_container_problem(zf: zipfile.ZipFile, max_bytes: int = MAX_BOOK_BYTES) -> str | None:
    """Why a zip cannot be read as a (DRM-free, bounded, entity-free) EPUB, or None."""
    names = set(zf.namelist())
    if "META-INF/container.xml" not in names:
        return "a zip archive but not an EPUB (no META-INF/container.xml)"
    unpacked = sum(info.file_size for info in zf.infolist())
    if unpacked > ZIP_EXPANSION * max_bytes:
        return (
            f"its contents unpack to {_megabytes(unpacked)}, more than {ZIP_EXPANSION} x the "
            f"{_megabytes(max_bytes)} limit (max_book_bytes)"
        )
    if "mimetype" in names:
        mimetype = zf.read("mimetype").decode("ascii", "replace").strip()
        if mimetype != "application/epub+zip":
            return f"a zip archive but not an EPUB (mimetype is {mimetype!r})"
    if "META-INF/rights.xml" in names:
        return "DRM-protected EPUB (META-INF/rights.xml); Folio reads only DRM-free books"
    entities = _entity_document(zf)
    if entities:
        return f"refused: {entities!r} declares XML entities (<!ENTITY>); entity expansion is not allowed"
    if "META-INF/encryption.xml" in names and _encrypts_content(zf.read("META-INF/encryption.xml")):
        return "DRM-protected EPUB (META-INF/encryption.xml encrypts its content documents)"
    container = _xml_root(zf.read("META-INF/container.xml"))
    rootfile = None
    if container is not None:
        rootfile = next(
            (el.get("full-path") for el in container.iter() if _local(el.tag) == "rootfile"), None
        )
    if not rootfile:
        return "not a valid EPUB: META-INF/container.xml names no OPF package document"
    if unquote(rootfile) not in names:
        return f"not a valid EPUB: the OPF package document {rootfile!r} is missing"
    package = _xml_root(zf.read(unquote(rootfile)))
    if package is None or not any(_local(el.tag) == "itemref" for el in package.iter()):
        return f"not a valid EPUB: the spine of {rootfile!r} lists no documents (nothing to read)"
    return None


def _entity_document(zf: zipfile.ZipFile) -> str | None:
    """The first XML document of the zip that declares an entity (``<!ENTITY``), or None."""
    for info in zf.infolist():
        if info.filename.lower().endswith(_XML_SUFFIXES):
            data = zf.read(info)
            if any(marker in data for marker in _ENTITY_DECLARATIONS):
                return info.filename
    return None


def _encrypts_content(encryption_xml: bytes) -> bool:
    """True when ``encryption.xml`` encrypts anything but obfuscated fonts."""
    root = _xml_root(encryption_xml)
    if root is None:
        return True
    for data in (el for el in root.iter() if _local(el.tag) == "EncryptedData"):
        algorithm = next(
            (el.get("Algorithm", "") for el in data.iter() if _local(el.tag) == "EncryptionMethod"), ""
        )
        uri = next((el.get("URI", "") for el in data.iter() if _local(el.tag) == "CipherReference"), "")
        if algorithm not in _FONT_OBFUSCATION or not uri.lower().endswith(_FONT_SUFFIXES):
            return True
    return False


def _local(tag: Any) -> str:
    return etree.QName(tag).localname if isinstance(tag, str) else ""


def _xml_root(data: bytes) -> etree._Element | None:
    parser = etree.XMLParser(recover=True, resolve_entities=False, no_network=True, huge_tree=True)
    try:
        return etree.fromstring(data, parser=parser)
    except etree.XMLSyntaxError:
        return None


# --- EPUB: documents to blocks ---------------------------------------------------------------------

# A block is ``(kind, text)`` with kind "h" (a heading element) or "p" (anything else).
_HtmlBlock = tuple[str, str]

_BLOCK_TAGS = frozenset(
    [
        "address",
        "article",
        "aside",
        "blockquote",
        "body",
        "caption",
        "center",
        "dd",
        "div",
        "dl",
        "dt",
        "figcaption",
        "footer",
        "form",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "header",
        "hr",
        "li",
        "main",
        "ol",
        "p",
        "pre",
        "section",
        "table",
        "tbody",
        "td",
        "th",
        "thead",
        "tfoot",
        "tr",
        "ul",
    ]
)
_SKIP_TAGS = frozenset(
    [
        "script",
        "style",
        "head",
        "title",
        "img",
        "svg",
        "math",
        "figure",
        "object",
        "video",
        "audio",
        "iframe",
        "nav",
        "template",
    ]
)
_SKIP_TYPES = frozenset(
    [
        "cover",
        "titlepage",
        "halftitlepage",
        "seriespage",
        "imprint",
        "colophon",
        "copyright-page",
        "toc",
        "landmarks",
        "loi",
        "lot",
        "page-list",
        "pagebreak",
        "noteref",
    ]
)
_SKIP_CLASSES = frozenset({"pagenum", "pageno", "page-number"})
_EPUB_TYPE = "{http://www.idpf.org/2007/ops}type"


def _html_root(content: bytes) -> etree._Element | None:
    """Parse an (X)HTML document: as XML (named HTML entities made numeric), else with the HTML parser."""

    def numeric(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in ("amp", "lt", "gt", "quot", "apos") or name not in html.entities.name2codepoint:
            return match.group(0)
        return f"&#{html.entities.name2codepoint[name]};"

    declared = re.search(rb"""^\s*<\?xml[^>]*encoding=["']([A-Za-z0-9._-]+)""", content)
    encoding = "utf-16" if content.startswith((b"\xff\xfe", b"\xfe\xff")) else "utf-8-sig"
    try:
        text = content.decode(declared.group(1).decode() if declared else encoding)
    except (LookupError, UnicodeDecodeError):
        text = content.decode("utf-8", "replace")
    text = re.sub(r"^\s*<\?xml[^>]*\?>", "", text.lstrip("\ufeff"))
    text = re.sub(r"&([A-Za-z][A-Za-z0-9]*);", numeric, text)
    try:
        root = etree.fromstring(
            text.encode("utf-8"), etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=True)
        )
    except etree.XMLSyntaxError:
        root = None
    if root is None:
        try:
            root = lxml_html.document_fromstring(
                text.encode("utf-8"), parser=lxml_html.HTMLParser(encoding="utf-8")
            )
        except (etree.ParserError, ValueError):
            return None
    return root


def _is_skipped(el: etree._Element) -> bool:
    types = (el.get(_EPUB_TYPE) or el.get("epub:type") or "").split()
    roles = (el.get("role") or "").replace("doc-", "").split()
    classes = (el.get("class") or "").split()
    return (
        _local(el.tag).lower() in _SKIP_TAGS
        or el.get("hidden") is not None
        or any(t.split(":")[-1] in _SKIP_TYPES for t in types + roles)
        or any(c in _SKIP_CLASSES for c in classes)
    )


def _html_blocks(content: bytes) -> tuple[list[_HtmlBlock], dict[str, int]]:
    """A document's text blocks in order and ``{element id: index of the first block at or after it}``."""
    root = _html_root(content)
    blocks: list[_HtmlBlock] = []
    ids: dict[str, int] = {}
    if root is None:
        return blocks, ids
    body = next((el for el in root.iter() if _local(el.tag).lower() == "body"), root)
    buffer: list[str] = []
    kinds: list[str] = ["p"]

    def flush() -> None:
        text = _clean_inline("".join(buffer))
        buffer.clear()
        if text:
            blocks.append((kinds[-1], text))

    def walk(el: etree._Element, skipped: bool) -> None:
        tag = _local(el.tag).lower()
        is_block = tag in _BLOCK_TAGS
        if is_block:
            flush()
        if el.get("id") is not None:
            ids.setdefault(el.get("id"), len(blocks))
        skipped = skipped or _is_skipped(el)
        if is_block:
            kinds.append("h" if re.fullmatch(r"h[1-6]", tag) else "p")
        if tag == "br" and not skipped:
            buffer.append(" ")
        if el.text and not skipped and isinstance(el.tag, str):
            buffer.append(el.text)
        for child in el:
            walk(child, skipped)
            if child.tail and not skipped:
                buffer.append(child.tail)
        if is_block:
            flush()
            kinds.pop()

    walk(body, False)
    flush()
    return blocks, ids


# --- EPUB: table of contents -----------------------------------------------------------------------

# A TOC node is ``(title, href or "", children)``.
_TocNode = tuple[str, str, tuple[Any, ...]]


def _toc_nodes(toc: Any) -> tuple[_TocNode, ...]:
    """ebooklib's ``book.toc`` (Links, Sections and ``(Section, children)`` pairs) as plain tuples."""
    nodes: list[_TocNode] = []
    for entry in toc or ():
        if isinstance(entry, tuple | list) and len(entry) == 2:
            head, children = entry
            nodes.append(
                (_clean_inline(head.title or ""), getattr(head, "href", "") or "", _toc_nodes(children))
            )
        else:
            nodes.append(
                (_clean_inline(getattr(entry, "title", "") or ""), getattr(entry, "href", "") or "", ())
            )
    return tuple(nodes)


def _doc_of(href: str) -> str:
    return _norm_path(unquote(href.split("#", 1)[0]))


def _norm_path(path: str) -> str:
    parts: list[str] = []
    for part in PurePosixPath(path).parts:
        if part == "..":
            if parts:
                parts.pop()
        elif part not in (".", "/"):
            parts.append(part)
    return "/".join(parts)


def _toc_starts(nodes: Sequence[_TocNode]) -> list[tuple[str, str]]:
    """The ``(title, href)`` entries that start chapters, in TOC order (rule in the module docstring)."""
    level = _linked(nodes)
    starts: list[tuple[str, str]] = []
    for title, href, children in level:
        starts.append((title, href))
        child_docs = {_doc_of(child_href) for _, child_href, _ in _linked(children)}
        if children and (len(level) == 1 or child_docs - {_doc_of(href)}):
            starts.extend(_toc_starts(children))
    return starts


def _linked(nodes: Sequence[_TocNode]) -> list[_TocNode]:
    """The nodes of one TOC level; a node without a link is a label and its children take its place."""
    out: list[_TocNode] = []
    for node in nodes:
        out.extend([node] if node[1] else _linked(node[2]))
    return out


# --- EPUB: the book --------------------------------------------------------------------------------


def _epub_metadata(book: Any, source_path: str) -> tuple[str, str, str]:
    def values(name: str) -> list[str]:
        return [_clean_inline(v) for v, _ in book.get_metadata("DC", name) if v and _clean_inline(v)]

    titles, creators, languages = values("title"), values("creator"), values("language")
    return (
        titles[0] if titles else _storable(Path(source_path).stem),
        " and ".join(dict.fromkeys(creators)) or "Unknown",
        languages[0] if languages else "und",
    )


def _read_epub(source_path: str, max_bytes: int = MAX_BOOK_BYTES) -> Any:
    """ebooklib's book after the container checks; every failure is a FolioError."""
    try:
        with zipfile.ZipFile(source_path) as zf:
            problem = _epub_container_problem(zf, max_bytes)
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError):
        raise FolioError(source_path, "truncated or corrupt zip/EPUB archive") from None
    if problem:
        raise FolioError(source_path, problem)
    from ebooklib import epub

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return epub.read_epub(source_path, options={"ignore_ncx": True})
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError):
        raise FolioError(source_path, "truncated or corrupt zip/EPUB archive") from None
    except KeyError as exc:
        raise FolioError(
            source_path, f"broken EPUB: a file listed in its package is missing ({exc})"
        ) from None
    except Exception as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise FolioError(source_path, f"broken EPUB: {reason}") from None


def _epub_sections(book: Any, fallback_title: str) -> list[tuple[str, list[str]]]:
    """The spine cut at the TOC starts into ``(title, paragraphs)``; leading headings are not text."""
    from ebooklib import epub

    nav_names = {item.get_name() for item in book.get_items() if isinstance(item, epub.EpubNav)}
    starts = _toc_starts(_toc_nodes(book.toc))
    targeted = {_doc_of(href) for _, href in starts}
    blocks: list[_HtmlBlock] = []
    offsets: dict[str, tuple[int, dict[str, int]]] = {}
    doc_titles: list[tuple[int, str]] = []
    for idref, linear in book.spine:
        item = book.get_item_with_id(idref)
        if item is None or item.get_name() in nav_names or not item.media_type.endswith(("html", "xml")):
            continue
        name = _norm_path(item.get_name())
        if str(linear).lower() == "no" and name not in targeted:
            continue
        doc_blocks, ids = _html_blocks(item.get_content())
        offsets[name] = (len(blocks), ids)
        heading = next((text for kind, text in doc_blocks if kind == "h"), "")
        doc_titles.append((len(blocks), heading or Path(name).stem))
        blocks.extend(doc_blocks)
    positions: list[tuple[int, str]] = []
    for title, href in starts:
        doc = _doc_of(href)
        if doc not in offsets:
            continue
        offset, ids = offsets[doc]
        fragment = unquote(href.split("#", 1)[1]) if "#" in href else ""
        positions.append((offset + ids.get(fragment, 0), title))
    if not positions:
        positions = doc_titles
    if not blocks:
        return []
    positions = sorted(dict(positions).items())  # one start per position: the deepest (last) entry
    bounds = [(0, fallback_title), *positions] if positions[0][0] > 0 else positions
    sections: list[tuple[str, list[str]]] = []
    for n, (start, title) in enumerate(bounds):
        end = bounds[n + 1][0] if n + 1 < len(bounds) else len(blocks)
        chunk = blocks[start:end]
        while chunk and chunk[0][0] == "h":
            chunk = chunk[1:]
        sections.append((title or fallback_title, [text for _, text in chunk]))
    return sections


def _epub_book(source_path: str, max_bytes: int = MAX_BOOK_BYTES) -> ParsedBook:
    book = _read_epub(source_path, max_bytes)
    title, author, language = _epub_metadata(book, source_path)
    try:
        sections = _epub_sections(book, title)
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError):
        raise FolioError(source_path, "truncated or corrupt zip/EPUB archive") from None
    chapters = _checked_chapters(_book_chapters(sections), source_path)
    return ParsedBook(
        source_path=source_path,
        format="epub",
        title=title,
        author=author,
        language=language,
        chapters=chapters,
    )
