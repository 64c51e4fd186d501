"""``make bench``: measured speed and memory, printed as JSON (a benchmark, not a test).

Book ingest: Moby-Dick (EPUB) into a fresh library with an empty embedding cache, in a process whose
encoder is already loaded; then the raw encoder time for exactly the same windows in the same run,
their ratio, peak RSS, chunk and window counts, and search latency p50/p95 (query encoding included)
over 100 queries for lexical, semantic and hybrid search. Other sections (Kiwix, ask, re-ingest)
are added by the modules that own them when present.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import random
import resource
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("HAMILTON_TELEMETRY_ENABLED", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _peak_rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def latency_summary(values_ms: Sequence[float], digits: int = 2) -> dict[str, float]:
    """p50 and p95 of latencies in milliseconds (linear interpolation), shared by every bench section."""
    return {
        "p50_ms": round(float(np.percentile(values_ms, 50)), digits),
        "p95_ms": round(float(np.percentile(values_ms, 95)), digits),
    }


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


def _edit_one_chapter(epub: Path, target: Path) -> None:
    """A copy of the EPUB whose chapter 1 ("Loomings") has one extra paragraph."""
    import zipfile

    with zipfile.ZipFile(epub) as src, zipfile.ZipFile(target, "w") as dst:
        edited = False
        for info in src.infolist():
            data = src.read(info.filename)
            if not edited and info.filename.endswith((".xhtml", ".html")) and b"Loomings" in data and b"Ishmael" in data:
                data = data.replace(b"Call me Ishmael.", b"Call me Ishmael. (An edited sentence for the benchmark.)", 1)
                edited = True
            compress = zipfile.ZIP_STORED if info.filename == "mimetype" else zipfile.ZIP_DEFLATED
            dst.writestr(info, data, compress_type=compress)


def _concept_map_time(book: Path, config: dict[str, Any], lib: Any) -> float:
    """Seconds to build the concept map alone from the book's (cached) chunks and vectors."""
    from dataflows.drivers import INGEST_MODULES, build_driver
    from nodes.backends.embedding_cache import EmbeddingCache
    from nodes.backends.progress import NullProgress

    dr = build_driver(INGEST_MODULES, config)
    inputs = {
        "source_path": str(book),
        "staging_dir": str(lib.path / "staging"),
        "embedding_cache": EmbeddingCache(lib.cache_dir / "embeddings"),
        "progress": NullProgress(),
    }
    parts = dr.execute(["manifest", "chunks", "chunk_vectors"], inputs=inputs)
    t0 = time.perf_counter()
    dr.execute(["concept_map"], inputs=inputs, overrides=parts)
    return time.perf_counter() - t0


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

    # Re-ingest: unchanged, then with one chapter edited (node cache + per-window embedding cache).
    t0 = time.perf_counter()
    assert ingest([book], library=lib).ok
    unchanged_s = time.perf_counter() - t0
    edited = work / book.name
    _edit_one_chapter(book, edited)
    t0 = time.perf_counter()
    assert ingest([edited], library=lib).ok
    edited_s = time.perf_counter() - t0

    concept_s = _concept_map_time(book, config, lib)

    queries = _queries(lib, staged.book_id)
    latency: dict[str, Any] = {}
    for mode in ("lexical", "semantic", "hybrid"):
        search(queries[0], library=lib, mode=mode, k=10)  # warm the driver
        times = []
        for q in queries:
            t0 = time.perf_counter()
            search(q, library=lib, mode=mode, k=10)
            times.append((time.perf_counter() - t0) * 1000)
        latency[mode] = latency_summary(times)

    return {
        "book": book.name,
        "ingest_wall_s": round(ingest_s, 2),
        "raw_encoder_s": round(encoder_s, 2),
        "ingest_over_encoder": round(ingest_s / encoder_s, 3),
        "target_ingest_over_encoder": 1.3,
        "chapters": staged.n_chapters,
        "chunks": staged.n_chunks,
        "windows": staged.n_windows,
        "reingest_unchanged_s": round(unchanged_s, 2),
        "reingest_unchanged_fraction": round(unchanged_s / ingest_s, 4),
        "target_reingest_unchanged_fraction": 0.05,
        "reingest_one_chapter_edited_s": round(edited_s, 2),
        "reingest_edited_fraction": round(edited_s / ingest_s, 4),
        "target_reingest_edited_fraction": 0.10,
        "concept_map_build_s": round(concept_s, 2),
        "peak_rss_mb": _peak_rss_mb(),
        "target_peak_rss_mb": 2048,
        "search_latency": latency,
        "search_targets_p50_ms": {"lexical": 10, "semantic": 40, "hybrid": 50},
        "queries": len(queries),
    }


# Sections owned by other modules: (name in the JSON, module, function taking the data folder).
SECTIONS = (
    ("kiwix", "dataflows.kiwix_query", "kiwix_bench"),
    ("library_ingest", "dataflows.parallel", "library_bench"),
    ("ask", "dataflows.asking", "ask_bench"),
)


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
        for section, module, function in SECTIONS:
            try:
                bench = getattr(importlib.import_module(module), function)
            except (ImportError, AttributeError):
                results[section] = {"skipped": f"{module}.{function} is not available"}
                continue
            print(f"bench: {section}...", file=sys.stderr, flush=True)
            results[section] = bench(data_dir)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    text = json.dumps(results, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
