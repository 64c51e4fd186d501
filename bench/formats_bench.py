"""``make bench`` section ``formats`` (issue 28): how fast each reader reads the real files of
``formats/`` beside the books, and the peak memory of reading the 352-page PDF.

- ``readers``: for every readable file of ``formats/`` (the Calibre libraries aside), the reader's wall
  and CPU seconds (best of 2 in this process, the first read warming imports), MB/s of the source file,
  pages/s for a PDF, chapters and words.
- ``pdf_peak_memory``: *Free Culture* (352 pages) read in a fresh process, its peak RSS beside the peak
  RSS of a process that only imports the reader (the difference is what reading the PDF costs).
- ``ocr_linn_page``: with ``folio[ocr]`` installed, the scanned two-column Linn page OCR'd through the
  PDF reader, its seconds and word accuracy against its transcription (``word_accuracy``).

Parsing is the part of ingest each format changes; the rest of ingest (chunking, embedding, indexing)
is the same for every format and measured by the ``books`` section. Every row carries the load average:
the machine may be shared. Limitations: wall times on a loaded machine are noisy; CPU times steadier.
"""

from __future__ import annotations

import difflib
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from folio.nodes.core.types import FolioError
from folio.nodes.ingest.parsing import parsed_book

FREE_CULTURE = "formats/pdf/lessig-free-culture.pdf"
LINN = "formats/pdf/scanned-linn-brochure-two-column"  # .pdf, and its transcription .ground-truth.txt


def _timed(path: Path) -> tuple[float, float, Any]:
    wall, cpu = time.perf_counter(), time.process_time()
    book = parsed_book(str(path))
    return time.perf_counter() - wall, time.process_time() - cpu, book


def reader_speed(path: Path) -> dict[str, Any] | None:
    """One file's reader speed (best of 2), or None when the reader refuses the file."""
    try:
        runs = [_timed(path) for _ in range(2)]
    except FolioError:
        return None
    wall, cpu, book = min(runs, key=lambda r: r[0])
    megabytes = path.stat().st_size / 1e6
    row: dict[str, Any] = {
        "format": book.format,
        "megabytes": round(megabytes, 2),
        "seconds": round(wall, 3),
        "cpu_seconds": round(cpu, 3),
        "mb_per_s": round(megabytes / wall, 2) if wall else None,
        "mb_per_cpu_s": round(megabytes / cpu, 2) if cpu else None,  # steadier on a shared machine
        "chapters": len(book.chapters),
        "words": sum(len(c.text.split()) for c in book.chapters),
    }
    if book.page_count:
        row["pages"] = book.page_count
        row["pages_per_s"] = round(book.page_count / wall, 1) if wall else None
        row["pages_per_cpu_s"] = round(book.page_count / cpu, 1) if cpu else None
    return row


_HIGH_WATER = "import re; print(re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1))"


def _child_peak_mb(code: str, *args: str) -> float:
    """Peak RSS (MB) of a fresh Python process running ``code``: its own high-water mark (``VmHWM``,
    reset at exec; a forked child's ``ru_maxrss`` would count the parent's memory)."""
    out = subprocess.run(
        [sys.executable, "-c", f"{code}; {_HIGH_WATER}", *args], capture_output=True, text=True, check=False
    )
    if out.returncode or not out.stdout.strip().isdigit():
        raise FolioError(code, f"the measuring process failed (exit {out.returncode})")
    return round(int(out.stdout.strip()) / 1024, 1)


def pdf_peak_memory(path: Path) -> dict[str, Any]:
    imports = "from folio.nodes.ingest.parsing import parsed_book; import pypdfium2"
    baseline = _child_peak_mb(imports)
    reading = _child_peak_mb(f"{imports}; import sys; parsed_book(sys.argv[1])", str(path))
    return {
        "file": path.name,
        "peak_rss_mb": reading,
        "import_only_peak_rss_mb": baseline,
        "reading_costs_mb": round(reading - baseline, 1),
    }


def word_accuracy(text: str, truth: str) -> float:
    """The share of the ground truth's words (lower-cased letters and digits) that the text has in the
    same order (difflib's matching blocks over the word sequences)."""
    words, gold = re.findall(r"[a-z0-9]+", text.lower()), re.findall(r"[a-z0-9]+", truth.lower())
    matcher = difflib.SequenceMatcher(None, gold, words, autojunk=False)
    return round(sum(block.size for block in matcher.get_matching_blocks()) / max(len(gold), 1), 3)


def ocr_accuracy(data_dir: Path) -> dict[str, Any]:
    """``folio[ocr]`` on the scanned two-column Linn page: seconds and word accuracy against its
    transcription (skipped when the extra is not installed)."""
    from folio.nodes.readers import ocr

    if not ocr.available():
        return {"skipped": f"folio[ocr] is not installed ({ocr.INSTALL})"}
    wall = time.perf_counter()
    book = parsed_book(str(data_dir / f"{LINN}.pdf"))
    seconds = time.perf_counter() - wall
    text = "\n\n".join(c.text for c in book.chapters)
    truth = (data_dir / f"{LINN}.ground-truth.txt").read_text(encoding="utf-8")
    return {"dpi": ocr.OCR_DPI, "seconds": round(seconds, 1), "word_accuracy": word_accuracy(text, truth)}


def formats_bench(data_dir: Path) -> dict[str, Any]:
    """The ``formats`` section: reader speed per file and the 352-page PDF's peak memory."""
    root = data_dir / "formats"
    skipped = ("SOURCES.md", "MANIFEST.sha256")
    files = sorted(
        p
        for p in root.rglob("*")
        if p.is_file()
        and "calibre" not in p.relative_to(root).parts
        and p.name not in skipped
        and not p.name.endswith(".ground-truth.txt")
    )
    readers = {}
    for path in files:
        if path.name.startswith(("scanned-", "vector-")):
            continue  # no text layer: refused, or (with folio[ocr]) the ocr_linn_page row
        row = reader_speed(path)
        if row is not None:
            readers[path.relative_to(root).as_posix()] = row
    return {
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "readers": readers,
        "pdf_peak_memory": pdf_peak_memory(data_dir / FREE_CULTURE),
        "ocr_linn_page": ocr_accuracy(data_dir),
    }
