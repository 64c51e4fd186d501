"""The ``fullsize`` section of ``make bench``: libraries of full-length books and a 2 M-window index.

``source_chapters`` parses every book file of the shared data (``books/`` and ``formats/``) with the
ingest's own parser and keeps each distinct chapter of at least ``MIN_CHAPTER_WORDS`` words;
``fullsize_books`` recombines those whole chapters into distinct books of about ``BOOK_WORDS`` words
(each book draws its chapters without repeats, seeded), written as plain-text files with Gutenberg-style
``CHAPTER n. title`` headings so the ingest finds the same chapters.

``real_ingest`` ingests the books into one library as ``folio ingest`` does, with the default config and
executor (on 2 cores: two worker processes), ``INGEST_BATCH`` books per ``folio.dataflows.api.ingest``,
caches off (no node result and no window vector reused: books recombined from the same chapters would
otherwise share vectors), under one progress bar over words with an ETA, advanced as each book
finishes. After each batch the raw encoder (one process, its default threads) re-encodes every
``RAW_EVERY``-th book of it, so the two rates are taken side by side (this machine's speed drifts by a
third within an hour); the bar's clock stops meanwhile. It records the ETA after the first 10% of the
words against the final time, the peak RSS of the ingest's processes, and the library's size on disk.
A run that dies (kill -9) is rerun by calling it again: books already in the library are skipped
(``pending_books``), each is ingested once.

``index_library`` builds the index-level library of ``windows`` windows: the real ingested books'
chapters, chunks and windows (real text, the encoder's vectors), copied under new ids until the window
count is reached, the copies' vectors being the originals plus Gaussian noise (``NOISE``), renormalised.
It is committed in batches through ``LibraryIndex.commit`` (so the vector segments form as they do
over a library's life) and kept in the work folder. ``index_measurement`` (run in a fresh process)
measures the first hybrid search after opening, warm hybrid p50/p95, open files, RSS, disk, adding one
real book and removing it, and a compaction (every segment folded into one); ``serve_start`` the time
``folio serve`` takes to answer on it, and its first search and ask.

``dask_comparison`` runs the same ingest (batches, raw-encoder passes) on a 2-worker Dask LocalCluster,
against the local executor (the real ingest's figures when it ingested the same books, else a run of
its own), in wall time and in windows/s against the raw encoder.

Config keys: none of its own (the default config). Limitations: cold means a fresh process with the
operating system's page cache as the previous run left it (dropping it needs root and would disturb the
machine's other work); the copies' text repeats the real books', so the lexical index's postings are
denser than a library of distinct books of the same size.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import resource
import shutil
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from bench.fullsize_report import SMALL_BOOK_ROWS, fullsize_plot, fullsize_table
from bench.measuring import latency_summary
from bench.scaling import in_fresh_process, open_files, rss_mb, tree_rss_mb
from folio.dataflows.library import Library, shared_index
from folio.nodes.backends.library_index import StagedRows, VectorSettings
from folio.nodes.backends.postings_runs import KEPT
from folio.nodes.backends.progress import Progress
from folio.nodes.core.types import FolioError

BOOKS = 100
BOOK_WORDS = 90_000
INDEX_WINDOWS = 2_000_000
MIN_CHAPTER_WORDS = 800
NOISE = 0.05  # standard deviation per dimension of the noise added to a recycled vector (then renormalised)
COMMIT_BOOKS = 8  # index-level copies committed per transaction
RAW_EVERY = 5  # the raw encoder re-encodes every fifth book's windows
INGEST_BATCH = 20  # books per api.ingest in the real ingest (the raw encoder runs between batches)
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


def added_book(chapters: Sequence[tuple[str, str]], words: int = BOOK_WORDS) -> FullBook:
    """The book the index-level run adds and removes: other chapters than book 1's, under a title no
    library book has (a file named as one of them would replace that book, and its removal then take
    the book out of the library)."""
    return replace(fullsize_books(chapters, 1, words, seed=31)[0], title="Full Book Added")


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
    """One tqdm bar over the words of the whole run (known up front), advanced as each book of the ingest
    finishes (by its words); its clock stops while ``paused`` (the bench's raw-encoder passes, which a
    user's ingest does not have); remembers its ETA when the run passes 10%."""

    def __init__(self, total_words: int) -> None:
        from tqdm import tqdm

        self.total = total_words
        self.done = 0.0
        self.start = time.perf_counter()
        self.paused_s = 0.0
        self.eta_at_10pct: tuple[float, float] | None = None  # (elapsed s, predicted total s)
        self.bar = tqdm(total=total_words, desc="fullsize ingest", unit="word", unit_scale=True)

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.start - self.paused_s

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.paused_s += time.perf_counter() - start

    def advance(self, words: float) -> None:
        self.done += words
        self.bar.update(words)
        if self.eta_at_10pct is None and self.done >= 0.1 * self.total:
            elapsed = self.elapsed
            self.eta_at_10pct = (elapsed, elapsed * self.total / self.done)

    def close(self) -> None:
        self.bar.close()


class BooksDone(Progress):
    """The ingest's per-book events (``book_finished``, wherever the book ran) as words on a ``WordsBar``."""

    def __init__(self, bar: WordsBar, words: dict[str, int]) -> None:
        self.bar, self.words = bar, words

    def book_finished(self, source_file: str, n_chunks: int) -> None:
        self.bar.advance(self.words.get(Path(source_file).name, 0))


class PeakTreeRss:
    """The peak resident memory of this process and its workers, sampled every ``every`` seconds."""

    def __init__(self, every: float = 1.0) -> None:
        import threading

        self.peak, self.every = 0.0, every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, tree_rss_mb())
            self._stop.wait(self.every)

    def __enter__(self) -> PeakTreeRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def _window_texts(lib: Library, book_id: str) -> list[str]:
    store = lib.store(book_id)
    return [store.chapter_text(ch)[s:e] for ch, s, e in lib.index.window_spans(book_id)]


def _warm_encoder() -> Any:
    """The default config's encoder (loaded once per process), after one warm-up call."""
    from folio.dataflows.config import load_config
    from folio.nodes.backends.encoder import load_encoder

    config = load_config()
    encoder = load_encoder(config["embedding_model"], config.get("encoder_precision", "auto"))
    encoder.encode(["warm up the encoder"])
    return encoder


def _raw_encoder_s(lib: Library, book_ids: Sequence[str]) -> tuple[int, float]:
    """Windows and seconds of the encoder alone (this process, its default threads) on ``book_ids``'s
    windows."""
    from folio.dataflows.config import load_config

    encoder, batch_size = _warm_encoder(), int(load_config()["embedding_batch_size"])
    seconds, windows = 0.0, 0
    for book_id in book_ids:
        texts = _window_texts(lib, book_id)
        start = time.perf_counter()
        encoder.encode(texts, batch_size)
        seconds += time.perf_counter() - start
        windows += len(texts)
    return windows, seconds


def real_ingest(
    files: Sequence[Path], library: Path, config: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Ingest the pending ``files`` into ``library`` as ``folio ingest`` does (the default executor), caches
    off, ``INGEST_BATCH`` books per ``api.ingest``; after each batch the raw encoder re-encodes every
    ``RAW_EVERY``-th book of it, so both rates are taken side by side while the machine's speed drifts.
    ``config``: overrides of the default config (the Dask comparison's executor)."""
    from folio.dataflows.api import ingest

    lib = Library(library)
    todo = pending_books(lib, files)
    words = {f.name: len(f.read_text(encoding="utf-8").split()) for f in todo}
    load = [round(x, 2) for x in os.getloadavg()]
    bar = WordsBar(sum(words.values()))
    windows, raw_windows, raw_s = 0, 0, 0.0
    with PeakTreeRss() as memory:
        for lo in range(0, len(todo), INGEST_BATCH):
            report = ingest(
                todo[lo : lo + INGEST_BATCH],
                library=lib,
                config=dict(config) if config else None,
                cache=False,
                progress=BooksDone(bar, words),
            )
            if report.errors:
                raise FolioError(str(report.errors[0].source), f"ingest failed: {report.errors[0].reason}")
            windows += sum(s.n_windows for s in report.ingested)
            with bar.paused():
                n, seconds = _raw_encoder_s(lib, [s.book_id for s in report.ingested[::RAW_EVERY]])
            raw_windows, raw_s = raw_windows + n, raw_s + seconds
    bar.close()
    ingest_s = bar.elapsed
    out: dict[str, Any] = {
        "books": len(todo),
        "words": sum(words.values()),
        "windows": windows,
        "wall_s": round(ingest_s, 1),
        "ingest_windows_per_s": round(windows / max(ingest_s, 1e-9), 1),
        "load_average_before_after": [load, [round(x, 2) for x in os.getloadavg()]],
        "peak_rss_mb": round(memory.peak, 1),
        "library_disk_mb": disk_mb(library),
        "segments": len(lib.index.segments()),
    }
    if raw_windows:
        rate = round(raw_windows / raw_s, 1)
        out["raw_encoder"] = {
            "books": len(range(0, len(todo), RAW_EVERY)),
            "windows": raw_windows,
            "windows_per_s": rate,
            "ingest_over_raw": round(out["ingest_windows_per_s"] / rate, 3),
        }
    if bar.eta_at_10pct is not None:
        at, predicted = bar.eta_at_10pct
        out["eta_after_10pct"] = {
            "at_s": round(at, 1),
            "predicted_total_s": round(predicted, 1),
            "actual_total_s": round(ingest_s, 1),
            "error": round(predicted / ingest_s - 1, 3),
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
        return {"built_s": None, **_postings_written(target)}
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
    return {"built_s": round(seconds, 1), **_postings_written(target)}


def _postings_written(target: Path) -> dict[str, float]:
    """Write the term postings, word neighbours and postings runs of a library built before them
    (``write_every_postings``; ``write_runs`` when only the runs are missing), timed."""
    lib = Library(target)
    try:
        held = lib.index.settings()
        whole = held.get("postings") == "complete" and "neighbours" in held
        if whole and KEPT in held:
            return {}
        start = time.perf_counter()
        with lib.writer():
            lib.index.write_runs() if whole else lib.index.write_every_postings()
        return {"runs_written_s" if whole else "postings_written_s": round(time.perf_counter() - start, 1)}
    finally:
        lib.close()


def ten_book_library(work_dir: Path, data_dir: Path) -> Path:
    """The scaling section's library of 10 small books (``bench.scaling.bench_library``, MiniLM vectors),
    built once in ``work_dir``: what the 2 M-window latency is compared with."""
    from bench.scaling import bench_library
    from folio.dataflows.config import load_config
    from folio.nodes.backends.encoder import load_encoder

    config = load_config()
    encoder = load_encoder(config["embedding_model"], config.get("encoder_precision", "auto"))
    return bench_library(work_dir / "ten-books", data_dir, 10, encoder, str(config["vector_dtype"]))[0]


def _warm_latency(lib: Library, rounds: int) -> dict[str, dict[str, float]]:
    """p50/p95 of ``api.search`` (k = 10) per mode, ``rounds`` rounds of ``QUERIES``, modes interleaved."""
    from folio.dataflows.api import search

    encoder = _warm_encoder()
    index = lib.index
    times: dict[str, list[float]] = {
        "hybrid": [],
        "lexical": [],
        "query_encoding": [],
        "semantic_index": [],
        "lexical_index": [],
        "lexical_per_book": [],
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
            t0 = time.perf_counter()
            index.lexical(query, 1, per_book=True)  # the router's statement: each book's best chunk
            times["lexical_per_book"].append((time.perf_counter() - t0) * 1000)
    return {name: latency_summary(values) for name, values in times.items()}


def ten_book_ratio(lib: Library, small: str, rounds: int) -> dict[str, Any]:
    """Warm hybrid ``api.search`` (k = 10) of ``lib`` and of the 10-book library ``small``, the two
    interleaved query by query in this process (the same load on both): their p50/p95 and the ratio of
    the p50s, what issue 30's target compares."""
    from folio.dataflows.api import search

    other = Library(small)
    for query in QUERIES:  # a warm-up round of the small library
        search(query, library=other, mode="hybrid", k=10)
    times: dict[str, list[float]] = {"library": [], "ten_books": []}
    for _ in range(rounds):
        for query in QUERIES:
            for name, each in (("library", lib), ("ten_books", other)):
                t0 = time.perf_counter()
                search(query, library=each, mode="hybrid", k=10)
                times[name].append((time.perf_counter() - t0) * 1000)
    other.close()
    out: dict[str, Any] = {name: latency_summary(values) for name, values in times.items()}
    out["p50_ratio"] = round(out["library"]["p50_ms"] / out["ten_books"]["p50_ms"], 2)
    return out


def index_measurement(
    library: str, book_file: str, rounds: int = 5, compact: bool = True, small: str | None = None
) -> dict[str, Any]:
    """In a fresh process: the first hybrid search after opening, warm hybrid p50/p95, open files, RSS,
    then adding ``book_file`` (real ingest) and removing it, and (``compact``) a compaction; the library is
    left with the same books (its segments compacted when ``compact``)."""
    from folio.dataflows.api import ingest, search

    _warm_encoder()
    start = time.perf_counter()
    lib = Library(library)
    search(QUERIES[0], library=lib, mode="hybrid", k=10)
    out: dict[str, Any] = {"first_hybrid_after_open_s": round(time.perf_counter() - start, 3)}
    index = lib.index
    out["windows"] = sum(s.live for s in index.segments())
    out["books"] = len(lib.book_ids())
    out["segments"] = len(index.segments())
    out["warm"] = _warm_latency(lib, rounds)
    if small is not None:
        out["against_ten_books"] = ten_book_ratio(lib, small, rounds)
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
    if compact:  # not with ``--fullsize-skip-compact``: at 2 M windows this rebuilds one HNSW of them all
        start = time.perf_counter()
        with lib.writer():
            before = len(index.segments())
            index.compact()
        out["compact"] = {"segments_before": before, "seconds": round(time.perf_counter() - start, 1)}
        out["warm_after_compact"] = _warm_latency(lib, rounds)  # one vector segment, FTS5 optimised
        if small is not None:
            out["against_ten_books_after_compact"] = ten_book_ratio(lib, small, rounds)
    out["peak_rss_mb"] = peak_rss_mb()
    lib.close()
    return out


def serve_start(library: str) -> dict[str, float]:
    """``folio serve`` on ``library`` (a new process): seconds until it answers ``/api/health``, then the
    first hybrid ``/api/search`` and the first ``/api/ask``."""
    import httpx

    from bench.measuring import free_port
    from bench.serve_bench import served

    port = free_port()
    start = time.perf_counter()
    process = served(Path(library), port)
    out = {"ready_s": round(time.perf_counter() - start, 2)}
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as client:
            for name, call in (
                ("first_search_s", lambda: client.get("/api/search", params={"q": QUERIES[1]})),
                ("first_ask_s", lambda: client.post("/api/ask", json={"question": QUERIES[2]})),
            ):
                t0 = time.perf_counter()
                response = call()
                if response.status_code != 200:
                    raise FolioError("folio serve", f"{name}: HTTP {response.status_code}")
                out[name] = round(time.perf_counter() - t0, 3)
    finally:
        process.terminate()
        process.wait(timeout=30)
    return out


def add_to_empty(book_file: str, scratch: str) -> float:
    """Seconds to ingest ``book_file`` into an empty library (a fresh process, encoder loaded first)."""
    from folio.dataflows.api import ingest

    _warm_encoder()
    start = time.perf_counter()
    report = ingest([book_file], library=scratch, cache=False)
    seconds = time.perf_counter() - start
    if not report.ok:
        raise FolioError(book_file, f"ingest failed: {report.errors[0]}")
    Library(scratch).close()
    return seconds


def dask_comparison(files: Sequence[Path], scratch: Path, local: Mapping[str, Any] | None) -> dict[str, Any]:
    """``real_ingest`` of ``files`` into a fresh library on a Dask LocalCluster of 2 workers, beside the local
    executor's (``local``: the real ingest's figures when it ingested the same books, else a run of its
    own). Each run's windows/s is also taken against the raw encoder measured between its batches, so a
    drift in the machine's speed between the two runs does not pass for a difference of executors."""
    from folio.nodes.backends.workers import available_cores

    out: dict[str, Any] = {"books": len(files), "cores": available_cores()}
    runs: dict[str, Mapping[str, Any]] = {"dask_2_workers": {"executor": "dask", "workers": 2}}
    if local is None:
        runs = {"local": {"executor": "local"}, **runs}
    else:
        out["local"] = {**local, "from": "the real ingest"}
    for name, config in runs.items():
        target = scratch / name
        shutil.rmtree(target, ignore_errors=True)
        out[name] = real_ingest(files, target, config)
        shutil.rmtree(target, ignore_errors=True)
    dask, local_run = out["dask_2_workers"], out["local"]
    out["dask_over_local"] = round(dask["wall_s"] / local_run["wall_s"], 2)
    if "raw_encoder" in dask and "raw_encoder" in local_run:
        out["dask_over_local_against_raw"] = round(
            dask["raw_encoder"]["ingest_over_raw"] / local_run["raw_encoder"]["ingest_over_raw"], 2
        )
    return out


def fullsize_bench(
    data_dir: Path,
    work_dir: Path,
    books: int = BOOKS,
    words: int = BOOK_WORDS,
    windows: int = INDEX_WINDOWS,
    dask_books: int | None = None,
    out_dir: Path | None = None,
    parts: Sequence[str] = ("ingest", "index", "dask"),
    compact: bool = True,
) -> dict[str, Any]:
    """The fullsize section (see the module docstring); everything big is kept in ``work_dir``."""
    work_dir.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {"load_average_at_start": [round(x, 2) for x in os.getloadavg()]}
    chapters = source_chapters(data_dir)
    library_books = fullsize_books(chapters, books, words)
    files = [write_fullsize_book(b, work_dir / f"books-{words}") for b in library_books]
    extra = write_fullsize_book(added_book(chapters, words), work_dir / f"added-{words}")
    result["source_chapters"] = len(chapters)
    result["book_words"] = [min(b.words for b in library_books), max(b.words for b in library_books)]
    real = work_dir / f"library-{books}x{words}"
    ingested_json = work_dir / f"real-ingest-{books}x{words}.json"  # for a later run of the dask part
    if "ingest" in parts:
        result["real_ingest"] = in_fresh_process(real_ingest, files, real)
        ingested_json.write_text(json.dumps(result["real_ingest"], indent=2), encoding="utf-8")
    if "index" in parts and (real / "library.sqlite").exists():
        target = work_dir / f"index-{windows}"
        result["index_build"] = index_library(real, target, windows)
        small = str(ten_book_library(work_dir, data_dir))
        result["index"] = in_fresh_process(index_measurement, str(target), str(extra), 5, compact, small)
        result["serve"] = serve_start(str(target))
        scratch = work_dir / "empty"
        shutil.rmtree(scratch, ignore_errors=True)
        result["add_to_empty_s"] = round(in_fresh_process(add_to_empty, str(extra), str(scratch)), 2)
        shutil.rmtree(scratch, ignore_errors=True)
    if "dask" in parts:
        dask_files = files if dask_books is None else files[:dask_books]
        ingested = result.get("real_ingest") or (
            json.loads(ingested_json.read_text(encoding="utf-8")) if ingested_json.exists() else {}
        )
        local = ingested if ingested.get("books") == len(files) == len(dask_files) else None
        result["dask"] = in_fresh_process(dask_comparison, dask_files, work_dir / "dask", local)
    result["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "fullsize.md").write_text(fullsize_table(result) + "\n", encoding="utf-8")
        result["plot"] = str(fullsize_plot(result, SMALL_BOOK_ROWS, out_dir / "fullsize.png"))
    return result
