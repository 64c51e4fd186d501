"""PDF page layout: text-layer pieces to reading-order lines, running headers/footers, printed page numbers.

Pure helpers over ``Piece`` boxes (PDF points, y upward) so they are tested without a PDF. ``page_lines``
groups one page's pieces into lines in reading order: a page with two columns (pieces that keep to the
left or right half, with few pieces across the middle) reads its full-width block at the top, then the
left column, then the right one, then any full-width block below. ``furniture`` finds the running headers
and footers (the top and bottom two lines of a page that are a bare page number, or whose letters repeat
on at least 3 pages); ``printed_numbers`` reads the page number those lines print.
``paragraphs`` joins a page's lines into paragraphs (a larger gap, an indent after a sentence end, or a
short line ending a sentence starts a new one; a hyphen at a line end followed by a lower-case letter is
dropped and the word joined). Limitations: three or more columns read as one; tables read row by row.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

_SOFT_HYPHEN = "\x02\u00ad"
_ROMAN = re.compile(r"^[ivxlc]+$", re.IGNORECASE)  # front matter: no D or M (not "cm")
_SENTENCE_END = re.compile(r"""[.!?:]["'”’)\]]*$""")
_EDGE_LINES = 2  # header/footer candidates: this many lines at the top and at the bottom of a page


@dataclass(frozen=True)
class Piece:
    """A run of text on one line of a page: its box and font size."""

    left: float
    bottom: float
    right: float
    top: float
    text: str
    size: float = 0.0


@dataclass(frozen=True)
class Line:
    """One line of a page in reading order."""

    left: float
    bottom: float
    right: float
    top: float
    text: str
    size: float
    column: int  # 0 full width or single column, 1 left, 2 right


def _height(p: Piece | Line) -> float:
    return max(p.top - p.bottom, 0.1)


def _columns(pieces: Sequence[Piece], left: float, right: float) -> list[int]:
    """Each piece's column: 1 left, 2 right, 0 across the middle; all 0 on a single-column page."""
    mid = (left + right) / 2
    gutter = 0.02 * (right - left)
    cols = [1 if p.right <= mid + gutter else 2 if p.left >= mid - gutter else 0 for p in pieces]
    n_left, n_right, n_across = cols.count(1), cols.count(2), cols.count(0)
    if n_left >= 5 and n_right >= 5 and n_across < 0.5 * (n_left + n_right):
        return cols
    return [0] * len(pieces)


def _joined(pieces: Sequence[Piece]) -> str:
    pieces = sorted(pieces, key=lambda p: p.left)
    out = pieces[0].text
    for prev, cur in itertools.pairwise(pieces):
        gap = cur.left - prev.right
        if gap < -0.5 * _height(cur) and cur.text.startswith(prev.text.strip()) and out.endswith(prev.text):
            out = out[: len(out) - len(prev.text)]  # overlapping boxes: the second holds the first's text
            gap = 0.0
        spaced = out.endswith(" ") or cur.text.startswith(" ")
        out += ("" if spaced or gap < 0.15 * _height(cur) else " ") + cur.text
    return " ".join(out.split())


def _lines_of(pieces: Sequence[Piece], column: int) -> list[Line]:
    """Pieces of one column grouped into lines (vertical overlap of half the smaller height), top down."""
    groups: list[list[Piece]] = []
    for piece in sorted(pieces, key=lambda p: (-p.top, p.left)):
        group = groups[-1] if groups else None
        if group is not None:
            low, high = min(p.bottom for p in group), max(p.top for p in group)
            overlap = min(high, piece.top) - max(low, piece.bottom)
            if overlap >= 0.5 * min(high - low, _height(piece)):
                group.append(piece)
                continue
        groups.append([piece])
    lines = []
    for group in groups:
        text = _joined(group)
        if text:
            lines.append(
                Line(
                    min(p.left for p in group),
                    min(p.bottom for p in group),
                    max(p.right for p in group),
                    max(p.top for p in group),
                    text,
                    max(p.size for p in group),
                    column,
                )
            )
    return lines


def page_lines(pieces: Sequence[Piece], left: float, right: float) -> list[Line]:
    """One page's lines in reading order (the column rule in the module docstring)."""
    pieces = [p for p in pieces if p.text.strip()]
    if not pieces:
        return []
    cols = _columns(pieces, left, right)
    if not any(cols):
        return _lines_of(pieces, 0)
    in_columns = [p for p, c in zip(pieces, cols, strict=True) if c]
    column_top = max(p.top for p in in_columns)
    across = [p for p, c in zip(pieces, cols, strict=True) if not c]
    above = [p for p in across if p.bottom >= column_top - 1]
    below = [p for p in across if p.bottom < column_top - 1]
    return [
        *_lines_of(above, 0),
        *_lines_of([p for p, c in zip(pieces, cols, strict=True) if c == 1], 1),
        *_lines_of([p for p, c in zip(pieces, cols, strict=True) if c == 2], 2),
        *_lines_of(below, 0),
    ]


def _shape(text: str) -> str:
    """A header line's letters: digits and punctuation dropped, lower-cased (``"58 FREE CULTURE"`` and
    ``"FREE CULTURE 60"`` are one shape)."""
    return " ".join(re.findall(r"[^\W\d_]+", text.lower()))


def is_page_number(text: str) -> bool:
    """A bare page number: arabic or roman, optionally with dashes or "Page"."""
    core = re.sub(r"^(page|p\.)\s*|[\s\-–—.]", "", text.strip(), flags=re.IGNORECASE)
    return bool(core) and (
        (core.isdigit() and len(core) <= 5) or (bool(_ROMAN.match(core)) and len(core) <= 7)
    )


def _edges(lines: Sequence[Line]) -> list[int]:
    n = len(lines)
    return sorted({*range(min(_EDGE_LINES, n)), *range(max(n - _EDGE_LINES, 0), n)})


def furniture(pages: Sequence[Sequence[Line]]) -> list[set[int]]:
    """For each page, the indexes of its lines that are running headers, footers or page numbers."""
    counts: Counter[str] = Counter()
    for lines in pages:
        counts.update({_shape(lines[i].text) for i in _edges(lines)} - {""})
    repeated = {s for s, n in counts.items() if n >= 3}
    out: list[set[int]] = []
    for lines in pages:
        out.append(
            {i for i in _edges(lines) if is_page_number(lines[i].text) or _shape(lines[i].text) in repeated}
        )
    return out


def printed_numbers(pages: Sequence[Sequence[Line]], dropped: Sequence[set[int]]) -> list[str]:
    """Each page's printed page number, read from its header/footer lines: a number that agrees with a
    neighbouring numbered page (numbers and page indexes step alike); a page between two agreeing numbered
    pages gets the number between; "" where none can be told."""
    found: dict[int, int] = {}
    for index, (lines, drop) in enumerate(zip(pages, dropped, strict=True)):
        for i in sorted(drop):
            text = lines[i].text
            match = re.match(r"^\s*(\d{1,5})\b", text) or re.search(r"\b(\d{1,5})\s*$", text)
            if match:
                found[index] = int(match.group(1))
                break
    keys = sorted(found)
    agreeing = {}
    for n, index in enumerate(keys):
        near = [keys[m] for m in (n - 1, n + 1) if 0 <= m < len(keys)]
        if any(found[j] - found[index] == j - index for j in near):
            agreeing[index] = found[index]
    out = [""] * len(pages)
    keys = sorted(agreeing)
    for index in keys:
        out[index] = str(agreeing[index])
    for a, b in itertools.pairwise(keys):
        if agreeing[b] - agreeing[a] == b - a:
            for index in range(a + 1, b):
                out[index] = str(agreeing[a] + index - a)
    return out


def _joins(prev: str, cur: str) -> str:
    """``prev`` and the next line of its paragraph joined (a line-end hyphen before a lower-case letter
    dropped)."""
    if prev and prev[-1] in _SOFT_HYPHEN:
        return prev[:-1] + cur
    if re.search(r"[^\W\d_]-$", prev) and cur[:1].islower():
        return prev[:-1] + cur
    return f"{prev} {cur}" if prev else cur


def _breaks(prev: Line, cur: Line, pitch: float, right: float, width: float) -> bool:
    gap = prev.bottom - cur.top
    if cur.column != prev.column or gap > 0.9 * pitch or gap < -2 * _height(cur):
        return True
    ended = bool(_SENTENCE_END.search(prev.text))
    indented = cur.left > prev.left + 0.02 * width and cur.column == prev.column
    short = prev.right < right - 0.12 * width
    return ended and (indented or short)


def paragraphs(lines: Sequence[Line], left: float, right: float) -> list[tuple[str, bool]]:
    """A page's body lines joined into paragraphs: ``(text, ends_a_sentence)``; the caller joins a page's
    first paragraph to the previous page's last one when that did not end a sentence."""
    if not lines:
        return []
    gaps = sorted(a.bottom - b.top for a, b in itertools.pairwise(lines) if a.column == b.column)
    pitch = max(gaps[len(gaps) // 2] if gaps else 0.0, 0.3 * _height(lines[0])) + 0.5 * _height(lines[0])
    col_right = {c: max(ln.right for ln in lines if ln.column == c) for c in {ln.column for ln in lines}}
    width = right - left
    out: list[str] = [_clean(lines[0].text)]
    for prev, cur in itertools.pairwise(lines):
        text = _clean(cur.text)
        if _breaks(prev, cur, pitch, col_right[prev.column], width / (2 if prev.column else 1)):
            out.append(text)
        else:
            out[-1] = _joins(out[-1], text)
    return [(p.replace("\x02", ""), bool(_SENTENCE_END.search(p))) for p in out if p.strip()]


def _clean(text: str) -> str:
    return " ".join(text.replace("\r", " ").replace("\n", " ").replace("\ufffe", "").split()) or ""


def continued(paragraph: str, after: str) -> str:
    """A paragraph continued on the next page: joined like two lines of one paragraph."""
    return _joins(paragraph, after)
