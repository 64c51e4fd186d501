"""What the benchmarks share (``bench.bench``, ``bench.scaling``, ``bench.serve_bench``,
``bench.llm_bench``): the latency summary every section reports, a free local port for the servers
they start and the wait until one answers, and the Potter treasury with its FairytaleQA questions that
the ask sections measure.

A leaf module: the bench modules import it and it imports none of them (no import cycle).
"""

from __future__ import annotations

import contextlib
import csv
import os
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Literal

import httpx
import numpy as np

from folio.dataflows.api import ingest
from folio.nodes.core.types import FolioError

POTTER_FILE = "books/txt/pg572_potter_great-big-treasury.txt"


def latency_summary(values_ms: Sequence[float], digits: int = 2) -> dict[str, float]:
    """p50 and p95 of latencies in milliseconds (linear interpolation), shared by every bench section."""
    return {
        "p50_ms": round(float(np.percentile(values_ms, 50)), digits),
        "p95_ms": round(float(np.percentile(values_ms, 95)), digits),
    }


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until_answering(
    process: subprocess.Popen[bytes], probe_url: str, wait_seconds: float, interval: float
) -> Literal["up", "exited", "silent"]:
    """Poll ``probe_url`` every ``interval`` seconds until it answers 200 (``up``), the server
    ``process`` ends (``exited``) or ``wait_seconds`` pass (``silent``)."""
    deadline = time.monotonic() + wait_seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return "exited"
        try:
            if httpx.get(probe_url, timeout=1.0).status_code == 200:
                return "up"
        except httpx.HTTPError:
            pass
        time.sleep(interval)
    return "silent"


def potter_questions(data_dir: str | os.PathLike[str], n: int = 100) -> tuple[Path, list[str]]:
    """The Potter treasury and its first ``n`` FairytaleQA questions."""
    data = Path(data_dir)
    book = data / POTTER_FILE
    with open(data / "qa/fairytaleqa/questions.csv", encoding="utf-8", newline="") as f:
        questions = [r["question"] for r in csv.DictReader(f) if r["book_file"].endswith(book.name)][:n]
    return book, questions


@contextlib.contextmanager
def potter_library(data_dir: str | os.PathLike[str], library: str | Path | None = None) -> Iterator[Path]:
    """``library`` when given (it must hold the Potter treasury), else a temporary library with the
    treasury ingested, removed after the block."""
    if library is not None:
        yield Path(library)
        return
    book = Path(data_dir) / POTTER_FILE
    with tempfile.TemporaryDirectory(prefix="folio-potter-bench-") as tmp:
        report = ingest([book], library=tmp)
        if not report.ok:
            raise FolioError(str(book), "; ".join(str(e) for e in report.errors))
        yield Path(tmp)
