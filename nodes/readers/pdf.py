"""The PDF reader (text layer), with PDFium through ``pypdfium2`` (Apache-2.0/BSD wheels with PDFium
inside: no system library, fast, reads page labels, outlines and text boxes; chosen over pypdf, which is
pure Python and several times slower, and PyMuPDF, which is AGPL).

Pages become lines in reading order (two columns read column by column, ``pdf_layout``); running headers,
footers and page numbers are removed; lines become paragraphs with hyphenated line ends joined. Chapters
come from the outline (bookmarks): its top-level entries, and the children of a top-level entry when the
outline is three levels deep (parts of chapters); deeper entries stay inside their chapter. Without an
outline, a heading is a short title of up to 3 capitalised lines followed by a "by Author" line (an
anthology; a title at the foot of a page whose by-line opens the next counts too), or a line set in a font
1.2 times the body's size (1.3 on OCR'd pages; a run of such lines over 20 words is a paragraph set large,
not a heading). Every paragraph knows its page: the PDF's page label when it has labels, else the number
printed in its header or footer, else the page's number in the file.

A PDF without a text layer (a scan, or text drawn as curves) is OCR'd when the optional extra
``folio[ocr]`` is installed (``readers.ocr``), else refused in one line saying what to do. Also refused in
one line: a password-protected or damaged PDF, more than ``MAX_PDF_PAGES`` pages. Limitations: tables
read row by row.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from folio.nodes.core.types import FolioError, ParsedBook
from folio.nodes.readers import ocr
from folio.nodes.readers.common import Located, checked_chapters, located_chapters, storable
from folio.nodes.readers.pdf_layout import (
    Line,
    Piece,
    continued,
    furniture,
    page_lines,
    paragraphs,
    printed_numbers,
)

MAX_PDF_PAGES = 20_000  # more pages than this is refused before any page is read
INSTALL = "pip install pypdfium2 (or reinstall Folio: it is a core dependency)"
_BY_LINE = re.compile(r"^(?:(?i:from|translated)\b[^.;]{0,80}?,?\s+)?(?i:by)\s+[A-Z][\w.'’·,\- ]{1,60}$")
_AND_LINE = re.compile(r"^and\s+[A-Z][\w.'’·\- ]{1,40}$")  # a by-line's second author on the next line
_HEADING_SIZE = 1.2
_OCR_HEADING_SIZE = 1.3  # OCR'd pages: box heights stand in for font sizes and vary more
_HEADING_WORDS = 20  # consecutive big-font lines holding more words than this are a paragraph, not a heading


def _pdfium() -> Any:
    try:
        import pypdfium2
    except ImportError:
        raise FolioError("pypdfium2", f"PDF support needs pypdfium2: {INSTALL}") from None
    return pypdfium2


def _document(source_path: str, data: bytes) -> Any:
    pdfium = _pdfium()
    try:
        return pdfium.PdfDocument(data)
    except pdfium.PdfiumError as exc:
        if "password" in str(exc).lower() or "security" in str(exc).lower():
            raise FolioError(source_path, "password-protected PDF: remove the password first") from None
        raise FolioError(source_path, f"damaged PDF: PDFium cannot open it ({exc})") from None


def _pieces(page: Any, raw: Any) -> tuple[list[Piece], float, float]:
    """A page's text pieces inside its crop box (printer's marks outside it dropped), and its left and
    right edge."""
    left, bottom, right, top = page.get_cropbox()
    textpage = page.get_textpage()
    pieces = []
    for i in range(textpage.count_rects()):
        x0, b, x1, t = textpage.get_rect(i)
        cx, cy = (x0 + x1) / 2, (b + t) / 2
        text = textpage.get_text_bounded(x0, b, x1, t)
        if not (left <= cx <= right and bottom <= cy <= top) or not any(ch.isalnum() for ch in text):
            continue  # outside the crop box (printer's marks), or an ornament
        index = raw.FPDFText_GetCharIndexAtPos(textpage.raw, x0 + 0.5, cy, 2.0, 2.0)
        size = raw.FPDFText_GetFontSize(textpage.raw, index) if index >= 0 else 0.0
        pieces.append(Piece(x0, b, x1, t, text, size))
    textpage.close()
    return pieces, left, right


def _outline(doc: Any) -> list[tuple[int, str, int, float | None]]:
    """The outline as ``(level, title, page index, top y or None)``, entries without a page dropped."""
    entries = []
    for item in doc.get_toc(max_depth=8):
        dest = item.get_dest()
        index = dest.get_index() if dest is not None else None
        if index is None:
            continue
        _mode, pos = dest.get_view()
        top = pos[1] if len(pos) >= 2 and pos[1] else None
        entries.append((item.level, " ".join(item.get_title().split()), index, top))
    return entries


def outline_starts(
    entries: Sequence[tuple[int, str, int, float | None]],
) -> list[tuple[str, int, float | None]]:
    """The outline entries that start chapters (rule in the module docstring)."""
    deep = any(level >= 2 for level, *_ in entries)
    tops = [e for e in entries if e[0] == 0]
    starts = []
    for level, title, index, top in entries:
        if title and (level == 0 or (level == 1 and (deep or len(tops) == 1))):
            starts.append((title, index, top))
    return starts


def page_labels(pdf_labels: Sequence[str], printed: Sequence[str]) -> list[str]:
    """Each page's label for citations: the PDF's own page label, else the number printed on the page,
    else ``"pdf N"`` (its number in the file) in a book that numbers other pages, or plain ``"N"`` in a
    book that prints no numbers at all."""
    numbered = any(pdf_labels) or any(printed)
    return [
        label or number or (f"pdf {i + 1}" if numbered else str(i + 1))
        for i, (label, number) in enumerate(zip(pdf_labels, printed, strict=True))
    ]


def _pdf_label(doc: Any, index: int) -> str:
    try:
        return str(doc.get_page_label(index) or "")
    except Exception:  # a broken label tree: no label
        return ""


def _heading_lines(lines: Sequence[Line], heading_size: float) -> set[int]:
    """Indexes of the lines that are a heading: a big-font line, or 1-3 short title lines in the by-line's
    font followed by a "by Author" line (and an "and Author" line after it)."""
    found = _big_lines(lines, heading_size)
    for i, line in enumerate(lines):
        if not _is_by_line(line):
            continue
        start = i
        while start > 0 and i - start < 3 and _is_title_line(lines[start - 1], line):
            start -= 1
        if start < i:
            more = (
                i + 1 < len(lines) and _AND_LINE.match(lines[i + 1].text) and _same_font(lines[i + 1], line)
            )
            found.update(range(start, i + (2 if more else 1)))
    return found


def _same_font(a: Line, b: Line) -> bool:
    return not (a.size and b.size) or abs(a.size - b.size) < 0.5


def _title_lines(lines: Sequence[Line], cut: int, title: str) -> set[int]:
    """The lines at an outline chapter's start that repeat its title ("CHAPTER ONE: Creators" for
    "Chapter 1: Creators"): up to 2 short lines sharing a word of 4+ letters with it."""
    words = {w for w in re.findall(r"[^\W\d_]{4,}", title.lower())}
    found = set()
    for i in range(cut, min(cut + 2, len(lines))):
        text = lines[i].text
        if len(text.split()) > 8 or not words & set(re.findall(r"[^\W\d_]{4,}", text.lower())):
            break
        found.add(i)
    return found


def _is_title_line(line: Line, by_line: Line) -> bool:
    return (
        _same_font(line, by_line)
        and len(line.text.split()) <= 8
        and not line.text[:1].islower()
        and not re.search(r"[.;:)\]]\s*$", line.text)
    )


def _is_by_line(line: Line) -> bool:
    return bool(_BY_LINE.match(line.text)) and len(line.text.split()) <= 16


def _big_lines(lines: Sequence[Line], heading_size: float) -> set[int]:
    """Indexes of the lines set in a heading font (``heading_size`` or more), except runs of such lines too
    long for a heading (a credits paragraph set large)."""
    big = [i for i, ln in enumerate(lines) if heading_size and ln.size >= heading_size]
    found: set[int] = set()
    for _, run in itertools.groupby(enumerate(big), key=lambda pair: pair[1] - pair[0]):
        indexes = [i for _, i in run]
        if sum(len(lines[i].text.split()) for i in indexes) <= _HEADING_WORDS:
            found.update(indexes)
    return found


def carried_titles(pages: Sequence[list[Line]]) -> list[list[Line]]:
    """Pages with a title that ends one page while its "by Author" line starts the next moved to the next
    page, so that the heading rule sees title and by-line together (up to 3 title lines)."""
    out = [list(lines) for lines in pages]
    for index in range(1, len(out)):
        before, lines = out[index - 1], out[index]
        if not lines or not _is_by_line(lines[0]):
            continue
        count = 0
        while count < min(3, len(before)) and _is_title_line(before[-1 - count], lines[0]):
            count += 1
        if count:
            out[index] = before[-count:] + lines
            out[index - 1] = before[:-count]
    return out


def _page_blocks(
    lines: Sequence[Line], headings: set[int], cut: int, left: float, right: float
) -> list[tuple[str, str, bool]]:
    """A page's lines as ``("h", heading text, True)`` and ``("p", paragraph, ends a sentence)`` blocks;
    ``cut`` > 0 marks where an outline chapter starts mid-page (a ``("cut", "", True)`` block)."""
    blocks: list[tuple[str, str, bool]] = []
    run: list[Line] = []

    def flush() -> None:
        blocks.extend(("p", text, ended) for text, ended in paragraphs(run, left, right))
        run.clear()

    for i, line in enumerate(lines):
        if i == cut and i > 0:
            flush()
            blocks.append(("cut", "", True))
        if i in headings:
            flush()
            if blocks and blocks[-1][0] == "h" and i - 1 in headings and _same_font(lines[i - 1], line):
                blocks[-1] = ("h", f"{blocks[-1][1]} {line.text}", True)
            else:
                blocks.append(("h", line.text, True))
        else:
            run.append(line)
    flush()
    return blocks


def _sections(
    pages: Sequence[list[tuple[str, str, bool]]], labels: Sequence[str], starts: dict[int, str], title: str
) -> list[tuple[str, list[Located]]]:
    """Pages of blocks cut into ``(title, [(paragraph, page)])``: at outline starts when there are any,
    else at heading blocks (a chapter's leading headings are its title, not its text)."""
    sections: list[tuple[str, list[Located]]] = [(title, [])]
    open_paragraph = False
    for index, blocks in enumerate(pages):
        if index in starts and not any(kind == "cut" for kind, _, _ in blocks):
            sections.append((starts[index], []))
            open_paragraph = False
        for kind, text, ended in blocks:
            if kind == "cut":
                sections.append((starts[index], []))
                open_paragraph = False
            elif kind == "h" and not starts:
                sections.append((text, []))
                open_paragraph = False
            elif kind == "h" and sections[-1][1]:
                sections[-1][1].append((text, ((0, labels[index]),)))
            elif kind == "p" and open_paragraph and sections[-1][1]:
                paragraph, marks = sections[-1][1][-1]
                joined = continued(paragraph, text)  # ends with ``text``: the new page starts there
                sections[-1][1][-1] = (joined, (*marks, (len(joined) - len(text), labels[index])))
                open_paragraph = not ended
            elif kind == "p":
                sections[-1][1].append((text, ((0, labels[index]),)))
                open_paragraph = not ended
    return sections


def _body_size(pages: Sequence[Sequence[Line]]) -> float:
    sizes: Counter[float] = Counter()
    for lines in pages:
        for line in lines:
            sizes[round(line.size, 1)] += len(line.text)
    return sizes.most_common(1)[0][0] if sizes else 0.0


def _cut_line(lines: Sequence[Line], top: float | None) -> int:
    if top is None:
        return 0
    return next((i for i, line in enumerate(lines) if line.top <= top + 2), 0)


def _read_pages(source_path: str, doc: Any) -> tuple[list[list[Line]], float, float, float]:
    """The pages' lines, their left and right edge, and the heading font's size over the body's."""
    raw = _pdfium().raw
    pages: list[list[Line]] = []
    left = right = 0.0
    for index in range(len(doc)):
        page = doc[index]
        pieces, left, right = _pieces(page, raw)
        pages.append(page_lines(pieces, left, right))
        page.close()
    if not any(pages):
        return (*_ocr_pages(source_path, doc), _OCR_HEADING_SIZE)
    return pages, left, right, _HEADING_SIZE


def _ocr_pages(source_path: str, doc: Any) -> tuple[list[list[Line]], float, float]:
    """Pages without a text layer read by OCR (``folio[ocr]``), or the one-line refusal saying what to do."""
    what = (
        f"no text layer in this PDF ({len(doc)} page(s) without text: a scan, text drawn as curves, or blank"
    )
    if not ocr.available():
        raise FolioError(
            source_path,
            f"{what} pages): OCR it first (ocrmypdf in.pdf out.pdf), or install OCR: {ocr.INSTALL}",
        )
    if len(doc) > ocr.MAX_OCR_PAGES:
        raise FolioError(source_path, f"{what} pages) and more than {ocr.MAX_OCR_PAGES} pages to OCR")
    pages: list[list[Line]] = []
    left = right = 0.0
    for index in range(len(doc)):
        page = doc[index]
        left, _, right, _ = page.get_cropbox()
        pages.append(page_lines(ocr.page_pieces(page), left, right))
        page.close()
    if not any(pages):
        raise FolioError(source_path, f"{what} pages), and OCR found no text on it")
    return pages, left, right


def read(source_path: str, data: bytes, max_bytes: int) -> ParsedBook:
    """The format table's entry point: a PDF with a text layer."""
    doc = _document(source_path, data)
    try:
        if len(doc) > MAX_PDF_PAGES:
            raise FolioError(
                source_path, f"too many pages: {len(doc):,}, more than the {MAX_PDF_PAGES:,}-page limit"
            )
        pages, left, right, ratio = _read_pages(source_path, doc)
        dropped = furniture(pages)
        printed = printed_numbers(pages, dropped)
        labels = page_labels([_pdf_label(doc, i) for i in range(len(pages))], printed)
        body = [
            [ln for i, ln in enumerate(lines) if i not in drop]
            for lines, drop in zip(pages, dropped, strict=True)
        ]
        starts = {}
        cuts: dict[int, int] = {}
        for heading, index, top in outline_starts(_outline(doc)):
            if index < len(body) and index not in starts:
                starts[index] = heading
                cuts[index] = _cut_line(body[index], top)
        size = _body_size(body)
        if not starts:
            body = carried_titles(body)
        blocks = [
            _page_blocks(
                lines,
                _headings(lines, ratio * size, starts.get(i, "") if starts else None, cuts.get(i, 0)),
                cuts.get(i, 0),
                left,
                right,
            )
            for i, lines in enumerate(body)
        ]
        meta = doc.get_metadata_dict()
        count = len(doc)
    finally:
        doc.close()
    title = " ".join((meta.get("Title") or "").split()) or storable(Path(source_path).stem)
    chapters = checked_chapters(located_chapters(_sections(blocks, labels, starts, title)), source_path)
    return ParsedBook(
        source_path=source_path,
        format="pdf",
        title=title,
        author=" ".join((meta.get("Author") or "").split()) or "Unknown",
        language="und",
        chapters=chapters,
        page_count=count,
        page_labels=tuple(labels),
    )


def _headings(lines: Sequence[Line], heading_size: float, outline_title: str | None, cut: int) -> set[int]:
    """A page's heading lines: by the heading rules without an outline; with one, the big-font lines and
    the lines that repeat the title of a chapter starting on this page (dropped from its text)."""
    if outline_title is None:
        return _heading_lines(lines, heading_size)
    return _big_lines(lines, heading_size) | _title_lines(lines, cut, outline_title)
