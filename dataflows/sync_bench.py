"""The ``sync`` section of ``make bench``: ``folio sync`` of an unchanged library of 1,000 books.

The books are the scaling bench's generated ones (``dataflows.scaling.small_books``, about 400 words each)
written as plain-text files and committed into a library that records each file's stamp as ingest does
(``generated_library(..., sources=files)``; hashed vectors: a sync of an unchanged library embeds
nothing). Measured: the whole ``folio sync FOLDER`` command in a fresh process (interpreter start-up,
imports, the writer lock and recovery, the plan, the summary line), the plan alone in this process, and
the plan after every file's mtime changed (same bytes: each file is hashed, and still unchanged). The
target of issue 28: the command under 5 s for 1,000 books.

Limitations: the files are small (about 2.5 KB), so hashing them all is cheap; a library of large PDFs
whose mtimes all change pays a full read of each.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from folio.dataflows.api import book_sources
from folio.dataflows.scaling import generated_library, small_books, write_book_files
from folio.dataflows.syncing import sync_plan, sync_roots

SYNC_BOOKS = 1_000
TARGET_SECONDS = 5.0


def _plan_seconds(folder: Path, library: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    plan = sync_plan(book_sources([folder]), library.descriptors(), sync_roots([folder]))
    return time.perf_counter() - start, plan


def sync_bench(data_dir: Path, work: Path, n: int = SYNC_BOOKS) -> dict[str, Any]:
    """Seconds to sync an unchanged library of ``n`` books (see the module docstring)."""
    books = small_books(data_dir, n)
    folder = work / "sync-books"
    files = write_book_files(books, folder)
    library = generated_library(work / "sync-library", books, sources=files)
    command = [sys.executable, "-m", "folio.dataflows.cli", "sync", str(folder), "--quiet"]
    start = time.perf_counter()
    out = subprocess.run(
        [*command, "--library", str(library.path)], capture_output=True, text=True, timeout=600, check=False
    )
    cli_seconds = time.perf_counter() - start
    plan_seconds, plan = _plan_seconds(folder, library)
    later = time.time_ns() + 10**9
    for path in files:
        os.utime(path, ns=(later, later))
    touched_seconds, touched = _plan_seconds(folder, library)
    library.close()
    return {
        "books": n,
        "cli_sync_seconds": round(cli_seconds, 2),
        "cli_summary": out.stdout.strip().splitlines()[-1] if out.stdout.strip() else out.stderr.strip(),
        "plan_seconds": round(plan_seconds, 3),
        "plan_unchanged": plan.unchanged,
        "plan_after_touch_seconds": round(touched_seconds, 3),
        "plan_after_touch_unchanged": touched.unchanged,
        "target_seconds": TARGET_SECONDS,
        "meets_target": cli_seconds < TARGET_SECONDS and out.returncode == 0 and plan.unchanged == n,
    }
