"""The DOCX reader (Office Open XML word processing), with lxml on the package's XML: no Word library.

``word/document.xml`` is read in order: each ``<w:p>`` is a paragraph (runs' ``<w:t>`` joined, tabs and
breaks as spaces; tables' paragraphs in row order). A paragraph is a heading when its style is a heading
(``word/styles.xml``: a style named "heading N" or with an outline level, or "Title"), its level N.
Chapters start at the shallowest heading level used at least twice (``common.top_level``: the DOJ
handbook's 16 "heading 1" chapters), consecutive headings make one title, deeper headings stay as
paragraphs; a typed table of contents (TOC styles) is dropped. Metadata: ``docProps/core.xml``
(``dc:title``, ``dc:creator``, ``dc:language``). Refused in one line: a zip that is not a DOCX, contents
that unpack to more than ``ZIP_EXPANSION`` times ``max_book_bytes`` (a zip bomb), XML entity declarations,
a damaged zip. Limitations: headers, footers, footnotes, comments and text boxes are not read.
"""

from __future__ import annotations

import re
import zipfile
import zlib
from io import BytesIO
from pathlib import Path
from typing import Any

from lxml import etree

from folio.nodes.core.types import FolioError, ParsedBook
from folio.nodes.readers.common import (
    book_chapters,
    checked_chapters,
    clean_inline,
    heading_sections,
    megabytes,
    storable,
    top_level,
)
from folio.nodes.readers.markup import local

ZIP_EXPANSION = 4  # a DOCX's parts may unpack to at most this many times ``max_book_bytes``
_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"


def _xml(zf: zipfile.ZipFile, name: str) -> Any:
    data = zf.read(name)
    if b"<!ENTITY" in data:
        raise ValueError(f"{name} declares XML entities (<!ENTITY>)")
    return etree.fromstring(data, etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=True))


def heading_levels(styles: Any) -> dict[str, int]:
    """``{style id: heading level}`` from ``styles.xml`` (TOC styles get level -1: dropped)."""
    levels: dict[str, int] = {}
    for style in styles.iter(f"{_W}style"):
        sid = style.get(f"{_W}styleId") or ""
        name_el = style.find(f"{_W}name")
        name = (name_el.get(f"{_W}val") if name_el is not None else "") or ""
        outline_el = style.find(f"{_W}pPr/{_W}outlineLvl")
        outline = (outline_el.get(f"{_W}val") or "") if outline_el is not None else ""
        match = re.fullmatch(r"heading\s*([1-9])", name.strip(), re.IGNORECASE)
        if re.fullmatch(r"toc\s*\d*|toc heading", name.strip(), re.IGNORECASE):
            levels[sid] = -1
        elif match:
            levels[sid] = int(match.group(1))
        elif outline.isdigit() and int(outline) < 9:
            levels[sid] = int(outline) + 1
        elif name.strip().lower() == "title":
            levels[sid] = 1
    return levels


def _paragraph_text(p: Any) -> str:
    parts = []
    for el in p.iter():
        tag = local(el.tag) if isinstance(el.tag, str) else ""
        if tag == "t":
            parts.append(el.text or "")
        elif tag in ("tab", "br", "cr"):
            parts.append(" ")
    return clean_inline("".join(parts))


def docx_blocks(document: Any, levels: dict[str, int]) -> list[tuple[int, str]]:
    """``(heading level or 0, text)`` of each non-empty paragraph in order (TOC entries dropped)."""
    blocks: list[tuple[int, str]] = []
    body = document.find(f"{_W}body")
    for p in (body if body is not None else document).iter(f"{_W}p"):
        style = p.find(f"{_W}pPr/{_W}pStyle")
        level = levels.get(style.get(f"{_W}val") or "", 0) if style is not None else 0
        text = _paragraph_text(p)
        if text and level >= 0:
            blocks.append((level, text))
    return blocks


def _metadata(zf: zipfile.ZipFile, source_path: str) -> tuple[str, str, str]:
    values: dict[str, str] = {}
    if "docProps/core.xml" in zf.namelist():
        for el in _xml(zf, "docProps/core.xml").iter():
            if isinstance(el.tag, str) and el.text and el.text.strip():
                values.setdefault(local(el.tag), clean_inline(el.text))
    return (
        values.get("title") or storable(Path(source_path).stem),
        values.get("creator") or "Unknown",
        values.get("language") or "und",
    )


def _checked_zip(zf: zipfile.ZipFile, source_path: str, max_bytes: int) -> None:
    unpacked = sum(info.file_size for info in zf.infolist())
    if unpacked > ZIP_EXPANSION * max_bytes:
        raise FolioError(
            source_path,
            f"its contents unpack to {megabytes(unpacked)}, more than {ZIP_EXPANSION} x the "
            f"{megabytes(max_bytes)} limit (max_book_bytes)",
        )
    if "word/document.xml" not in zf.namelist():
        raise FolioError(source_path, "a zip archive but not a DOCX (no word/document.xml)")


def read(source_path: str, data: bytes, max_bytes: int) -> ParsedBook:
    """The format table's entry point: a DOCX document."""
    try:
        with zipfile.ZipFile(BytesIO(data)) as zf:
            _checked_zip(zf, source_path, max_bytes)
            levels = heading_levels(_xml(zf, "word/styles.xml")) if "word/styles.xml" in zf.namelist() else {}
            blocks = docx_blocks(_xml(zf, "word/document.xml"), levels)
            title, author, language = _metadata(zf, source_path)
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError):
        raise FolioError(source_path, "truncated or corrupt zip/DOCX archive") from None
    except (ValueError, etree.XMLSyntaxError) as exc:
        raise FolioError(source_path, f"broken DOCX: {str(exc).splitlines()[0]}") from None
    sections = heading_sections(blocks, top_level(blocks), title)
    chapters = checked_chapters(book_chapters(sections), source_path)
    return ParsedBook(
        source_path=source_path,
        format="docx",
        title=title,
        author=author,
        language=language,
        chapters=chapters,
    )
