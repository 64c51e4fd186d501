"""The ``fullsize`` section of ``make bench``: libraries of full-length books and a 2 M-window index.

``source_chapters`` parses every book file of the shared data (``books/`` and ``formats/``) with the
ingest's own parser and keeps each distinct chapter of at least ``MIN_CHAPTER_WORDS`` words;
``fullsize_books`` recombines those whole chapters into distinct books of about ``BOOK_WORDS`` words
(each book draws its chapters without repeats, seeded), written as plain-text files with Gutenberg-style
``CHAPTER n. title`` headings so the ingest finds the same chapters.

``real_ingest`` ingests the books one ``folio.dataflows.api.ingest`` at a time into one library with
the default config (node cache off, and the window-embedding cache cleared before each book, because
books recombined from the same chapters would otherwise reuse each other's vectors), under one progress
bar over words with an ETA; it records the ETA after the first 10% of the words against the final time,
the raw encoder's time on the same windows for every fifth book (interleaved, so machine load weighs
on both), peak RSS and the library's size on disk. A run that dies (kill -9) is rerun by calling it
again: books already in the library are skipped (``pending_books``), each is ingested once.

``index_library`` builds the index-level library of ``windows`` windows: the real ingested books'
chapters, chunks and windows (real text, the encoder's vectors), copied under new ids until the window
count is reached, the copies' vectors being the originals plus Gaussian noise (``NOISE``), renormalised.
It is committed in batches through ``LibraryIndex.commit`` (so the vector segments form as they do
over a library's life) and kept in the work folder. ``index_measurement`` (run in a fresh process)
measures the first hybrid search after opening, warm hybrid p50/p95, open files, RSS, disk, adding one
real book and removing it, and a compaction (every segment folded into one).

``dask_comparison`` ingests the same books on the local executor and on a 2-worker Dask LocalCluster.

Config keys: none of its own (the default config). Limitations: cold means a fresh process with the
operating system's page cache as the previous run left it (dropping it needs root and would disturb the
machine's other work); the copies' text repeats the real books', so the lexical index's postings are
denser than a library of distinct books of the same size.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import resource
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.fullsize_report import SMALL_BOOK_ROWS, fullsize_plot, fullsize_table
from bench.measuring import latency_summary
from bench.scaling import in_fresh_process, open_files, rss_mb
from folio.dataflows.library import Library, shared_index
from folio.nodes.backends.library_index import StagedRows, VectorSettings
from folio.nodes.backends.progress import Progress
from folio.nodes.core.types import FolioError

BOOKS = 100
BOOK_WORDS = 90_000
INDEX_WINDOWS = 2_000_000
MIN_CHAPTER_WORDS = 800
NOISE = 0.05  # standard deviation per dimension of the noise added to a recycled vector (then renormalised)
COMMIT_BOOKS = 8  # index-level copies committed per transaction
RAW_EVERY = 5  # the raw encoder re-encodes every fifth book's windows
QUERIES = (
    "the whale rose out of the sea",
    "a girl falls down a very deep hole",
    "why did the time traveller go into the future",
    "the wolf ate the grandmother",
    "Holmes examined the letter by the window",
    "the captain would not give up the chase",
    "a prince came riding through the forest",
    "how did Alice grow so tall",
)


@dataclass(frozen=True)
class FullBook:
    title: str
    chapters: tuple[tuple[str, str], ...]  # (title, text)

    @property
    def words(self) -> int:
        return sum(len(text.split()) for _, text in self.chapters)


def source_chapters(data_dir: Path) -> list[tuple[str, str]]:
    """``(title, text)`` of every distinct chapter of at least ``MIN_CHAPTER_WORDS`` words in the shared
    books and formats corpus (files the parser refuses are skipped), in a stable order."""
    from folio.dataflows.api import book_files
    from folio.nodes.ingest.parsing import manifest, parsed_book

    seen: set[str] = set()
    out: list[tuple[str, str]] = []
    for path in book_files([data_dir / "books", data_dir / "formats"]):
        try:
            chapters = manifest(parsed_book(str(path))).chapters
        except (FolioError, OSError, ValueError):
            continue
        for chapter in chapters:
            digest = hashlib.sha1(chapter.text.encode()).hexdigest()
            if len(chapter.text.split()) >= MIN_CHAPTER_WORDS and digest not in seen:
                seen.add(digest)
                out.append((chapter.title.strip() or "Untitled", chapter.text))
    return out


def fullsize_books(
    chapters: Sequence[tuple[str, str]], n: int, words: int = BOOK_WORDS, seed: int = 30
) -> list[FullBook]:
    """``n`` distinct books of about ``words`` words, each of whole chapters drawn without repeats."""
    rng = random.Random(seed)
    books = []
    for i in range(n):
        order = list(range(len(chapters)))
        rng.shuffle(order)
        chosen, total = [], 0
        for j in order:
            if total >= words:
                break
            chosen.append(chapters[j])
            total += len(chapters[j][1].split())
        books.append(FullBook(f"Full Book {i + 1:03d}", tuple(chosen)))
    return books


def write_fullsize_book(book: FullBook, directory: Path) -> Path:
    """The book as a plain-text file: its title, then each chapter under ``CHAPTER n. title``."""
    directory.mkdir(parents=True, exist_ok=True)
    parts = [book.title, ""]
    for i, (title, text) in enumerate(book.chapters, 1):
        heading = " ".join(title.split())[:80]
        parts += ["", "", f"CHAPTER {i}. {heading}", "", "", text.strip(), ""]
    path = directory / f"{book.title.lower().replace(' ', '-')}.txt"
    if not path.exists():
        path.write_text("\n".join(parts) + "\n", encoding="utf-8")
    return path


def pending_books(lib: Library, files: Sequence[Path]) -> list[Path]:
    """The files whose book is not in the library yet (a rerun after a crash skips the others)."""
    have = {Path(b["source_file"]).name for b in lib.descriptors()} if lib.exists() else set()
    return [f for f in files if f.name not in have]


def disk_mb(path: Path) -> float:
    """Bytes on disk under ``path``, in MB."""
    return round(sum(p.stat().st_blocks * 512 for p in path.rglob("*") if p.is_file()) / 1e6, 1)


def peak_rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


class WordsBar:
    """One tqdm bar over the words of the whole run (known up front), advanced as the ingest embeds each
    book's windows (its share of the book's words); remembers its ETA when the run passes 10%."""

    def __init__(self, total_words: int) -> None:
        from tqdm import tqdm

        self.total = total_words
        self.done = 0.0
        self.start = time.perf_counter()
        self.eta_at_10pct: tuple[float, float] | None = None  # (elapsed s, predicted total s)
        self.bar = tqdm(total=total_words, desc="fullsize ingest", unit="word", unit_scale=True)

    def advance(self, words: float) -> None:
        self.done += words
        self.bar.update(words)
        elapsed = time.perf_counter() - self.start
        if self.eta_at_10pct is None and self.done >= 0.1 * self.total:
            self.eta_at_10pct = (elapsed, elapsed * self.total / self.done)

    def close(self) -> None:
        self.bar.close()


class BookShare(Progress):
    """The ingest's progress for one book (windows embedded of its windows) as words on a ``WordsBar``."""

    def __init__(self, bar: WordsBar, words: int) -> None:
        self.bar, self.words = bar, words
        self.windows = 0.0
        self.given = 0.0

    def add_total(self, n: float) -> None:
        self.windows += n

    def advance(self, n: float) -> None:
        share = min(self.words - self.given, self.words * n / max(self.windows, 1.0))
        self.given += share
        self.bar.advance(share)

    def finish(self) -> None:
        """The rest of the book's words (parsing and the commit follow the last window)."""
        self.bar.advance(self.words - self.given)
        self.given = self.words


def _window_texts(lib: Library, book_id: str) -> list[str]:
    store = lib.store(book_id)
    return [store.chapter_text(ch)[s:e] for ch, s, e in lib.index.window_spans(book_id)]


def real_ingest(files: Sequence[Path], library: Path) -> dict[str, Any]:
    """Ingest ``files`` one at a time into ``library`` (see the module docstring); the pending ones only."""
    from folio.dataflows.api import ingest
    from folio.dataflows.config import load_config
    from folio.nodes.backends.encoder import load_encoder

    config = load_config()
    encoder = load_encoder(config["embedding_model"], config.get("encoder_precision", "auto"))
    encoder.encode(["warm up the encoder"])
    lib = Library(library)
    todo = pending_books(lib, files)
    words = {f: len(f.read_text(encoding="utf-8").split()) for f in todo}
    bar = WordsBar(sum(words.values()))
    ingest_s = raw_s = 0.0
    windows = raw_windows = paired_ingest_windows = 0
    paired_ingest_s = 0.0
    for i, path in enumerate(todo):
        shutil.rmtree(lib.cache_dir / "embeddings", ignore_errors=True)  # no vector reused across books
        start = time.perf_counter()
        share = BookShare(bar, words[path])
        report = ingest([path], library=lib, cache=False, progress=share)
        share.finish()
        seconds = time.perf_counter() - start
        if not report.ok:
            raise FolioError(str(path), f"ingest failed: {report.errors[0]}")
        staged = report.ingested[0]
        ingest_s += seconds
        windows += staged.n_windows
        if i % RAW_EVERY == 0:
            texts = _window_texts(lib, staged.book_id)
            start = time.perf_counter()
            encoder.encode(texts, int(config["embedding_batch_size"]))
            raw_s += time.perf_counter() - start
            raw_windows += len(texts)
            paired_ingest_s += seconds
            paired_ingest_windows += staged.n_windows
    bar.close()
    wall = time.perf_counter() - bar.start
    out: dict[str, Any] = {
        "books": len(todo),
        "words": sum(words.values()),
        "windows": windows,
        "wall_s": round(wall, 1),
        "ingest_windows_per_s": round(windows / max(ingest_s, 1e-9), 1),
        "peak_rss_mb": peak_rss_mb(),
        "library_disk_mb": disk_mb(library),
        "segments": len(lib.index.segments()),
    }
    if raw_windows:
        ingest_rate = paired_ingest_windows / paired_ingest_s
        raw_rate = raw_windows / raw_s
        out["paired"] = {
            "books": len(range(0, len(todo), RAW_EVERY)),
            "ingest_windows_per_s": round(ingest_rate, 1),
            "raw_encoder_windows_per_s": round(raw_rate, 1),
            "ingest_over_raw": round(ingest_rate / raw_rate, 3),
        }
    if bar.eta_at_10pct is not None:
        at, predicted = bar.eta_at_10pct
        out["eta_after_10pct"] = {
            "at_s": round(at, 1),
            "predicted_total_s": round(predicted, 1),
            "actual_total_s": round(wall, 1),
            "error": round(predicted / wall - 1, 3),
        }
    lib.close()
    return out


# --- the index-level library ----------------------------------------------------------------------------
def _copy_staged(
    lib: Library, book_id: str, copy: int, directory: Path, rng: np.random.Generator
) -> StagedRows:
    """A copy of the library's book under a new id: its rows staged as the ingest stages them, its window
    vectors with noise (renormalised)."""
    import apsw

    from folio.nodes.ingest.lexical import SCHEMA

    index = lib.index
    descriptor = dict(next(d for d in index.descriptors() if d["book_id"] == book_id))
    new_id = f"{book_id}-copy{copy:05d}"
    descriptor.update(
        book_id=new_id, title=f"{descriptor['title']} (copy {copy})", source_file=f"{new_id}.txt"
    )
    directory.mkdir(parents=True)
    conn = apsw.Connection(str(directory / "book.sqlite"))
    rows = index.chunk_rows(book_id)
    texts = {h.chunk_id: h.text for h in index.chunks_in(book_id)}
    rowid = {r[0]: i + 1 for i, r in enumerate(rows)}
    owners, vectors = index.window_vectors(book_id)
    spans = index.window_spans(book_id)
    with conn:
        conn.execute(SCHEMA)
        conn.executemany(
            "INSERT INTO chapters VALUES (?, ?, ?, ?)",
            [
                (c["chapter_id"], c["order"], c["title"], index.chapter_text(book_id, c["chapter_id"]))
                for c in descriptor["chapters"]
            ],
        )
        conn.executemany(
            "INSERT INTO chunks VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [(rowid[r[0]], *r, texts[r[0]]) for r in rows],
        )
        conn.executemany(
            "INSERT INTO windows VALUES (?, ?, ?, ?)",
            [(i, rowid[o], s, e) for i, (o, (_, s, e)) in enumerate(zip(owners, spans, strict=True))],
        )
    conn.close()
    noisy = vectors + rng.normal(0, NOISE, vectors.shape).astype(np.float32)
    noisy /= np.linalg.norm(noisy, axis=1, keepdims=True)
    np.save(directory / "vectors.npy", noisy.astype(np.float32))
    (directory / "book.json").write_text(json.dumps(descriptor), encoding="utf-8")
    return StagedRows(new_id, str(directory), descriptor, None)


def index_library(real: Path, target: Path, windows: int) -> dict[str, Any]:
    """The index-level library of about ``windows`` windows in ``target`` (built once: a ``built.json``
    marker records its parameters; a partial build is continued): the real library's books, then noisy
    copies of them committed ``COMMIT_BOOKS`` at a time."""
    marker = target / "built.json"
    want = {"windows": windows, "source": str(real), "noise": NOISE, "format": 1}
    if marker.exists() and json.loads(marker.read_text(encoding="utf-8")) == want:
        return {"built_s": None}
    if not (target / "library.sqlite").exists():
        shutil.copytree(real, target, ignore=shutil.ignore_patterns("cache", "staging", "trash", ".lock"))
    source, lib = Library(real), Library(target)
    originals = [b["book_id"] for b in source.descriptors()]
    start = time.perf_counter()
    rng = np.random.default_rng(30)
    with lib.writer():
        index = shared_index(lib.path)
        copy = sum(1 for b in lib.descriptors() if "-copy" in b["book_id"])
        while sum(s.live for s in index.segments()) < windows:
            work = lib.new_staging_dir("copies")
            staged = []
            for j in range(COMMIT_BOOKS):
                staged.append(
                    _copy_staged(source, originals[copy % len(originals)], copy, work / str(j), rng)
                )
                copy += 1
            index.commit(add=staged, settings=VectorSettings())
            shutil.rmtree(work, ignore_errors=True)
        lib.sync_catalog()
    seconds = time.perf_counter() - start
    source.close()
    lib.close()
    marker.write_text(json.dumps(want), encoding="utf-8")
    return {"built_s": round(seconds, 1)}


def _warm_latency(lib: Library, rounds: int) -> dict[str, dict[str, float]]:
    """p50/p95 of ``api.search`` (k = 10) per mode, ``rounds`` rounds of ``QUERIES``, modes interleaved."""
    from folio.dataflows.api import search
    from folio.dataflows.config import load_config
    from folio.nodes.backends.encoder import load_encoder

    encoder = load_encoder(*(load_config()[k] for k in ("embedding_model", "encoder_precision")))
    index = lib.index
    times: dict[str, list[float]] = {
        "hybrid": [],
        "lexical": [],
        "query_encoding": [],
        "semantic_index": [],
        "lexical_index": [],
    }
    for _ in range(rounds):
        for query in QUERIES:
            for mode in ("hybrid", "lexical"):
                t0 = time.perf_counter()
                search(query, library=lib, mode=mode, k=10)
                times[mode].append((time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()
            vector = encoder.encode_query(query)
            times["query_encoding"].append((time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()
            index.semantic(vector, 10)
            times["semantic_index"].append((time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()
            index.lexical(query, 10)
            times["lexical_index"].append((time.perf_counter() - t0) * 1000)
    return {name: latency_summary(values) for name, values in times.items()}


def index_measurement(library: str, book_file: str, rounds: int = 5) -> dict[str, Any]:
    """In a fresh process: the first hybrid search after opening, warm hybrid p50/p95, open files, RSS,
    then adding ``book_file`` (real ingest) and removing it, and a compaction; the library is left with
    the same books (its segments compacted)."""
    from folio.dataflows.api import ingest, search
    from folio.dataflows.config import load_config
    from folio.nodes.backends.encoder import load_encoder

    config = load_config()
    load_encoder(config["embedding_model"], config.get("encoder_precision", "auto")).encode(["warm"])
    start = time.perf_counter()
    lib = Library(library)
    search(QUERIES[0], library=lib, mode="hybrid", k=10)
    out: dict[str, Any] = {"first_hybrid_after_open_s": round(time.perf_counter() - start, 3)}
    index = lib.index
    out["windows"] = sum(s.live for s in index.segments())
    out["books"] = len(lib.book_ids())
    out["segments"] = len(index.segments())
    out["warm"] = _warm_latency(lib, rounds)
    out["open_files"] = open_files()
    out["rss_mb"] = rss_mb()
    out["disk_mb"] = disk_mb(Path(library))
    start = time.perf_counter()
    report = ingest([book_file], library=lib, cache=False)
    out["add_one_book_s"] = round(time.perf_counter() - start, 2)
    if not report.ok:
        raise FolioError(book_file, f"ingest failed: {report.errors[0]}")
    out["segments_after_add"] = len(index.segments())
    start = time.perf_counter()
    with lib.writer():
        lib.remove(report.ingested[0].book_id)
    out["remove_one_book_s"] = round(time.perf_counter() - start, 2)
    start = time.perf_counter()
    with lib.writer():
        before = len(index.segments())
        index.compact()
    out["compact"] = {"segments_before": before, "seconds": round(time.perf_counter() - start, 1)}
    out["warm_after_compact"] = _warm_latency(lib, rounds)  # one vector segment, FTS5 optimised
    out["peak_rss_mb"] = peak_rss_mb()
    lib.close()
    return out


def add_to_empty(book_file: str, scratch: str) -> float:
    """Seconds to ingest ``book_file`` into an empty library (a fresh process, encoder loaded first)."""
    from folio.dataflows.api import ingest
    from folio.dataflows.config import load_config
    from folio.nodes.backends.encoder import load_encoder

    config = load_config()
    load_encoder(config["embedding_model"], config.get("encoder_precision", "auto")).encode(["warm"])
    start = time.perf_counter()
    report = ingest([book_file], library=scratch, cache=False)
    seconds = time.perf_counter() - start
    if not report.ok:
        raise FolioError(book_file, f"ingest failed: {report.errors[0]}")
    Library(scratch).close()
    return seconds


def dask_comparison(files: Sequence[Path], scratch: Path) -> dict[str, Any]:
    """Seconds to ingest ``files`` into a fresh library on the local executor (this machine's default
    workers) and on a Dask LocalCluster of 2 workers (node and embedding caches empty for both)."""
    from folio.dataflows.api import ingest
    from folio.nodes.backends.workers import available_cores

    out: dict[str, Any] = {"books": len(files), "cores": available_cores()}
    for name, config in (
        ("local", {"executor": "local"}),
        ("dask_2_workers", {"executor": "dask", "workers": 2}),
    ):
        target = scratch / name
        shutil.rmtree(target, ignore_errors=True)
        start = time.perf_counter()
        report = ingest(list(files), library=target, config=config, cache=False)
        out[name] = {
            "wall_s": round(time.perf_counter() - start, 1),
            "failed": [str(e) for e in report.errors],
        }
        Library(target).close()
        shutil.rmtree(target, ignore_errors=True)
    out["dask_over_local"] = round(out["dask_2_workers"]["wall_s"] / out["local"]["wall_s"], 2)
    return out


def fullsize_bench(
    data_dir: Path,
    work_dir: Path,
    books: int = BOOKS,
    words: int = BOOK_WORDS,
    windows: int = INDEX_WINDOWS,
    dask_books: int = 4,
    out_dir: Path | None = None,
    parts: Sequence[str] = ("ingest", "index", "dask"),
) -> dict[str, Any]:
    """The fullsize section (see the module docstring); everything big is kept in ``work_dir``."""
    work_dir.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {"load_average_at_start": [round(x, 2) for x in os.getloadavg()]}
    chapters = source_chapters(data_dir)
    library_books = fullsize_books(chapters, books, words)
    files = [write_fullsize_book(b, work_dir / f"books-{words}") for b in library_books]
    extra = write_fullsize_book(fullsize_books(chapters, 1, words, seed=31)[0], work_dir / f"added-{words}")
    result["source_chapters"] = len(chapters)
    result["book_words"] = [min(b.words for b in library_books), max(b.words for b in library_books)]
    real = work_dir / f"library-{books}x{words}"
    if "ingest" in parts:
        result["real_ingest"] = in_fresh_process(real_ingest, files, real)
    if "index" in parts and (real / "library.sqlite").exists():
        target = work_dir / f"index-{windows}"
        result["index_build"] = index_library(real, target, windows)
        result["index"] = in_fresh_process(index_measurement, str(target), str(extra))
        scratch = work_dir / "empty"
        shutil.rmtree(scratch, ignore_errors=True)
        result["add_to_empty_s"] = round(in_fresh_process(add_to_empty, str(extra), str(scratch)), 2)
        shutil.rmtree(scratch, ignore_errors=True)
    if "dask" in parts:
        result["dask"] = in_fresh_process(dask_comparison, files[:dask_books], work_dir / "dask")
    result["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "fullsize.md").write_text(fullsize_table(result) + "\n", encoding="utf-8")
        result["plot"] = str(fullsize_plot(result, SMALL_BOOK_ROWS, out_dir / "fullsize.png"))
    return result
