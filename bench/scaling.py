"""Generated libraries of many small books, for the scaling bench and the resource tests.

``small_books`` cuts the shared plain-text books (Project Gutenberg boilerplate removed) into ``n``
consecutive pieces of about ``words`` words each (fewer when the texts run short), each a book of one
chapter. ``generated_library`` commits them straight into a library's indexes in batches, one chunk
per book and windows of about 90 words, embedded by the given encoder or, without one, by
deterministic pseudo-random unit vectors (resource tests: the files and code paths are real, the
meanings are not). ``folio ingest`` of the same books' files (``write_book_files``) gives the same
kind of library through the real ingest DAG, at the cost of parsing and embedding each.

``scaling_bench`` is the scaling section of ``make bench``: generated libraries of 10, 100 and 1,000
books with MiniLM vectors (kept in a work folder between runs, their window vectors remembered by
``MemoEncoder``), search latency of all sizes interleaved in one fresh process (``search_latencies``),
open files, RSS and the cost of adding a book with the real ingest per size in fresh processes
(``size_measurement``), the CLI under ``ulimit -n 256``, and the HNSW scalar kinds compared against
exact float32 search (``scalar_kind_measurement``; FairytaleQA over a whole library with
``fairytaleqa_by_scalar_kind``), and ``folio sync`` of an unchanged library of 1,000 books
(``sync_measurement``); ``scaling_table`` and ``scaling_plot`` report it.

Limitations: the generated books are one chunk each, so the lexical index holds as many chunks as
books; a library of long books has more postings per query word at the same number of books.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from bench.measuring import latency_summary
from folio.dataflows.library import Library, shared_index
from folio.nodes.backends.library_index import StagedRows, VectorSettings, best_per_chunk, vector_matrix
from folio.nodes.core.types import Chapter, Chunk, FolioError, Manifest, Window
from folio.nodes.ingest.lexical import write_store

WINDOW_WORDS = 90
_START = re.compile(r"\*\*\* ?START OF (THIS|THE) PROJECT GUTENBERG[^\n]*\n")
_END = re.compile(r"\*\*\* ?END OF (THIS|THE) PROJECT GUTENBERG")


@dataclass(frozen=True)
class SmallBook:
    title: str
    text: str


def _body(text: str) -> str:
    start = _START.search(text)
    end = _END.search(text)
    return text[start.end() if start else 0 : end.start() if end else len(text)]


def small_books(data_dir: Path, n: int, words: int = 400) -> list[SmallBook]:
    """``n`` books of about ``words`` words cut in order from ``data_dir/books/txt/*.txt``."""
    tokens: list[str] = []
    for path in sorted((data_dir / "books" / "txt").glob("*.txt")):
        tokens.extend(_body(path.read_text(encoding="utf-8")).split())
    size = max(20, min(words, len(tokens) // max(n, 1)))
    return [SmallBook(f"Piece {i + 1:04d}", " ".join(tokens[i * size : (i + 1) * size])) for i in range(n)]


def write_book_files(books: Sequence[SmallBook], directory: Path) -> list[Path]:
    """The books as plain-text files (a title line, then the text) for ``folio ingest``."""
    directory.mkdir(parents=True, exist_ok=True)
    out = []
    for book in books:
        path = directory / f"{book.title.lower().replace(' ', '-')}.txt"
        path.write_text(f"{book.title}\n\n{book.text}\n", encoding="utf-8")
        out.append(path)
    return out


def _hashed_vectors(texts: Sequence[str], ndim: int = 384) -> np.ndarray:
    """Deterministic pseudo-random unit vectors, one per text (no model)."""
    rows = []
    for text in texts:
        seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
        v = np.random.default_rng(seed).standard_normal(ndim).astype(np.float32)
        rows.append(v / np.linalg.norm(v))
    return np.stack(rows) if rows else np.zeros((0, ndim), dtype=np.float32)


def _staged(
    book: SmallBook, directory: Path, model: str, source: Path | None = None
) -> tuple[StagedRows, list[str]]:
    """One small book staged as the ingest DAG stages it: one chapter, one chunk, ~90-word windows
    (``source``: its file, recorded with its stamp as ingest records it, for ``folio sync``)."""
    digest = hashlib.sha1(book.text.encode()).hexdigest()
    book_id = f"{book.title.lower().replace(' ', '-')}-{digest[:8]}"
    chapter = Chapter(chapter_id=f"ch-{digest[:10]}", order=0, title=book.title, text=book.text)
    n_tokens = len(book.text.split())
    chunk = Chunk(
        chunk_id=f"{chapter.chapter_id}.000",
        chapter_id=chapter.chapter_id,
        ordinal=0,
        start=0,
        end=len(book.text),
        n_tokens=n_tokens,
        text=book.text,
    )
    spans = [m.span() for m in re.finditer(r"\S+", book.text)]
    windows: list[Window] = []
    texts: list[str] = []
    for i in range(0, max(len(spans), 1), WINDOW_WORDS):
        part = spans[i : i + WINDOW_WORDS] or [(0, len(book.text))]
        start, end = part[0][0], part[-1][1]
        texts.append(book.text[start:end])
        windows.append(Window(len(windows), chunk.chunk_id, start, end, texts[-1]))
    manifest = Manifest(
        book_id=book_id,
        title=book.title,
        author="Generated",
        language="en",
        source_file=f"{book_id}.txt",
        format="txt",
        content_hash=digest,
        chapters=(chapter,),
    )
    directory.mkdir(parents=True)
    write_store(directory / "book.sqlite", manifest, (chunk,), tuple(windows))
    descriptor: dict[str, Any] = {
        "format_version": 1,
        "book_id": book_id,
        "title": book.title,
        "author": "Generated",
        "language": "en",
        "source_file": manifest.source_file,
        "format": "txt",
        "content_hash": digest,
        "embedding_model": model,
        "chunk_tokens": 800,
        "chunk_overlap": 0.1,
        "n_chunks": 1,
        "n_windows": len(windows),
        "chapters": [
            {
                "chapter_id": chapter.chapter_id,
                "order": 0,
                "title": book.title,
                "length": len(book.text),
                "n_chunks": 1,
            }
        ],
    }
    if source is not None:
        from folio.dataflows.calibre import file_stamp, stored_name

        descriptor.update(source_file=stored_name(source), **file_stamp(source))
    (directory / "book.json").write_text(json.dumps(descriptor), encoding="utf-8")
    return StagedRows(book_id, str(directory), descriptor, None), texts


def generated_library(
    path: Path,
    books: Sequence[SmallBook],
    encoder: Any = None,
    batch: int = 200,
    dtype: str = "i8",
    sources: Sequence[Path] | None = None,
) -> Library:
    """A library of ``books`` committed in batches (vectors from ``encoder``, else hashed); ``sources``:
    the books' files (``write_book_files``), recorded as ingest records them."""
    lib = Library(path)
    model = encoder.model_id if encoder is not None else "generated"
    with lib.writer():
        index = shared_index(lib.path)
        for start in range(0, len(books), batch):
            work = lib.new_staging_dir("generated")
            staged = []
            for i, book in enumerate(books[start : start + batch]):
                source = sources[start + i] if sources is not None else None
                rows, texts = _staged(book, work / str(i), model, source)
                vectors = encoder.encode(texts) if encoder is not None else _hashed_vectors(texts)
                np.save(Path(rows.directory) / "vectors.npy", np.asarray(vectors, dtype=np.float32))
                staged.append(rows)
            index.commit(add=staged, settings=VectorSettings(dtype=dtype))
            shutil.rmtree(work, ignore_errors=True)
        lib.sync_catalog()
    return lib


# --- folio sync of an unchanged library (in the scaling section) -------------------------------------
SYNC_BOOKS = 1_000
TARGET_SECONDS = 5.0


def _plan_seconds(folder: Path, library: Any) -> tuple[float, Any]:
    from folio.dataflows.api import book_sources
    from folio.dataflows.syncing import sync_plan, sync_roots

    start = time.perf_counter()
    plan = sync_plan(book_sources([folder]), library.descriptors(), sync_roots([folder]))
    return time.perf_counter() - start, plan


def sync_measurement(data_dir: Path, work: Path, n: int = SYNC_BOOKS) -> dict[str, Any]:
    """``folio sync`` of an unchanged library of ``n`` generated books (issue 28: under 5 s for 1,000):
    the books written as text files and committed with their files' stamps (hashed vectors: nothing is
    embedded); the whole command in a fresh process, the plan alone, and the plan after every file's
    mtime changed (each file hashed, all still unchanged)."""
    import subprocess
    import sys

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


# --- the scaling bench (``make bench``, section "scaling") ---------------------------------------------

SCALING_SIZES = (10, 100, 1000)
BENCH_MODES = ("lexical", "hybrid")
SCALAR_KINDS = ("f32", "f16", "i8")
ROUNDS = 3
LOOP_SEARCHES = 1000
ADDED_BOOKS = 3
FD_LIMIT = 256  # the ``ulimit -n`` under which the CLI's hybrid search must work
QUESTIONS = (
    "why did Alice follow the White Rabbit down the hole",
    "what was written on the little bottle",
    "how did Alice grow so tall in the hall",
    "who was crying a pool of tears",
    "what did the Mouse tell about William the Conqueror",
    "a girl falls down a very deep well",
)


class MemoEncoder:
    """An encoder whose vectors are remembered by text, in memory and in an ``.npz`` file, so the bench's
    libraries of every size and scalar kind embed each window once across runs."""

    def __init__(self, encoder: Any, path: Path) -> None:
        self.encoder = encoder
        self.model_id: str = encoder.model_id
        self.embedder_id: str = getattr(encoder, "embedder_id", encoder.model_id)
        self.path = path
        self.vectors: dict[str, np.ndarray] = {}
        self.fresh = 0
        if path.exists():
            with np.load(path) as saved:
                self.vectors = dict(zip(saved["keys"].tolist(), saved["vectors"], strict=True))

    @staticmethod
    def _key(text: str) -> str:
        return hashlib.sha1(text.encode()).hexdigest()

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """L2-normalised float32 vectors, one row per text (the encoder's, remembered)."""
        missing = list(dict.fromkeys(t for t in texts if self._key(t) not in self.vectors))
        if missing:
            for text, vector in zip(missing, self.encoder.encode(missing), strict=True):
                self.vectors[self._key(text)] = np.asarray(vector, dtype=np.float32)
            self.fresh += len(missing)
        return np.stack([self.vectors[self._key(t)] for t in texts])

    def save(self) -> None:
        """Write the remembered vectors (when any are new)."""
        if not self.fresh:
            return
        keys = np.array(list(self.vectors), dtype="<U40")
        tmp = self.path.with_suffix(".tmp.npz")
        np.savez(tmp, keys=keys, vectors=np.stack(list(self.vectors.values())))
        tmp.replace(self.path)
        self.fresh = 0


def bench_library(
    work_dir: Path, data_dir: Path, size: int, encoder: Any, dtype: str = "i8", words: int = 400
) -> tuple[Path, float | None]:
    """The generated library of ``size`` books (``words`` words each) with ``dtype`` HNSW, built once in
    ``work_dir`` and reused while its parameters match; returns its path and the build seconds (None
    when reused)."""
    path = work_dir / f"library-{size}-{dtype}"
    marker = work_dir / f"library-{size}-{dtype}.json"
    want = {
        "size": size,
        "dtype": dtype,
        "words": words,
        "model": getattr(encoder, "embedder_id", encoder.model_id),
        "format": 1,
    }
    if (
        marker.exists()
        and (path / "library.sqlite").exists()
        and json.loads(marker.read_text(encoding="utf-8")) == want
    ):
        return path, None
    marker.unlink(missing_ok=True)
    shutil.rmtree(path, ignore_errors=True)
    start = time.perf_counter()
    lib = generated_library(path, small_books(data_dir, size, words), encoder=encoder, dtype=dtype)
    lib.close()
    seconds = time.perf_counter() - start
    marker.write_text(json.dumps(want), encoding="utf-8")
    return path, seconds


def scaling_queries(data_dir: Path, n: int = 20, seed: int = 17) -> list[str]:
    """``n`` runs of 4–9 consecutive words from the ten books every bench library starts with (seeded),
    then ``QUESTIONS``: each query finds its words in every library, whatever its size."""
    rng = random.Random(seed)
    pieces = [b.text.split() for b in small_books(data_dir, 10)]
    out: list[str] = []
    while len(out) < n:
        words = rng.choice(pieces)
        start = rng.randrange(0, len(words) - 10)
        out.append(" ".join(words[start : start + rng.randint(4, 9)]))
    return out + list(QUESTIONS)


def added_books(data_dir: Path, n: int = ADDED_BOOKS, words: int = 400) -> list[SmallBook]:
    """``n`` books of ``words`` words cut from the end of the shared texts, titled "Added piece i": the
    book added to each bench library (for the 1,000-book library the words of its last books, under
    another title, which costs the ingest the same work)."""
    tokens: list[str] = []
    for path in sorted((data_dir / "books" / "txt").glob("*.txt")):
        tokens.extend(_body(path.read_text(encoding="utf-8")).split())
    tail = tokens[-n * words :]
    return [SmallBook(f"Added piece {i + 1}", " ".join(tail[i * words : (i + 1) * words])) for i in range(n)]


def open_files() -> int:
    """File descriptors this process holds open (``/proc/self/fd``)."""
    return len(os.listdir("/proc/self/fd"))


def _proc_status(process: Path) -> dict[str, str]:
    """The fields of ``/proc/PID/status`` (``process`` is the ``/proc/PID`` folder), name to value."""
    lines = (process / "status").read_text(encoding="utf-8").splitlines()
    return dict(
        (name, value.strip()) for name, value in (line.split(":", 1) for line in lines if ":" in line)
    )


def _rss_kb(fields: dict[str, str]) -> int:
    return int(fields.get("VmRSS", "0 kB").split()[0])


def rss_mb() -> float:
    """This process's resident memory now, in MB (``/proc/self/status``)."""
    return round(_rss_kb(_proc_status(Path("/proc/self"))) / 1024, 1)


def tree_rss_mb(root: int | None = None) -> float:
    """Resident memory of a process and all its descendants now, in MB (``/proc``; pages shared between
    processes count in each)."""
    parent: dict[int, int] = {}
    rss: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = _proc_status(entry)
        except OSError:  # the process ended while we looked
            continue
        parent[int(entry.name)] = int(fields.get("PPid", "0") or 0)
        rss[int(entry.name)] = _rss_kb(fields)
    tree, frontier = set(), [root if root is not None else os.getpid()]
    while frontier:
        pid = frontier.pop()
        tree.add(pid)
        frontier += [child for child, up in parent.items() if up == pid and child not in tree]
    return round(sum(rss.get(pid, 0) for pid in tree) / 1024, 1)


def _elapsed_ms(call: Callable[[], Any]) -> float:
    start = time.perf_counter()
    call()
    return (time.perf_counter() - start) * 1000


def search_latencies(
    library_dirs: Sequence[str], queries: Sequence[str], rounds: int = ROUNDS
) -> list[dict[str, Any]]:
    """Warm search latency of each library, measured in one process with the libraries interleaved
    query by query (so that other work on the machine weighs on every size alike): p50/p95 of
    ``folio.dataflows.api.search`` per mode over ``rounds`` rounds of ``queries`` after one warm-up
    round, and the p50 of its parts: the library's index alone (``LibraryIndex.lexical``;
    ``LibraryIndex.semantic`` with the query vector given), the query encoding, and opening the
    stores of every book as ``api.search`` does (``Library.stores()``)."""
    from folio.dataflows.api import search
    from folio.dataflows.config import load_config
    from folio.nodes.backends.encoder import load_encoder

    encoder = load_encoder(*(load_config()[k] for k in ("embedding_model", "encoder_precision")))
    libs = [Library(d) for d in library_dirs]
    vectors = [encoder.encode_query(q) for q in queries]
    for lib in libs:
        for mode in BENCH_MODES:
            for query in queries:
                search(query, library=lib, mode=mode, k=10)
    names = (*BENCH_MODES, "lexical_index", "semantic_index", "query_encoding", "stores")
    times: list[dict[str, list[float]]] = [{name: [] for name in names} for _ in libs]
    for _ in range(rounds):
        for query, vector in zip(queries, vectors, strict=True):
            for lib, own in zip(libs, times, strict=True):
                index = lib.index
                for mode in BENCH_MODES:
                    own[mode].append(_elapsed_ms(partial(search, query, library=lib, mode=mode, k=10)))
                own["lexical_index"].append(_elapsed_ms(partial(index.lexical, query, 10)))
                own["semantic_index"].append(_elapsed_ms(partial(index.semantic, vector, 10)))
                own["query_encoding"].append(_elapsed_ms(partial(encoder.encode_query, query)))
                own["stores"].append(_elapsed_ms(lib.stores))
    out = []
    for lib, own in zip(libs, times, strict=True):
        out.append(
            {
                "books": len(lib.book_ids()),
                "searches": {
                    mode: {"queries": len(own[mode]), **latency_summary(own[mode])} for mode in BENCH_MODES
                },
                "parts_p50_ms": {
                    name: round(float(np.percentile(own[name], 50)), 2) for name in names[len(BENCH_MODES) :]
                },
            }
        )
        lib.close()
    return out


def size_measurement(
    library_dir: str,
    added_files: Sequence[str],
    scratch_dir: str,
    queries: Sequence[str],
    loop_searches: int = LOOP_SEARCHES,
) -> dict[str, Any]:
    """Resources and the cost of adding a book, on one library in one process (run it in a fresh one):
    RSS and open files after one round of ``queries`` in every mode, open files after
    ``loop_searches`` more searches (modes alternating), then the seconds to ingest each of
    ``added_files`` into the library and into an empty one (after one warm-up ingest), with the real
    ingest (``folio.dataflows.api.ingest``)."""
    from folio.dataflows.api import ingest, search

    lib = Library(library_dir)
    out: dict[str, Any] = {"books": len(lib.book_ids())}
    for mode in BENCH_MODES:
        for query in queries:
            search(query, library=lib, mode=mode, k=10)
    out["rss_mb"] = rss_mb()
    out["open_files"] = open_files()
    for i in range(loop_searches):
        search(queries[i % len(queries)], library=lib, mode=BENCH_MODES[i % len(BENCH_MODES)], k=10)
    out["open_files_after_loop"] = open_files()
    out["loop_searches"] = loop_searches

    scratch = Path(scratch_dir)
    warm = scratch / "warm-up"
    if not ingest([added_files[0]], library=warm).ok:
        raise FolioError(added_files[0], "the warm-up ingest failed")
    Library(warm).close()
    into_library, into_empty = [], []
    for i, path in enumerate(added_files):
        start = time.perf_counter()
        report = ingest([path], library=lib)
        into_library.append(time.perf_counter() - start)
        if not report.ok:
            raise FolioError(path, f"ingest into the bench library failed: {report.errors[0]}")
        empty = scratch / f"empty-{i}"
        start = time.perf_counter()
        report = ingest([path], library=empty)
        into_empty.append(time.perf_counter() - start)
        if not report.ok:
            raise FolioError(path, f"ingest into an empty library failed: {report.errors[0]}")
        Library(empty).close()
    out["add_one_book"] = {
        "into_library_s": round(float(np.median(into_library)), 2),
        "into_empty_s": round(float(np.median(into_empty)), 2),
        "extra_s": round(float(np.median(np.subtract(into_library, into_empty))), 2),
        "books_added": len(added_files),
    }
    out["books_after"] = len(lib.book_ids())
    out["open_files_after_ingest"] = open_files()
    lib.close()
    return out


def search_under_fd_limit(library_dir: Path, query: str, limit: int = FD_LIMIT) -> dict[str, Any]:
    """Run the CLI's hybrid ``folio search`` on the library in a process whose open-file limit is
    ``limit`` (``ulimit -n``): whether it succeeded, and its last line on failure."""
    import resource
    import subprocess
    import sys

    def lower_limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "folio.dataflows.cli",
            "search",
            query,
            "--mode",
            "hybrid",
            "-k",
            "5",
            "--library",
            str(library_dir),
        ],
        capture_output=True,
        text=True,
        preexec_fn=lower_limit,
        check=False,
        env={**os.environ, "HAMILTON_TELEMETRY_ENABLED": "false"},
    )
    lines = (done.stderr or done.stdout).strip().splitlines()
    return {"limit": limit, "ok": done.returncode == 0, "detail": "" if done.returncode == 0 else lines[-1:]}


def _window_matrix(
    library_dir: Path,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[int, tuple[str, str]]]:
    """``(window keys, chunk rowids, float32 vectors)`` of every window of a library, and each chunk
    rowid's ``(book id, chunk id)``; read-only."""
    import apsw

    conn = apsw.Connection(str(library_dir / "library.sqlite"), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        rows = list(conn.execute("SELECT key, chunk_rowid, vector FROM windows ORDER BY key"))
        chunks = {r[0]: (r[1], r[2]) for r in conn.execute("SELECT rowid, book_id, chunk_id FROM chunks")}
    finally:
        conn.close()
    return (
        np.array([r[0] for r in rows], dtype=np.int64),
        np.array([r[1] for r in rows], dtype=np.int64),
        vector_matrix([r[2] for r in rows]),
        chunks,
    )


def library_queries(library_dir: Path, n: int = 200, seed: int = 23) -> list[str]:
    """``n`` runs of 5–12 consecutive words from random chunks of the library (seeded)."""
    import apsw

    conn = apsw.Connection(str(library_dir / "library.sqlite"), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        texts = [r[0] for r in conn.execute("SELECT text FROM chunks ORDER BY rowid")]
    finally:
        conn.close()
    rng = random.Random(seed)
    out: list[str] = []
    while len(out) < n:
        words = rng.choice(texts).split()
        if len(words) < 16:
            continue
        start = rng.randrange(0, len(words) - 13)
        out.append(" ".join(words[start : start + rng.randint(5, 12)]))
    return out


def scalar_kind_measurement(
    libraries: dict[str, Path], query_vectors: np.ndarray, k: int = 10
) -> dict[str, dict[str, Any]]:
    """For each scalar kind's library (the same books and vectors): the HNSW file's size, the memory of
    the index loaded whole, the raw HNSW top-``k`` windows' recall against exact float32 search, the
    recall of the candidates Folio re-scores (``LibraryIndex.semantic`` takes ``max(4k, k+16)``), the
    agreement of Folio's final top-``k`` chunks (exact re-scoring) with the exact top-``k`` chunks, and
    the semantic search time (``LibraryIndex.semantic``, query vector given)."""
    from folio.nodes.backends.library_index import usearch_index

    Index = usearch_index()
    out: dict[str, dict[str, Any]] = {}
    for dtype, path in libraries.items():
        keys, rowids, matrix, chunk_ids = _window_matrix(path)
        lib = Library(path)
        index = lib.index
        if len(index.segments()) > 1:  # one HNSW over every window, as the comparison needs
            with lib.writer():
                index.compact()
        (hnsw,) = index.segment_files()
        loaded = Index.restore(str(hnsw))
        view = Index.restore(str(hnsw), view=True)
        if loaded is None or view is None:
            raise FolioError(str(hnsw), "unreadable vector index")
        want = max(4 * k, k + 16)
        raw = candidates = agree = top1 = 0.0
        times = []
        for q in query_vectors:
            sims = matrix @ q
            exact_windows = set(keys[np.argsort(-sims, kind="stable")[:k]].tolist())
            raw += len(exact_windows & set(np.asarray(view.search(q, k).keys).tolist())) / k
            candidates += len(exact_windows & set(np.asarray(view.search(q, want).keys).tolist())) / k
            exact = [chunk_ids[r] for r, _ in best_per_chunk(rowids, sims, k)]
            start = time.perf_counter()
            hits = index.semantic(q, k)
            times.append((time.perf_counter() - start) * 1000)
            found = [(h.book_id, h.chunk_id) for h in hits]
            agree += len(set(found) & set(exact)) / k
            top1 += found[:1] == exact[:1]
        n = max(len(query_vectors), 1)
        size = hnsw.stat().st_size
        out[dtype] = {
            "windows": len(keys),
            "hnsw_file_mb": round(size / 2**20, 2),
            "bytes_per_window": round(size / max(len(keys), 1)),
            "loaded_memory_mb": round(loaded.memory_usage / 2**20, 2),
            "hnsw_recall@10": round(raw / n, 4),
            "candidate_recall@10": round(candidates / n, 4),
            "final_top10_agreement": round(agree / n, 4),
            "final_top1_agreement": round(top1 / n, 4),
            "semantic_p50_ms": round(float(np.percentile(times, 50)), 2),
            "queries": len(query_vectors),
        }
        del loaded, view
        lib.close()
    return out


def rescaled_library(source: Path, target: Path, dtype: str) -> Path:
    """A copy of the library ``source`` at ``target`` whose HNSW holds its stored vectors as ``dtype``
    (the library's ``dtype`` setting changed, the HNSW rebuilt from the stored float32 vectors); kept
    when ``target`` already has that kind."""
    import apsw

    from folio.nodes.backends.library_index import LibraryIndex

    database = target / "library.sqlite"
    if database.exists():
        conn = apsw.Connection(str(database), flags=apsw.SQLITE_OPEN_READONLY)
        try:
            row = conn.execute("SELECT value FROM meta WHERE key = 'dtype'").fetchone()
        finally:
            conn.close()
        if row is not None and row[0] == dtype:
            return target
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("cache", "staging", "trash", ".lock"))
    conn = apsw.Connection(str(database))
    try:
        conn.execute("UPDATE meta SET value = ? WHERE key = 'dtype'", (dtype,))
    finally:
        conn.close()
    index = LibraryIndex(target)
    try:
        index.rebuild_vectors()  # one segment of every window, in the new kind
    finally:
        index.close()
    return target


def _library_hits(question: str, store: Any, stores: tuple, config: dict[str, Any]) -> Any:
    """The search DAG's hits for ``question`` over ``stores`` (the question's own ``store`` ignored)."""
    from folio.dataflows.registry import execute

    inputs = {"query": question, "book_stores": stores, "chapter_ids": None}
    return execute("search", config, ["search_results"], inputs=inputs)["search_results"]


def _scoped_hits(question: str, store: Any, config: dict[str, Any]) -> Any:
    """The search DAG's hits for ``question`` in its own book, as ``folio eval`` searches."""
    return _library_hits(question, store, (store,), config)


def _exact_hits(question: str, store: Any, lib: Library, encoder: Any, every: tuple[str, ...]) -> Any:
    """Exact float32 semantic hits over every book (a scope of all books is scanned, not the HNSW)."""
    return lib.index.semantic(encoder.encode_query(question), 10, book_ids=every)


def fairytaleqa_by_scalar_kind(
    library_dir: Path, qa_file: Path, work_dir: Path, dtypes: Sequence[str] = SCALAR_KINDS
) -> dict[str, Any]:
    """FairytaleQA retrieval searched over the whole library (not scoped to the question's book, so
    semantic search goes through the HNSW) for each scalar kind: hit@1/5/10 and MRR@10 of semantic
    and hybrid search, beside exact float32 semantic search and the book-scoped hybrid search that
    ``folio eval`` runs. ``library_dir`` is copied into ``work_dir`` (an earlier per-book library is
    upgraded in the copy) and never written."""
    from folio.dataflows.config import load_config
    from folio.dataflows.evaluation import stores_by_file
    from folio.nodes.backends.encoder import load_encoder
    from folio.nodes.eval import metrics as evaluation

    base = work_dir / "fairytaleqa-library"
    if not (base / "library.sqlite").exists() or (base / "books").exists():
        shutil.rmtree(base, ignore_errors=True)
        shutil.copytree(library_dir, base, ignore=shutil.ignore_patterns("staging", "trash", ".lock"))
        upgraded = Library(base)
        upgraded.descriptors()  # opening the index upgrades a per-book library (the copy) in place
        upgraded.close()
    items = evaluation.qa_items(str(qa_file))
    out: dict[str, Any] = {"questions": len(items)}

    def metrics(lib: Library, search: Any) -> dict[str, Any]:
        by_file = stores_by_file(lib)
        spans = evaluation.gold_spans(items, by_file)
        records = evaluation.retrieval_records(items, spans, by_file, search, lambda question: [])
        found = evaluation.eval_metrics(evaluation.eval_records(records, (None,) * len(records)))
        return {key: found[key] for key in ("located", "hit@1", "hit@5", "hit@10", "mrr@10", "p50_ms")}

    for dtype in dtypes:
        lib = Library(rescaled_library(base, work_dir / f"fairytaleqa-{dtype}", dtype))
        stores = tuple(lib.stores())
        out[dtype] = {
            mode: metrics(
                lib,
                partial(
                    _library_hits,
                    stores=stores,
                    config=load_config(overrides={"search_mode": mode, "search_k": 10}),
                ),
            )
            for mode in ("semantic", "hybrid")
        }
        if dtype == dtypes[-1]:
            config = load_config(overrides={"search_k": 10})
            encoder = load_encoder(config["embedding_model"], config.get("encoder_precision", "auto"))
            every = tuple(s.book_id for s in stores)
            out["exact_semantic"] = metrics(lib, partial(_exact_hits, lib=lib, encoder=encoder, every=every))
            out["book_scoped_hybrid"] = metrics(lib, partial(_scoped_hits, config=config))
        lib.close()
    return out


# --- reporting -----------------------------------------------------------------------------------


def scaling_table(rows: Sequence[dict[str, Any]]) -> str:
    """The per-size measurements as two markdown tables: the figures, then where a search's time goes."""
    lines = [
        "| books | lexical p50 / p95 ms | hybrid p50 / p95 ms | add one book: into this library / into an"
        " empty one (difference) s | RSS MB | open files | open files after 1,000 more searches |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        lex, hyb, add = row["searches"]["lexical"], row["searches"]["hybrid"], row["add_one_book"]
        lines.append(
            f"| {row['books']:,} | {lex['p50_ms']:.1f} / {lex['p95_ms']:.1f} | {hyb['p50_ms']:.1f} / "
            f"{hyb['p95_ms']:.1f} | {add['into_library_s']:.2f} / {add['into_empty_s']:.2f} "
            f"({add['extra_s']:+.2f}) | {row['rss_mb']:.0f} | {row['open_files']} | "
            f"{row['open_files_after_loop']} |"
        )
    lines += [
        "",
        "| books | p50 ms: lexical index alone | semantic index alone (vector given) | query encoding"
        " | the stores of every book (`Library.stores`) |",
        "|---|---|---|---|---|",
    ]
    for row in rows:
        parts = row["parts_p50_ms"]
        lines.append(
            f"| {row['books']:,} | {parts['lexical_index']:.2f} | {parts['semantic_index']:.2f} | "
            f"{parts['query_encoding']:.1f} | {parts['stores']:.2f} |"
        )
    return "\n".join(lines)


def scalar_kind_table(kinds: dict[str, dict[str, Any]]) -> str:
    """The scalar-kind comparison as a markdown table."""
    lines = [
        "| scalar kind | HNSW file MB (bytes / window) | loaded MB | HNSW recall@10 | candidate recall@10"
        " | final top-10 agreement | final top-1 agreement | semantic p50 ms |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for dtype, m in kinds.items():
        lines.append(
            f"| {dtype} | {m['hnsw_file_mb']:.2f} ({m['bytes_per_window']:,}) | "
            f"{m['loaded_memory_mb']:.1f} | {m['hnsw_recall@10']:.3f} | {m['candidate_recall@10']:.3f} | "
            f"{m['final_top10_agreement']:.3f} | {m['final_top1_agreement']:.3f} | "
            f"{m['semantic_p50_ms']:.2f} |"
        )
    return "\n".join(lines)


def scaling_plot(rows: Sequence[dict[str, Any]], path: Path) -> Path:
    """Search p50 (solid) and p95 (dashed), lexical and hybrid, against the number of books (log x), as
    PNG. Needs matplotlib (Agg, no display)."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise FolioError("--plot", "plotting needs matplotlib: pip install 'folio[plot]'") from exc
    fig = Figure(figsize=(6.0, 4.0), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    books = [row["books"] for row in rows]
    for mode, color in zip(BENCH_MODES, ("#4a6fa5", "#c0504d"), strict=True):
        ax.plot(books, [r["searches"][mode]["p50_ms"] for r in rows], "o-", color=color, label=f"{mode} p50")
        ax.plot(
            books,
            [r["searches"][mode]["p95_ms"] for r in rows],
            "s--",
            color=color,
            alpha=0.5,
            label=f"{mode} p95",
        )
    ax.set_xscale("log")
    ax.set_xticks(books)
    ax.set_xticklabels([f"{b:,}" for b in books])
    ax.set_ylim(bottom=0)
    ax.set_xlabel("books in the library (400 words each)")
    ax.set_ylabel("warm search latency, ms")
    ax.set_title("folio.search over one library-wide index")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.17), ncol=4)  # clear of the lines
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png")
    return path


# --- the whole section ---------------------------------------------------------------------------


def in_fresh_process(function: Callable[..., Any], *args: Any) -> Any:
    """``function(*args)`` in a fresh Python process (clean RSS and open files; warm only by its work)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(function, *args).result()


def scaling_bench(
    data_dir: Path,
    work_dir: Path,
    sizes: Sequence[int] = SCALING_SIZES,
    out_dir: Path | None = None,
    dtypes: Sequence[str] = SCALAR_KINDS,
    fairytaleqa_library: Path | None = None,
) -> dict[str, Any]:
    """The scaling section of ``make bench``: libraries of ``sizes`` small books (400 words, MiniLM
    vectors, the default scalar kind; built once in ``work_dir`` and reused while their parameters
    match), their search latencies measured together in one fresh process (``search_latencies``),
    each one's resources and the cost of adding a book in a fresh process of its own
    (``size_measurement``, on a copy), the CLI's hybrid search under ``ulimit -n 256`` on the largest,
    and the scalar kinds compared on the largest (``scalar_kind_measurement``; FairytaleQA too when
    ``fairytaleqa_library`` is given). Writes ``scaling.md`` (tables) and ``scaling.png`` (plot) to
    ``out_dir``."""
    from folio.dataflows.config import load_config
    from folio.nodes.backends.encoder import load_encoder

    work_dir.mkdir(parents=True, exist_ok=True)
    load_at_start = [round(x, 2) for x in os.getloadavg()]
    config = load_config()
    inner = load_encoder(config["embedding_model"], config.get("encoder_precision", "auto"))
    encoder = MemoEncoder(inner, work_dir / f"embeddings-{inner.precision}.npz")
    dtype = str(config["vector_dtype"])
    built: dict[str, Any] = {}
    libraries: dict[int, Path] = {}
    for size in sizes:
        libraries[size], seconds = bench_library(work_dir, data_dir, size, encoder, dtype)
        built[str(size)] = None if seconds is None else round(seconds, 1)
        encoder.save()
    queries = scaling_queries(data_dir)
    added = [str(p) for p in write_book_files(added_books(data_dir), work_dir / "added")]
    latencies = in_fresh_process(search_latencies, [str(libraries[n]) for n in sizes], queries)
    rows = []
    for size, latency in zip(sizes, latencies, strict=True):
        copy = work_dir / "measured"
        scratch = work_dir / "scratch"
        for folder in (copy, scratch):
            shutil.rmtree(folder, ignore_errors=True)
        shutil.copytree(libraries[size], copy)
        scratch.mkdir()
        resources = in_fresh_process(size_measurement, str(copy), added, str(scratch), queries)
        rows.append({"size": size, **latency, **resources})
        for folder in (copy, scratch):
            shutil.rmtree(folder, ignore_errors=True)
    largest = max(sizes)
    result: dict[str, Any] = {
        "build_s": built,
        "queries": len(queries),
        "rounds": ROUNDS,
        "load_average_at_start_and_after_sizes": [load_at_start, [round(x, 2) for x in os.getloadavg()]],
        "sizes": rows,
        "cli_hybrid_search_ulimit_256": search_under_fd_limit(libraries[largest], QUESTIONS[0]),
    }
    first, last = rows[0], rows[-1]
    result["p50_ratio_largest_to_smallest"] = {
        mode: round(last["searches"][mode]["p50_ms"] / first["searches"][mode]["p50_ms"], 2)
        for mode in BENCH_MODES
    }
    kinds: dict[str, Path] = {}
    for kind in dtypes:
        kinds[kind], seconds = bench_library(work_dir, data_dir, largest, encoder, kind)
        built[f"{largest}-{kind}"] = None if seconds is None else round(seconds, 1)
    encoder.save()
    probe = library_queries(kinds[dtypes[0]])
    result["scalar_kinds"] = scalar_kind_measurement(kinds, encoder.encoder.encode(probe))
    result["scalar_kinds_books"] = largest
    result["sync_unchanged"] = sync_measurement(data_dir, work_dir / "sync")
    if fairytaleqa_library is not None:
        qa_file = data_dir / "qa" / "fairytaleqa" / "questions.csv"
        result["fairytaleqa_by_scalar_kind"] = fairytaleqa_by_scalar_kind(
            fairytaleqa_library, qa_file, work_dir, dtypes
        )
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        text = scaling_table(rows) + "\n\n" + scalar_kind_table(result["scalar_kinds"]) + "\n"
        (out_dir / "scaling.md").write_text(text, encoding="utf-8")
        result["plot"] = str(scaling_plot(rows, out_dir / "scaling.png"))
    return result
