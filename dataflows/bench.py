"""``make bench``: measured speed and memory, printed as JSON (a benchmark, not a test).

Book ingest: Moby-Dick (EPUB) into a fresh library with an empty embedding cache, in a process whose
encoder is already loaded; then the raw encoder time for exactly the same windows in the same run,
their ratio, peak RSS, chunk and window counts, and search latency p50/p95 (query encoding included)
over 100 queries for lexical, semantic and hybrid search. Other sections (Kiwix, ask, re-ingest)
are added by the modules that own them when present.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("HAMILTON_TELEMETRY_ENABLED", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _peak_rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _percentiles(values: list[float]) -> dict[str, float]:
    return {"p50_ms": round(float(np.percentile(values, 50)), 2), "p95_ms": round(float(np.percentile(values, 95)), 2)}


def _queries(lib: Any, book_id: str, n: int = 100, seed: int = 7) -> list[str]:
    """``n`` queries made of 4–9 consecutive words from random chunks of the book (seeded)."""
    rng = random.Random(seed)
    chunks = lib.store(book_id).chunks_in()
    out = []
    while len(out) < n:
        words = rng.choice(chunks).text.split()
        if len(words) < 12:
            continue
        start = rng.randrange(0, len(words) - 10)
        out.append(" ".join(words[start : start + rng.randint(4, 9)]))
    return out


def book_bench(data_dir: Path, work: Path) -> dict[str, Any]:
    from dataflows.api import ingest, search
    from dataflows.config import load_config
    from dataflows.library import Library
    from nodes.backends.encoder import load_encoder

    config = load_config()
    encoder = load_encoder(config["embedding_model"])
    encoder.encode(["warm up the encoder"])
    book = data_dir / "books/epub/melville_moby-dick.epub"
    lib = Library(work / "library")

    t0 = time.perf_counter()
    report = ingest([book], library=lib)
    ingest_s = time.perf_counter() - t0
    if not report.ok:
        raise SystemExit(f"bench: ingest failed: {report.errors[0]}")
    staged = report.ingested[0]

    store = lib.store(staged.book_id)
    rows = store._rows("SELECT w.start, w.end, c.chapter_id FROM windows w JOIN chunks c ON c.rowid = w.chunk_rowid ORDER BY w.window_id")
    texts = [store.chapter_text(ch)[s:e] for s, e, ch in rows]
    t0 = time.perf_counter()
    encoder.encode(texts, int(config["embedding_batch_size"]))
    encoder_s = time.perf_counter() - t0

    queries = _queries(lib, staged.book_id)
    latency: dict[str, Any] = {}
    for mode in ("lexical", "semantic", "hybrid"):
        search(queries[0], library=lib, mode=mode, k=10)  # warm the driver
        times = []
        for q in queries:
            t0 = time.perf_counter()
            search(q, library=lib, mode=mode, k=10)
            times.append((time.perf_counter() - t0) * 1000)
        latency[mode] = _percentiles(times)

    return {
        "book": book.name,
        "ingest_wall_s": round(ingest_s, 2),
        "raw_encoder_s": round(encoder_s, 2),
        "ingest_over_encoder": round(ingest_s / encoder_s, 3),
        "target_ingest_over_encoder": 1.3,
        "chapters": staged.n_chapters,
        "chunks": staged.n_chunks,
        "windows": staged.n_windows,
        "peak_rss_mb": _peak_rss_mb(),
        "target_peak_rss_mb": 2048,
        "search_latency": latency,
        "search_targets_p50_ms": {"lexical": 10, "semantic": 40, "hybrid": 50},
        "queries": len(queries),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="folio-bench")
    parser.add_argument("--data", default=str(Path(__file__).resolve().parents[2] / "shared" / "data"))
    parser.add_argument("--out", default=None, help="also write the JSON here")
    args = parser.parse_args(argv)
    data_dir = Path(args.data).resolve()
    work = Path(tempfile.mkdtemp(prefix="folio-bench-"))
    results: dict[str, Any] = {"machine": {"cpus": os.cpu_count()}}
    try:
        results["books"] = book_bench(data_dir, work)
        try:
            from dataflows.kiwix_query import kiwix_bench
        except ImportError:
            pass
        else:
            results["kiwix"] = kiwix_bench(data_dir)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    text = json.dumps(results, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
