"""The FictionBook (FB2) reader: chapters from ``<section>``s with a ``<title>``, else from bold labels.

The main ``<body>`` (not ``name="notes"``) is read in order: a section's ``<title>`` is a heading whose level
is the section's depth; ``<p>``, ``<subtitle>``, ``<epigraph>``, ``<cite>`` and each poem ``<stanza>`` (its
``<v>`` lines joined) are paragraphs; note links (``<a type="note">``) are dropped. Chapters start at the
shallowest heading level used at least twice (``common.top_level``). A book whose sections have no titles
(a calibre conversion) takes its chapters from paragraphs that are only a bold "Book/Part/Chapter ..."
label (*History of Animals*' ``<p><strong>Book I</strong></p>``). Metadata: ``<title-info>``'s
``<book-title>``, ``<author>`` names and ``<lang>``; without a ``<description>``, the body's title.
Refused: XML entity declarations, XML that does not parse. Limitations: binaries (images) are ignored;
notes are not read.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from lxml import etree

from folio.nodes.core.types import FolioError, ParsedBook
from folio.nodes.readers.common import (
    book_chapters,
    checked_chapters,
    clean_inline,
    heading_sections,
    storable,
    top_level,
)
from folio.nodes.readers.markup import local

_PARAGRAPHS = frozenset({"p", "subtitle", "text-author", "stanza"})
_LABEL = re.compile(r"^(book|part|chapter|section|canto|act)\s+\S+\.?$", re.IGNORECASE)


def _text(el: Any) -> str:
    """An element's text without note links; a stanza's lines joined with spaces."""
    parts: list[str] = []

    def walk(node: Any) -> None:
        if not isinstance(node.tag, str):
            return
        if local(node.tag) == "a" and node.get("type") == "note":
            parts.append(node.tail or "")
            return
        parts.append(node.text or "")
        for child in node:
            walk(child)
            if local(node.tag) == "stanza":
                parts.append(" ")
        parts.append("" if node is el else node.tail or "")

    walk(el)
    return clean_inline("".join(parts))


def _is_label(p: Any) -> bool:
    """A paragraph that is only a bold "Book I"-style label."""
    strong = [c for c in p if isinstance(c.tag, str) and local(c.tag) == "strong"]
    own = (p.text or "").strip() + "".join((c.tail or "").strip() for c in p)
    return len(strong) == 1 and not own and bool(_LABEL.match(_text(p)))


def fb2_blocks(body: Any) -> list[tuple[int, str]]:
    """``(heading level or 0, text)`` of a body in order (level: the titled section's depth)."""
    blocks: list[tuple[int, str]] = []

    def walk(el: Any, depth: int) -> None:
        for child in el:
            if not isinstance(child.tag, str):
                continue
            name = local(child.tag)
            if name == "section":
                walk(child, depth + 1)
            elif name == "title" and depth > 0:
                blocks.append((depth, _text(child)))
            elif name in _PARAGRAPHS:
                blocks.append((-1 if name == "p" and _is_label(child) else 0, _text(child)))
            elif name in ("epigraph", "cite", "poem"):
                walk(child, depth)

    walk(body, 0)
    if not any(depth > 0 for depth, _ in blocks):  # no titled sections: the bold labels are the headings
        return [(1 if depth < 0 else 0, text) for depth, text in blocks if text]
    return [(max(depth, 0), text) for depth, text in blocks if text]


def _metadata(root: Any, body: Any, source_path: str) -> tuple[str, str, str]:
    info = next((el for el in root.iter() if isinstance(el.tag, str) and local(el.tag) == "title-info"), None)

    def first(parent: Any, name: str) -> Any:
        return next((el for el in parent.iter() if isinstance(el.tag, str) and local(el.tag) == name), None)

    title = author = language = ""
    if info is not None:
        title = _text(first(info, "book-title")) if first(info, "book-title") is not None else ""
        names = [
            " ".join(_text(n) for n in a if isinstance(n.tag, str) and local(n.tag) != "id" and _text(n))
            for a in info
            if isinstance(a.tag, str) and local(a.tag) == "author"
        ]
        author = " and ".join(n for n in names if n)
        language = _text(first(info, "lang")) if first(info, "lang") is not None else ""
    if not title:
        head = next((c for c in body if isinstance(c.tag, str) and local(c.tag) == "title"), None)
        lines = [_text(p) for p in head if isinstance(p.tag, str)] if head is not None else []
        title = lines[-1] if lines else ""
    return title or storable(Path(source_path).stem), author or "Unknown", language or "und"


def read(source_path: str, data: bytes, max_bytes: int) -> ParsedBook:
    """The format table's entry point: an FB2 book."""
    if b"<!ENTITY" in data:
        raise FolioError(source_path, "refused: the FB2 declares XML entities (<!ENTITY>)")
    parser = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=True, recover=False)
    try:
        root = etree.fromstring(data, parser=parser)
    except etree.XMLSyntaxError as exc:
        raise FolioError(source_path, f"broken FB2: the XML does not parse ({exc})") from None
    bodies = [el for el in root if isinstance(el.tag, str) and local(el.tag) == "body"]
    body = next((b for b in bodies if b.get("name") != "notes"), None)
    if body is None:
        raise FolioError(source_path, "broken FB2: no <body>")
    title, author, language = _metadata(root, body, source_path)
    blocks = fb2_blocks(body)
    sections = heading_sections(blocks, top_level(blocks) if any(d for d, _ in blocks) else 1, title)
    chapters = checked_chapters(book_chapters(sections), source_path)
    return ParsedBook(
        source_path=source_path,
        format="fb2",
        title=title,
        author=author,
        language=language,
        chapters=chapters,
    )
