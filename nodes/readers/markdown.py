"""The Markdown reader (CommonMark, parsed with ``markdown-it-py``, MIT): chapters at headings.

Headings (ATX ``#`` and setext) cut the book at the most used heading level among levels 1-3, and at any
shallower heading (so *Flatland*'s ``### PART I`` and ``## PART II`` both cut, and its ``###`` sections
are the chapters); deeper headings (epigraphs) stay in the text. Paragraphs, list items, quotes and
code blocks are paragraphs; emphasis marks, links' URLs and images are dropped. A ``# Title: X`` /
``## Author: Y`` pseudo-header, or YAML front matter with ``title:``/``author:``, gives the metadata.
Limitations: tables read row by row as text; HTML blocks inside Markdown are read as plain text.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

from folio.nodes.core.types import FolioError, ParsedBook
from folio.nodes.readers.common import (
    book_chapters,
    checked_chapters,
    clean_inline,
    heading_sections,
    storable,
)
from folio.nodes.readers.plain_text import decoded_text

INSTALL = "pip install markdown-it-py (or reinstall Folio: it is a core dependency)"
_FIELD = re.compile(r"^(title|author|language|lang)\s*:\s*(.+)$", re.IGNORECASE)


def _inline_text(token: Any) -> str:
    parts = []
    for child in token.children or ():
        if child.type in ("text", "code_inline"):
            parts.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            parts.append(" ")
    return clean_inline("".join(parts))


def markdown_blocks(text: str) -> list[tuple[int, str]]:
    """``(heading level or 0, text)`` for each heading and paragraph-like block, in order."""
    try:
        from markdown_it import MarkdownIt
    except ImportError:
        raise FolioError(
            "markdown-it-py", "Markdown support needs markdown-it-py: pip install markdown-it-py"
        ) from None
    tokens = MarkdownIt("commonmark").parse(text)
    blocks: list[tuple[int, str]] = []
    level = 0
    for token in tokens:
        if token.type == "heading_open":
            level = int(token.tag[1])
        elif token.type == "heading_close":
            level = 0
        elif token.type == "inline":
            content = _inline_text(token)
            if content:
                blocks.append((level, content))
        elif token.type in ("fence", "code_block") and token.content.strip():
            blocks.append((0, clean_inline(token.content)))
    return blocks


def chapter_level(blocks: list[tuple[int, str]]) -> int:
    """The most used heading level among 1-3 (the shallower on a tie); 1 without headings."""
    counts = Counter(depth for depth, _ in blocks if 1 <= depth <= 3)
    if not counts:
        return 1
    return max(counts, key=lambda depth: (counts[depth], -depth))


def _metadata(blocks: list[tuple[int, str]], text: str) -> dict[str, str]:
    meta: dict[str, str] = {}
    front = re.match(r"^---\n(.*?)\n---\n", text, re.DOTALL)
    lines = front.group(1).splitlines() if front else [t for depth, t in blocks[:6] if depth]
    for line in lines:
        match = _FIELD.match(line.strip())
        if match:
            meta.setdefault(
                match.group(1).lower().replace("lang", "language").replace("languageuage", "language"),
                clean_inline(match.group(2)),
            )
    return meta


def read(source_path: str, data: bytes, max_bytes: int) -> ParsedBook:
    """The format table's entry point: a Markdown book."""
    text = decoded_text(data, source_path).replace("\r\n", "\n").replace("\r", "\n")
    blocks = markdown_blocks(text)
    meta = _metadata(blocks, text)
    title = meta.get("title") or storable(Path(source_path).stem)
    sections = heading_sections(blocks, chapter_level(blocks), title)
    chapters = checked_chapters(book_chapters(sections), source_path)
    return ParsedBook(
        source_path=source_path,
        format="markdown",
        title=title,
        author=meta.get("author") or "Unknown",
        language=meta.get("language") or "und",
        chapters=chapters,
    )
