"""A PDF page as a PNG image with a cited passage marked, for the web page (``GET
/api/books/{book}/pages/{page}.png``): rendered on request with PDFium, never stored.

``page_index(labels, page)`` finds the page of a citation's label (``"48"``, ``"pdf 12"``, or the first
page of a range ``"48-49"``); ``page_png(path, index, quote)`` renders it at ``PAGE_DPI`` and tints the
boxes of the quote's first words found on the page (PDFium's text search, case-insensitive) yellow.
The PNG is written with zlib (no imaging library). Limitations: a quote that starts on the previous page
is not marked; only a quote's first ``MARK_WORDS`` words (then its first 4) are searched.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from typing import Any

from folio.nodes.core.types import FolioError

PAGE_DPI = 110
MARK_WORDS = 8


def page_index(labels: Sequence[str], page: str) -> int:
    """The file index of the page labelled ``page`` (a range's first page), or a FolioError."""
    first = page.split("-")[0].strip()
    if first in labels:
        return list(labels).index(first)
    raise FolioError(page, "no such page in this book")


def png(rgb: Any) -> bytes:
    """An RGB ``uint8`` array (height, width, 3) as PNG bytes."""
    height, width = rgb.shape[0], rgb.shape[1]
    rows = b"".join(b"\0" + rgb[y].tobytes() for y in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows, 6))
        + chunk(b"IEND", b"")
    )


def _marked_boxes(textpage: Any, quote: str) -> list[tuple[float, float, float, float]]:
    words = quote.split()
    for n in (MARK_WORDS, 4):
        needle = " ".join(words[:n])
        if not needle:
            return []
        search = textpage.search(needle, match_case=False)
        found = search.get_next()
        if found is not None:
            start, count = found
            return [textpage.get_rect(i) for i in range(textpage.count_rects(start, count))]
    return []


def page_png(path: str, index: int, quote: str = "") -> bytes:
    """Page ``index`` of the PDF at ``path`` as a PNG, the quote's first words tinted yellow."""
    import numpy as np
    import pypdfium2

    doc = pypdfium2.PdfDocument(path)
    try:
        if not 0 <= index < len(doc):
            raise FolioError(path, f"no page {index + 1} in this PDF")
        page = doc[index]
        scale = PAGE_DPI / 72
        bitmap = page.render(scale=scale, rev_byteorder=True)
        rgb = np.array(bitmap.to_numpy())[:, :, :3].copy()
        boxes = _marked_boxes(page.get_textpage(), quote) if quote.strip() else []
        height = rgb.shape[0]
        left, _, _, top = page.get_cropbox()
        for x0, y0, x1, y1 in boxes:
            a, b = max(int((x0 - left) * scale), 0), int((x1 - left) * scale) + 1
            c, d = max(int((top - y1) * scale), 0), min(int((top - y0) * scale) + 1, height)
            region = rgb[c:d, a:b].astype(np.uint16)
            region[..., 2] = region[..., 2] * 2 // 5  # less blue: yellow
            rgb[c:d, a:b] = region.astype(np.uint8)
        return png(rgb)
    except pypdfium2.PdfiumError as exc:
        raise FolioError(path, f"cannot render this PDF page ({exc})") from None
    finally:
        doc.close()
