"""OCR of PDF pages without a text layer: the optional extra ``folio[ocr]`` (``rapidocr-onnxruntime``,
Apache-2.0, whose wheel carries its PP-OCRv4 detection/recognition ONNX models: nothing is downloaded).

``page_pieces(page)`` renders a page at ``OCR_DPI`` with PDFium, runs the recogniser on the CPU and
returns its text boxes as ``pdf_layout.Piece``s in PDF points, so an OCR'd page goes through the same
layout rules as a text layer (two columns read in order, headers and page numbers dropped). The engine
is loaded once per process. Limitations: slow on a CPU (seconds to minutes a page on a loaded machine);
``MAX_OCR_PAGES`` caps a scanned book; the recogniser sometimes drops the spaces of a dense line.
"""

from __future__ import annotations

import functools
from typing import Any

from folio.nodes.readers.pdf_layout import Piece

INSTALL = "pip install 'folio[ocr]'"
OCR_DPI = 300  # Linn page: 76% word accuracy at 300 dpi, 58% at 200 (formats bench)
MAX_OCR_PAGES = 500


def available() -> bool:
    """Whether the OCR extra is installed."""
    try:
        import rapidocr_onnxruntime  # noqa: F401
    except ImportError:
        return False
    return True


@functools.cache
def _engine() -> Any:
    from rapidocr_onnxruntime import RapidOCR

    return RapidOCR()


def page_pieces(page: Any) -> list[Piece]:
    """The text boxes the recogniser finds on ``page`` (PDF points, y upward)."""
    import numpy as np

    left, _, _, top = page.get_cropbox()
    scale = OCR_DPI / 72
    image = page.render(scale=scale, crop=(0, 0, 0, 0)).to_pil().convert("RGB")
    found, _ = _engine()(np.array(image))
    pieces = []
    for box, text, _score in found or ():
        xs, ys = [p[0] for p in box], [p[1] for p in box]
        height = (max(ys) - min(ys)) / scale
        pieces.append(
            Piece(
                left + min(xs) / scale,
                top - max(ys) / scale,
                left + max(xs) / scale,
                top - min(ys) / scale,
                str(text),
                height,
            )
        )
    return pieces
