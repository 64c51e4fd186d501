"""The MOBI/AZW3 reader: a reader of the documented Mobipocket format (no third-party library).

A PalmDB file (``BOOKMOBI`` at offset 60) holds record 0 (PalmDOC header, MOBI header, EXTH metadata) and
text records compressed with PalmDOC LZ77; each text record's trailing entries (the MOBI header's extra
data flags) are cut before it is decompressed. A joint MOBI6 + KF8 file (EXTH 121 names the KF8 boundary)
is read through its MOBI6 half, whose markup carries the book's own table of contents: the guide's
``<reference type="toc" filepos=N>`` points at a list of ``<a filepos=N>`` links, and chapters start at
those byte positions (the text before the first is front matter). A KF8-only file (AZW3, header version 8)
is read from its KF8 text records, its chapters from its ``<h1>``-``<h6>`` headings. Without a table of
contents, chapters are the parts between ``<mbp:pagebreak>`` marks, titled by their first heading.
Metadata: EXTH 503 (title, else the header's full name), 100 (authors), 524 (language).

Refused in one line: Mobipocket DRM (PalmDOC encryption type 1 or 2), HUFF/CDIC compression (not read
yet), a truncated or damaged file. Limitations: KF8 skeleton/fragment reassembly is approximated by the
text records in order; images and tables' layout are not read.
"""

from __future__ import annotations

import bisect
import itertools
import re
import struct
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from lxml import html as lxml_html

from folio.nodes.core.types import FolioError, ParsedBook
from folio.nodes.readers.common import book_chapters, checked_chapters, clean_inline, storable
from folio.nodes.readers.epub import TocNode, toc_starts
from folio.nodes.readers.markup import html_blocks
from folio.nodes.readers.plain_text import without_gutenberg

_ENCODINGS = {1252: "cp1252", 65001: "utf-8"}
_TOC_REF = re.compile(rb"""<reference\b[^>]*\btype=["']?toc["']?[^>]*>""", re.IGNORECASE)
_FILEPOS = re.compile(rb"""filepos=["']?0*(\d+)""", re.IGNORECASE)
_LINK = re.compile(rb"""<a\b[^>]*\bfilepos=["']?0*(\d+)["']?[^>]*>(.*?)</a>""", re.IGNORECASE | re.DOTALL)
_PAGEBREAK = re.compile(rb"<mbp:pagebreak\s*/?>", re.IGNORECASE)


def _u16(data: bytes, at: int) -> int:
    return int(struct.unpack_from(">H", data, at)[0])


def _u32(data: bytes, at: int) -> int:
    return int(struct.unpack_from(">I", data, at)[0])


def palmdoc(data: bytes) -> bytes:
    """PalmDOC (LZ77) decompression."""
    out = bytearray()
    i, n = 0, len(data)
    while i < n:
        c = data[i]
        i += 1
        if c == 0 or 0x09 <= c <= 0x7F:
            out.append(c)
        elif c <= 0x08:
            out += data[i : i + c]
            i += c
        elif c >= 0xC0:
            out += b" " + bytes([c ^ 0x80])
        elif i < n:
            pair = (c << 8) | data[i]
            i += 1
            distance, length = (pair >> 3) & 0x07FF, (pair & 0x07) + 3
            if distance == 0 or distance > len(out):
                raise ValueError("bad back-reference")
            for _ in range(length):
                out.append(out[-distance])
    return bytes(out)


def _trailing_size(record: bytes, flags: int) -> int:
    """How many bytes of trailing entries end a text record (per the MOBI header's extra data flags)."""
    size = 0
    for bit in range(15, 0, -1):
        if flags & (1 << bit):
            value, shift, pos = 0, 0, len(record) - size - 1
            while pos >= 0:  # a backward-encoded variable-width integer
                byte = record[pos]
                value |= (byte & 0x7F) << shift
                shift += 7
                pos -= 1
                if byte & 0x80 or shift >= 28:
                    break
            size += value
    if flags & 1 and len(record) > size:
        size += (record[len(record) - size - 1] & 0x3) + 1
    return size


def _records(data: bytes) -> list[bytes]:
    count = _u16(data, 76)
    offsets = [_u32(data, 78 + 8 * i) for i in range(count)]
    if not offsets or any(b < a for a, b in itertools.pairwise(offsets)) or offsets[-1] > len(data):
        raise ValueError("bad record list")
    return [data[a:b] for a, b in zip(offsets, [*offsets[1:], len(data)], strict=True)]


def _exth(record0: bytes) -> dict[int, bytes]:
    header_length = _u32(record0, 20)
    found: dict[int, bytes] = {}
    if not _u32(record0, 128) & 0x40:
        return found
    at = 16 + header_length
    if record0[at : at + 4] != b"EXTH":
        return found
    pos = at + 12
    for _ in range(_u32(record0, at + 8)):
        kind, length = _u32(record0, pos), _u32(record0, pos + 4)
        if length < 8:
            break
        found.setdefault(kind, record0[pos + 8 : pos + length])
        pos += length
    return found


def _text(source_path: str, records: Sequence[bytes], first: int) -> tuple[bytes, str, dict[int, bytes]]:
    """The decompressed markup of the book whose record 0 is ``records[first]``, its encoding and EXTH."""
    record0 = records[first]
    compression, _, _, count, _, encryption = struct.unpack_from(">HHIHHH", record0, 0)
    if encryption in (1, 2):
        raise FolioError(
            source_path, f"Mobipocket DRM (encryption type {encryption}); Folio reads only DRM-free books"
        )
    if compression == 17480:
        raise FolioError(source_path, "HUFF/CDIC-compressed MOBI: Folio does not read this compression yet")
    if compression not in (1, 2):
        raise FolioError(source_path, f"unknown MOBI compression {compression}")
    header_length = _u32(record0, 20)
    encoding = _ENCODINGS.get(_u32(record0, 28), "cp1252")
    flags = _u16(record0, 0xF2) if header_length >= 0xE4 else 0
    out = bytearray()
    for record in records[first + 1 : first + 1 + count]:
        body = record[: len(record) - _trailing_size(record, flags)] if flags else record
        out += palmdoc(body) if compression == 2 else body
    return bytes(out), encoding, _exth(record0)


def _toc_region(markup: bytes) -> tuple[int, bytes] | None:
    """Where the book's table of contents is: the guide's ``toc`` reference, else the first page (between
    page breaks) holding 3 or more ``filepos`` links."""
    ref = _TOC_REF.search(markup)
    pos = _FILEPOS.search(ref.group(0)) if ref else None
    if pos is not None:
        start = int(pos.group(1))
        end = _PAGEBREAK.search(markup, start + 1)
        return start, markup[start : end.start() if end else len(markup)]
    bounds = [0, *(m.start() for m in _PAGEBREAK.finditer(markup)), len(markup)]
    for a, b in itertools.pairwise(bounds):
        if len(_LINK.findall(markup[a:b])) >= 3:
            return a, markup[a:b]
    return None


def _toc_tree(region: bytes, segment_of: Callable[[int], int]) -> tuple[TocNode, ...]:
    """The TOC's nested lists as EPUB-style nodes ``(title, "segN#pos", children)``: a node's "document"
    is the page-break segment its position falls in, so ``toc_starts`` applies the EPUB rules."""
    root = lxml_html.fragment_fromstring(_unprefixed(region), create_parent="div")

    def nodes(parent: Any) -> tuple[TocNode, ...]:
        out: list[TocNode] = []
        for li in parent.iter("li"):
            if next((a for a in li.iterancestors("li")), None) is not _outer(li, parent):
                continue
            link = next((a for a in li.iter("a") if a.get("filepos")), None)
            if link is None or not link.get("filepos", "").strip().isdigit():
                continue
            pos = int(link.get("filepos").strip())
            title = clean_inline(link.text_content())
            out.append((title, f"seg{segment_of(pos)}#{pos}", nodes(li)))
        return (out and tuple(out)) or ()

    return nodes(root)


def _outer(li: Any, parent: Any) -> Any:
    """The ``li`` that directly holds ``li`` under ``parent`` (None when ``parent`` is not an ``li``)."""
    return parent if parent.tag == "li" else None


def _toc_starts(markup: bytes) -> list[tuple[int, str]]:
    """``(byte position, title)`` of the chapters the book's table of contents starts (EPUB's rules)."""
    found = _toc_region(markup)
    if found is None:
        return []
    start, region = found
    breaks = [m.start() for m in _PAGEBREAK.finditer(markup)]
    tree = _toc_tree(region, lambda pos: bisect.bisect_right(breaks, pos))
    starts = [(int(href.split("#")[1]), title) for title, href in toc_starts(tree)]
    return [(p, t) for p, t in starts if p != start and p < len(markup)]


def _unprefixed(markup: bytes) -> bytes:
    return re.sub(rb"<(/?)(\w+):", rb"<\1\2-", markup)  # mbp:pagebreak and kin: no namespace prefix


def _sections(markup: bytes, encoding: str, title: str) -> list[tuple[str, list[str]]]:
    """The markup cut into ``(title, paragraphs)`` at the TOC's positions (else at page breaks)."""
    starts = sorted(dict(_toc_starts(markup)).items())
    html = markup.decode(encoding, "replace").encode("utf-8") if encoding != "utf-8" else markup
    if starts and encoding != "utf-8":  # positions count the original bytes: cut before re-encoding
        html = markup
    cuts: list[tuple[int, str]] = [(p, clean_inline(t)) for p, t in starts]
    if not cuts:
        cuts = [(m.end(), "") for m in _PAGEBREAK.finditer(markup)]
    bounds = [(0, title), *cuts]
    sections = []
    for n, (begin, name) in enumerate(bounds):
        end = bounds[n + 1][0] if n + 1 < len(bounds) else len(markup)
        piece = html[begin:end]
        if encoding != "utf-8":
            piece = piece.decode(encoding, "replace").encode("utf-8")
        blocks, _ = html_blocks(b"<html><body>" + _unprefixed(piece) + b"</body></html>")
        heading = next((text for kind, text in blocks if kind == "h"), "")
        while blocks and blocks[0][0] == "h":
            blocks = blocks[1:]
        sections.append((name or heading or title, [text for _, text in blocks]))
    return sections


def read(source_path: str, data: bytes, max_bytes: int) -> ParsedBook:
    """The format table's entry point: a MOBI, AZW3 or joint MOBI/KF8 book."""
    try:
        records = _records(data)
        markup, encoding, exth = _text(source_path, records, 0)
        full_name = records[0][_u32(records[0], 84) : _u32(records[0], 84) + _u32(records[0], 88)]
    except (struct.error, ValueError, IndexError):
        raise FolioError(source_path, "damaged or truncated MOBI file") from None
    if len(markup) > max_bytes:
        limit = f"{max_bytes:,}-byte limit (max_book_bytes)"
        raise FolioError(source_path, f"its text unpacks to more than the {limit}")

    def meta(kind: int) -> str:
        return clean_inline(exth.get(kind, b"").decode("utf-8", "replace"))

    name = clean_inline(full_name.decode(encoding, "replace"))
    title = meta(503) or name or storable(Path(source_path).stem)
    sections = without_gutenberg(_sections(markup, encoding, title))
    chapters = checked_chapters(book_chapters(sections), source_path)
    return ParsedBook(
        source_path=source_path,
        format="mobi",
        title=title,
        author=meta(100) or "Unknown",
        language=meta(524) or "und",
        chapters=chapters,
    )
