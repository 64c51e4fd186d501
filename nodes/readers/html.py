"""The HTML reader: one (X)HTML file as a book, chapters cut at its headings.

Blocks come from ``markup.html_blocks`` (scripts, styles, images, figures and page furniture dropped);
chapters start at every heading of the shallowest level used at least twice (``<h2>`` in a Project
Gutenberg book whose ``<h1>`` is the title); consecutive headings make one title; deeper headings stay in
the text. A Project Gutenberg book loses its header and footer (the "*** START/END OF THE PROJECT
GUTENBERG EBOOK" markers), as the text reader does. Metadata: ``<title>`` (a Gutenberg "The Project
Gutenberg eBook of X, by Y" title gives X and Y), ``<meta name="author">``, ``<html lang>``.
Limitations: CSS-hidden text is read; a book split over several HTML files is read file by file.
"""

from __future__ import annotations

import re
from pathlib import Path

from lxml import etree

from folio.nodes.core.types import ParsedBook
from folio.nodes.readers.common import (
    book_chapters,
    checked_chapters,
    clean_inline,
    heading_sections,
    storable,
    top_level,
)
from folio.nodes.readers.markup import html_blocks, html_root, local
from folio.nodes.readers.plain_text import without_gutenberg

_PG_TITLE = re.compile(r"^The Project Gutenberg e-?Book of (.+?)(?:, by (.+))?$", re.IGNORECASE)


def _metadata(data: bytes, source_path: str) -> tuple[str, str, str]:
    root = html_root(data)
    title = author = language = ""
    if root is not None:
        for el in root.iter():
            name = local(el.tag).lower()
            if name == "title" and not title:
                title = clean_inline("".join(el.itertext()))
            elif name == "meta" and (el.get("name") or "").lower() in ("author", "dc.creator") and not author:
                author = clean_inline(el.get("content") or "")
            elif name == "html":
                language = el.get("lang") or el.get("{http://www.w3.org/XML/1998/namespace}lang") or ""
    match = _PG_TITLE.match(title)
    if match:
        title, author = match.group(1), author or (match.group(2) or "")
    return title or storable(Path(source_path).stem), author or "Unknown", language or "und"


def _prepared(data: bytes) -> bytes:
    """The document with figure captions and Project Gutenberg's header and footer elements removed, and
    drop-cap images (a one-letter ``alt``) replaced by their letter."""
    root = html_root(data)
    if root is None:
        return data
    for el in list(root.iter()):
        if not isinstance(el.tag, str):
            continue
        classes = (el.get("class") or "").split()
        if "caption" in classes or el.get("id") in ("pg-header", "pg-footer"):
            _drop(el)
        elif local(el.tag).lower() == "img" and re.fullmatch(r"[^\W\d_]", el.get("alt") or ""):
            parent = el.getparent()
            if parent is not None:
                prev = el.getprevious()
                letter = (el.get("alt") or "") + (el.tail or "")
                if prev is not None:
                    prev.tail = (prev.tail or "") + letter
                else:
                    parent.text = (parent.text or "") + letter
                parent.remove(el)
    return bytes(etree.tostring(root, encoding="utf-8"))


def _drop(el: etree._Element) -> None:
    parent = el.getparent()
    if parent is None:
        return
    prev, tail = el.getprevious(), el.tail or ""
    if prev is not None:
        prev.tail = (prev.tail or "") + tail
    else:
        parent.text = (parent.text or "") + tail
    parent.remove(el)


def read(source_path: str, data: bytes, max_bytes: int) -> ParsedBook:
    """The format table's entry point: an HTML book."""
    title, author, language = _metadata(data, source_path)
    blocks, _ = html_blocks(_prepared(data), levels=True)
    leveled = [(int(kind[1]) if kind.startswith("h") else 0, text) for kind, text in blocks]
    sections = without_gutenberg(heading_sections(leveled, top_level(leveled), title))
    chapters = checked_chapters(book_chapters(sections), source_path)
    return ParsedBook(
        source_path=source_path,
        format="html",
        title=title,
        author=author,
        language=language,
        chapters=chapters,
    )
