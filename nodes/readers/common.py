"""Helpers every reader shares: cleaning inline text, dropping front matter, page marks.

A reader turns a file into sections ``(title, paragraphs)`` (or, for a format with pages, paragraphs
with the pages they are on: ``(text, ((offset in text, page label), ...))``); ``book_chapters`` and
``located_chapters`` drop no-text
paragraphs, empty sections and leading front matter (chapters before the first with 100+ words of
prose), and ``checked_chapters`` refuses a book with no readable text.
"""

from __future__ import annotations

import os
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from folio.nodes.core.types import Citation, FolioError, Hit, RawChapter

# A paragraph and where its pages start in it: ``((0, "47"), (310, "48"))`` (empty without pages).
Located = tuple[str, tuple[tuple[int, str], ...]]


def storable(path: str) -> str:
    """``path`` as valid UTF-8 text: the bytes of a non-UTF-8 file name escaped as ``\\xNN``."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def megabytes(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n < 10e6 else f"{n / 1e6:.0f} MB"


# --- shared text helpers ---------------------------------------------------------------------------

_INVISIBLE = dict.fromkeys(map(ord, "\u00ad\u200b\u2060\ufeff"))
_WS = re.compile(r"\s+")
_HYPHEN_BREAK = re.compile(r"(?<=[^\W\d_])-\n(?=[a-z])")
_PROSE_MIN_WORDS = 8
_SUBSTANTIAL_WORDS = 100


def clean_inline(text: str) -> str:
    """Invisible format characters removed and whitespace runs collapsed to one space."""
    return _WS.sub(" ", text.translate(_INVISIBLE)).strip()


def unwrapped(lines: Iterable[str]) -> str:
    """One paragraph from hard-wrapped lines: joined with single spaces, whitespace collapsed; a line
    that ends in a hyphen after a letter joins the lower-case word the next line opens with ("candle-" /
    "light" -> "candle-light", not "candle- light": a hard-wrapped compound keeps its hyphen)."""
    return clean_inline(_HYPHEN_BREAK.sub("-", "\n".join(line.strip() for line in lines)))


def norm_key(text: str) -> str:
    """Lower-case letters and digits separated by single spaces (for comparing headings)."""
    folded = unicodedata.normalize("NFKD", text)
    folded = "".join(ch for ch in folded if not unicodedata.combining(ch)).lower()
    return " ".join(re.findall(r"[^\W_]+", folded))


def is_prose(paragraph: str) -> bool:
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


def is_substantial(paragraphs: Sequence[str]) -> bool:
    """At least 100 words in prose paragraphs."""
    return sum(len(p.split()) for p in paragraphs if is_prose(p)) >= _SUBSTANTIAL_WORDS


def book_chapters(sections: Sequence[tuple[str, Sequence[str]]]) -> tuple[RawChapter, ...]:
    """Sections to chapters: no-text paragraphs and empty sections dropped, leading front matter dropped."""
    return located_chapters([(title, [(p, ()) for p in paragraphs]) for title, paragraphs in sections])


def located_chapters(sections: Sequence[tuple[str, Sequence[Located]]]) -> tuple[RawChapter, ...]:
    """``book_chapters`` for paragraphs that know their page: each chapter keeps its page marks
    (``(offset in its text, page label)`` wherever the page changes; none when no paragraph has a page)."""
    kept = [
        (title, [lp for lp in located if any(ch.isalnum() for ch in lp[0])]) for title, located in sections
    ]
    kept = [(title, located) for title, located in kept if located]
    first = next((i for i, (_, located) in enumerate(kept) if is_substantial([p for p, _ in located])), 0)
    return tuple(
        RawChapter(title=title, text="\n\n".join(p for p, _ in located), pages=page_marks(located))
        for title, located in kept[first:]
    )


def page_marks(located: Sequence[Located]) -> tuple[tuple[int, str], ...]:
    """``(offset, page)`` where each new page starts in the paragraphs joined with blank lines."""
    marks: list[tuple[int, str]] = []
    offset = 0
    for paragraph, pages in located:
        for at, page in pages:
            if page and (not marks or marks[-1][1] != page):
                marks.append((offset + at, page))
        offset += len(paragraph) + 2
    return tuple(marks)


def page_span(marks: Sequence[tuple[int, str]], start: int, end: int) -> str:
    """The page (``"53"``) or page range (``"53-54"``) of chapter offsets ``start``:``end``; "" when the
    chapter has no pages."""
    first = last = ""
    for offset, page in marks:
        if offset <= start:
            first = page
        if offset < max(end, start + 1):
            last = page
    if not first and marks:
        first = marks[0][1]
    return first if last in ("", first) else f"{first}-{last}"


def checked_chapters(chapters: tuple[RawChapter, ...], source: str) -> tuple[RawChapter, ...]:
    if not chapters or not any(re.search(r"[^\W\d_]{2,}", c.text) for c in chapters):
        raise FolioError(source, "no readable text found in this book")
    return chapters


def heading_sections(
    blocks: Sequence[tuple[int, str]], level: int, title: str
) -> list[tuple[str, list[str]]]:
    """Blocks ``(heading level or 0 for a paragraph, text)`` cut into ``(title, paragraphs)`` at every
    heading of ``level`` or above; consecutive such headings make one title, deeper headings stay in the
    text as paragraphs; text before the first heading is a section titled ``title``."""
    sections: list[tuple[str, list[str]]] = [(title, [])]
    joining = False
    for depth, text in blocks:
        if 0 < depth <= level:
            if joining:
                sections[-1] = (f"{sections[-1][0]} {text}", sections[-1][1])
            else:
                sections.append((text, []))
            joining = True
        else:
            sections[-1][1].append(text)
            joining = False
    return sections


def top_level(blocks: Sequence[tuple[int, str]]) -> int:
    """The shallowest heading level used at least twice (a lone title above the chapters is skipped);
    6 when there is none."""
    counts = [sum(1 for depth, _ in blocks if depth == n) for n in range(7)]
    return next((n for n in range(1, 7) if counts[n] >= 2), 6)


def located_citation(citation: Citation, descriptor: Mapping[str, Any]) -> Citation:
    """A book citation with its book's title and its location: the page (range) of its span when its
    chapter has page marks, else its position in the book as a percentage of the book's characters
    (needs the descriptor's chapter ``offset`` and ``characters``; unchanged for other books)."""
    if citation.kind != "book":
        return citation
    page, percent = location(descriptor, citation.chapter_id, citation.start, citation.end)
    return replace(citation, book_title=str(descriptor.get("title") or ""), page=page, percent=percent)


def located_hit(hit: Hit, descriptor: Mapping[str, Any]) -> Hit:
    """A search hit located like a citation (``located_citation``): its book's title, page or percent."""
    page, percent = location(descriptor, hit.chapter_id, hit.start, hit.end)
    return replace(hit, book_title=str(descriptor.get("title") or ""), page=page, percent=percent)


def location(
    descriptor: Mapping[str, Any], chapter_id: str, start: int, end: int
) -> tuple[str, float | None]:
    """``(page, percent)`` of a span of one chapter of a book: the page (range) when the chapter has page
    marks, else the span's position in the book as a percentage of its characters, else ``("", None)``."""
    chapters = descriptor.get("chapters") or []
    chapter = next((c for c in chapters if c.get("chapter_id") == chapter_id), None)
    if chapter is not None and chapter.get("pages"):
        marks = [(int(offset), str(label)) for offset, label in chapter["pages"]]
        return page_span(marks, start, end), None
    if chapter is not None and descriptor.get("characters") and "offset" in chapter:
        return "", round(100.0 * (int(chapter["offset"]) + start) / int(descriptor["characters"]), 1)
    return "", None


def location_text(citation: Citation) -> str:
    """How a located book citation reads: "Free Culture, ch. 3: Catalogs, p. 48" ("" when not located)."""
    if citation.kind != "book" or not citation.book_title:
        return ""
    parts = [citation.book_title, f"ch. {citation.chapter_title}" if citation.chapter_title else ""]
    if citation.page:
        pages = citation.page.replace("pdf ", "PDF page ")
        parts.append(pages if pages.startswith("PDF") else f"{'pp' if '-' in pages else 'p'}. {pages}")
    elif citation.percent is not None:
        parts.append(f"{citation.percent:g}%")
    return ", ".join(p for p in parts if p)
