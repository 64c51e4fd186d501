"""``make bench``: measured speed and memory, printed as JSON (a benchmark, not a test).

Book ingest: Moby-Dick (EPUB) into a fresh library with an empty embedding cache, in a process whose
encoder is already loaded; then the raw encoder time for exactly the same windows in the same run,
their ratio, peak RSS, chunk and window counts, and search latency p50/p95 (query encoding included)
over 100 queries for lexical, semantic and hybrid search. The ``http`` section (``bench.serve_bench``)
asks over HTTP against a real ``folio serve``: one client's p50/p95 and 8 concurrent clients'
throughput. The ``speed`` section (``bench.speed_bench``) puts the int8 ONNX encoder beside torch fp32 on
the same windows and times the CLI's start-up. The ``llm`` section (``bench.llm_bench``) times
fresh-process ``folio ask`` against a real llama.cpp server running SmolLM2-135M. The ``formats``
section (``bench.formats_bench``) times each book format's reader and the 352-page PDF's peak
memory. Other sections
(Kiwix, ask, re-ingest) are added by the modules that own them when present. The scaling section
(``bench.scaling``: libraries of 10, 100 and 1,000 small books, search latency, open files, RSS,
adding a book, the HNSW scalar kinds) writes its table and plot to ``--plots``. The fullsize section
(``bench.fullsize_bench``: a real ingest of full-length books, an index-level library of 2 M windows,
Dask against the local executor) keeps its big artefacts in ``--fullsize-work`` and writes
``fullsize.md`` and ``fullsize.png`` to ``--plots``. ``--only SECTION`` runs one section.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx

from bench.formats_bench import formats_bench
from bench.fullsize_bench import BOOK_WORDS, BOOKS, INDEX_WINDOWS, fullsize_bench
from bench.llm_bench import llm_bench
from bench.measuring import free_port, latency_summary, potter_library, potter_questions
from bench.scaling import scaling_bench
from bench.serve_bench import http_bench
from bench.speed_bench import speed_bench
from folio.dataflows.api import book_files, ingest, search
from folio.dataflows.asking import ask
from folio.dataflows.config import load_config
from folio.dataflows.kiwix_query import kiwix_config, kiwix_driver, run_kiwix_driver
from folio.dataflows.library import Library
from folio.dataflows.parallel import ingest_books
from folio.dataflows.registry import execute
from folio.nodes.backends.book_tools import PendingJobs, shared_pool
from folio.nodes.backends.embedding_cache import EmbeddingCache
from folio.nodes.backends.encoder import load_encoder, resolve_model_dir
from folio.nodes.backends.kiwix_http import KiwixHttpBackend
from folio.nodes.backends.progress import NullProgress, Progress
from folio.nodes.backends.workers import available_cores
from folio.nodes.backends.zim import ZimBackend
from folio.nodes.core.types import FolioError, SourceResult, StagedBook
from folio.nodes.kiwix import candidates as kiwix
from folio.nodes.query import source_fusion

os.environ.setdefault("HAMILTON_TELEMETRY_ENABLED", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


SECTIONS = (
    "books",
    "kiwix",
    "library_ingest",
    "ask",
    "http",
    "scaling",
    "speed",
    "llm",
    "formats",
    "fullsize",
)


def _peak_rss_mb(who: int = resource.RUSAGE_SELF) -> float:
    return round(resource.getrusage(who).ru_maxrss / 1024, 1)


def _queries(lib: Any, book_id: str, n: int = 100, seed: int = 7) -> list[str]:
    """``n`` queries made of 4–9 consecutive words from random chunks of the book (seeded)."""
    rng = random.Random(seed)
    chunks = lib.store(book_id).chunks_in()
    out: list[str] = []
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
            if (
                not edited
                and info.filename.endswith((".xhtml", ".html"))
                and b"Loomings" in data
                and b"Ishmael" in data
            ):
                data = data.replace(
                    b"Call me Ishmael.", b"Call me Ishmael. (An edited sentence for the benchmark.)", 1
                )
                edited = True
            compress = zipfile.ZIP_STORED if info.filename == "mimetype" else zipfile.ZIP_DEFLATED
            dst.writestr(info, data, compress_type=compress)


def _concept_map_time(book: Path, config: dict[str, Any], lib: Any) -> float:
    """Seconds to build the concept map alone from the book's (cached) chunks and vectors."""
    inputs = {
        "source_path": str(book),
        "staging_dir": str(lib.path / "staging"),
        "embedding_cache": EmbeddingCache(lib.cache_dir / "embeddings"),
        "progress": NullProgress(),
    }
    parts = execute("ingest", config, ["manifest", "chunks", "chunk_vectors"], inputs=inputs)
    t0 = time.perf_counter()
    execute("ingest", config, ["concept_map"], inputs=inputs, overrides=parts)
    return time.perf_counter() - t0


def book_bench(data_dir: Path, work: Path) -> dict[str, Any]:
    config = load_config()
    encoder = load_encoder(config["embedding_model"], config.get("encoder_precision", "auto"))
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
    texts = [store.chapter_text(ch)[s:e] for ch, s, e in lib.index.window_spans(staged.book_id)]
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


def fusion_overhead(delays: Sequence[float] = (0.02, 0.05, 0.1), runs: int = 20) -> dict[str, float]:
    """Wall time of fusing sources that sleep ``delays`` seconds, minus the slowest delay (ms)."""

    def make(i: int, delay: float) -> Callable[[str], SourceResult]:
        def source(clause: str) -> SourceResult:
            time.sleep(delay)
            return SourceResult(
                ("kiwix", "web", "news")[i % 3], f"s{i}", f"Result {i} about {clause}. It says {i}."
            )

        return source

    pool = shared_pool(12)
    overheads = []
    for _ in range(runs):
        t0 = time.perf_counter()
        pending = PendingJobs(pool, [(f"s{i}", "q", make(i, d)) for i, d in enumerate(delays)])
        done, _ = pending.collect(5.0)
        source_fusion.fused_context(tuple(r for _, _, r in done), source_fusion.KNOWN_SOURCES, 4, 1500)
        overheads.append((time.perf_counter() - t0 - max(delays)) * 1000)
    return latency_summary(overheads)


def ask_bench(data_dir: str | os.PathLike[str], library: str | Path | None = None) -> dict[str, Any]:
    """``folio ask`` latency without an LLM (warm, FairytaleQA Potter questions) and the fusion overhead.

    Ingests the Potter treasury into a temporary library unless ``library`` already holds it.
    """
    _book, questions = potter_questions(data_dir)
    with potter_library(data_dir, library) as lib:
        latencies = _warm_asks(questions, {"llm": "none"}, lib)
        # rerank: cross_encoder's cost per question, with a MiniLM-L6-sized cross-encoder (the bundled
        # MiniLM encoder under a fresh one-label head: the architecture of ms-marco-MiniLM-L-6-v2, so its
        # cost, not its quality; no trained cross-encoder ships offline)
        model = str(resolve_model_dir("minilm"))
        reranked = _warm_asks(
            questions, {"llm": "none", "rerank": "cross_encoder", "rerank_model": model}, lib
        )
    none, cross = latency_summary(latencies), latency_summary(reranked)
    return {
        "questions": len(questions),
        "ask_warm_no_llm": none,
        "ask_warm_rerank_cross_encoder_minilm_l6_depth20": cross,
        "rerank_cross_encoder_cost_p50_ms": round(cross["p50_ms"] - none["p50_ms"], 2),
        "rerank_llm_cost": "one bounded LLM call per book clause (reply <= 96 tokens; see the llm section)",
        "fusion_overhead_over_slowest_source": fusion_overhead(),
    }


def _warm_asks(questions: Sequence[str], cfg: dict[str, Any], lib: Any) -> list[float]:
    """Milliseconds of each ``ask`` of ``questions`` with ``cfg``, after one warming ask."""
    ask(questions[0], config=cfg, library=lib)  # warm: driver, stores, encoder (and reranker)
    latencies = []
    for q in questions:
        t0 = time.perf_counter()
        ask(q, config=cfg, library=lib)
        latencies.append((time.perf_counter() - t0) * 1000)
    return latencies


LATENCY_QUERIES = 50


def load_questions(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """A Kiwix question set: one ``{question, answers, gold_zim, gold_path}`` per line."""
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]


def _hit_ranks(keys: Sequence[tuple[str, str]], gold: tuple[str, str]) -> tuple[bool, bool]:
    return (list(keys[:1]) == [gold], gold in keys[:5])


def evaluate_pipeline(
    questions: Sequence[Mapping[str, Any]],
    zim_paths: Sequence[str | os.PathLike[str]],
    config: Mapping[str, Any] | None = None,
    cache_dir: str | None = None,
) -> dict[str, float]:
    """Top-1/top-5 of the pipeline (libzim over ``zim_paths``) against (gold_zim, gold_path).

    ``top1`` is exact; ``top1_equivalent`` also accepts, at rank 1, an article with the gold article's
    title from another loaded archive (another edition of the same Wikipedia selection).
    """

    cfg = kiwix_config(config, zim_paths)
    dr = kiwix_driver(cfg)
    top1 = top5 = equivalent = 0
    start = time.perf_counter()
    with ZimBackend([str(p) for p in zim_paths]) as backend:
        for q in questions:
            result = run_kiwix_driver(dr, q["question"], cache_dir, backend=backend, config=cfg)
            keys = [(s.candidate.book, s.candidate.path) for s in result.candidates]
            gold = (q["gold_zim"], q["gold_path"])
            one, five = _hit_ranks(keys, gold)
            top1 += one
            top5 += five
            if one or (
                result.candidates and result.candidates[0].candidate.title == backend.article(*gold).title
            ):
                equivalent += 1
    n = max(1, len(questions))
    return {
        "top1": round(top1 / n, 3),
        "top1_equivalent": round(equivalent / n, 3),
        "top5": round(top5 / n, 3),
        "n": len(questions),
        "seconds": round(time.perf_counter() - start, 2),
    }


def evaluate_engine(
    questions: Sequence[Mapping[str, Any]], zim_dir: str | os.PathLike[str], strip_stop_words: bool
) -> dict[str, float]:
    """Top-1/top-5 of the engine's own search alone, the right ZIM given (raw or stop-word-stripped)."""

    top1 = top5 = 0
    names = sorted({q["gold_zim"] for q in questions})
    with ZimBackend([str(Path(zim_dir) / f"{n}.zim") for n in names]) as backend:
        for q in questions:
            text = " ".join(kiwix._clean_terms(q["question"])) if strip_stop_words else q["question"]
            found = backend.search(q["gold_zim"], text, 20)
            one, five = _hit_ranks([(c.book, c.path) for c in found], (q["gold_zim"], q["gold_path"]))
            top1 += one
            top5 += five
    n = max(1, len(questions))
    return {"top1": round(top1 / n, 3), "top5": round(top5 / n, 3), "n": len(questions)}


def accuracy_table(
    questions: Sequence[Mapping[str, Any]], zim_dir: str | os.PathLike[str], config: Mapping[str, Any]
) -> dict[str, dict[str, float]]:
    """The top-1/top-5 rows for one question set: engine alone (raw, stop words stripped; right ZIM
    given) and the pipeline (right ZIM given; every ZIM in ``zim_dir`` loaded)."""
    zim_dir = Path(zim_dir)
    by_book: dict[str, list[Mapping[str, Any]]] = {}
    for q in questions:
        by_book.setdefault(q["gold_zim"], []).append(q)
    right = {"top1": 0.0, "top1_equivalent": 0.0, "top5": 0.0, "seconds": 0.0}
    for name, qs in by_book.items():
        part = evaluate_pipeline(qs, [str(zim_dir / f"{name}.zim")], config)
        for key in ("top1", "top1_equivalent", "top5"):
            right[key] += part[key] * len(qs) / len(questions)
        right["seconds"] += part["seconds"]
    return {
        "engine_raw_right_zim": evaluate_engine(questions, zim_dir, strip_stop_words=False),
        "engine_stripped_right_zim": evaluate_engine(questions, zim_dir, strip_stop_words=True),
        "pipeline_right_zim": {**{k: round(v, 3) for k, v in right.items()}, "n": len(questions)},
        "pipeline_all_zims": evaluate_pipeline(
            questions, sorted(str(p) for p in zim_dir.glob("*.zim")), config
        ),
    }


def query_latency(
    backend: Any, config: Mapping[str, Any], questions: Sequence[str], cache_dir: str | None = None
) -> dict[str, float]:
    """Per-query wall time of the whole query DAG over an open ``backend``: p50/p95/mean in ms."""
    dr = kiwix_driver(config)
    times = []
    for question in questions:
        start = time.perf_counter()
        run_kiwix_driver(dr, question, cache_dir, backend=backend, config=config)
        times.append((time.perf_counter() - start) * 1000)
    return {
        "queries": len(times),
        **latency_summary(times, digits=1),
        "mean_ms": round(sum(times) / max(1, len(times)), 1),
    }


@contextlib.contextmanager
def _kiwix_serve(zim_paths: Sequence[str | os.PathLike[str]], wait_seconds: float = 20.0) -> Iterator[str]:
    """Run ``kiwix-serve`` on a free 127.0.0.1 port for the block; yields its URL, stops it by PID."""
    binary = shutil.which("kiwix-serve")
    if binary is None:
        raise FolioError("kiwix-serve", "not installed (Debian/Ubuntu: apt-get install kiwix-tools)")
    port = free_port()
    args = [binary, "--address=127.0.0.1", f"--port={port}", f"--attachToProcess={os.getpid()}"]
    process = subprocess.Popen(
        [*args, *map(str, zim_paths)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + wait_seconds
        while True:
            if process.poll() is not None:
                raise FolioError("kiwix-serve", f"exited with status {process.returncode}")
            try:
                if httpx.get(f"{url}/catalog/v2/entries", timeout=1.0).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise FolioError(url, f"kiwix-serve did not answer within {wait_seconds:g} s")
            time.sleep(0.1)
        yield url
    finally:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.kill(process.pid, signal.SIGKILL)
                process.wait(timeout=5)


def kiwix_latency(
    zim_paths: Sequence[str | os.PathLike[str]],
    questions: Sequence[str],
    config: Mapping[str, Any],
    cache_dir: str | None = None,
) -> dict[str, dict[str, Any]]:
    """Query latency per backend over the same ZIMs and questions: libzim, and http through a
    kiwix-serve started for the run (its row says why when it cannot run)."""

    zims = [str(p) for p in zim_paths]
    out: dict[str, dict[str, Any]] = {}
    with ZimBackend(zims) as backend:
        out["libzim"] = query_latency(backend, kiwix_config(config, zim_paths=zims), questions, cache_dir)
    try:
        with _kiwix_serve(zims) as url, KiwixHttpBackend(url, float(config["kiwix_timeout_seconds"])) as http:
            out["http"] = query_latency(http, kiwix_config(config, kiwix_url=url), questions, cache_dir)
    except FolioError as exc:
        out["http"] = {"error": f"{exc.source}: {exc.reason}"}
    return out


def question_sets(qa_dir: str | os.PathLike[str]) -> dict[str, Path]:
    """Folio's Kiwix question sets in ``qa_dir`` (the repo keeps them in ``tests/qa``): dev and held-out."""
    qa = Path(qa_dir)
    return {"dev": qa / "kiwix_questions.jsonl", "heldout": qa / "kiwix_questions_heldout.jsonl"}


def kiwix_bench(
    data_dir: str | os.PathLike[str], qa_dir: str | os.PathLike[str], latency_queries: int = LATENCY_QUERIES
) -> dict[str, Any]:
    """Both question sets' accuracy tables (``question_sets(qa_dir)``) and the per-backend query latency.

    Latency runs ``latency_queries`` questions (every other question of the dev and held-out sets,
    cycled when there are fewer) over every ZIM in ``data_dir/zim``, each backend opened once.
    """
    zim_dir = Path(data_dir) / "zim"
    cfg = load_config(overrides={"llm": "none"})
    sets = {name: load_questions(path) for name, path in question_sets(qa_dir).items()}
    pool = [q["question"] for qs in sets.values() for q in qs][::2]
    chosen = [pool[i % len(pool)] for i in range(latency_queries)] if pool else []
    with tempfile.TemporaryDirectory(prefix="folio-kiwix-bench-") as cache_dir:
        return {
            "question_sets": {name: accuracy_table(qs, zim_dir, cfg) for name, qs in sets.items()},
            "question_counts": {name: len(qs) for name, qs in sets.items()},
            "latency": kiwix_latency(sorted(zim_dir.glob("*.zim")), chosen, cfg, cache_dir),
        }


def library_bench(data_dir: str | Path) -> dict[str, Any]:
    """Ingest every book of ``data_dir/books`` into fresh libraries with 1 worker, then 2 workers."""
    files = book_files([Path(data_dir) / "books"])
    out: dict[str, Any] = {"books": len(files), "cores": available_cores()}
    for workers in (1, 2):
        config = load_config(overrides={"workers": workers})
        with tempfile.TemporaryDirectory(prefix=f"folio-bench-w{workers}-") as tmp:
            lib = Library(tmp)
            start = time.perf_counter()
            with lib.writer():
                results = ingest_books(files, lib, config, Progress())
            wall = time.perf_counter() - start
        failed = [str(r) for r in results if isinstance(r, FolioError)]
        out[f"workers_{workers}"] = {
            "wall_s": round(wall, 2),
            "chunks": sum(r.n_chunks for r in results if isinstance(r, StagedBook)),
            "failed": failed,
        }
    out["speedup"] = round(out["workers_1"]["wall_s"] / out["workers_2"]["wall_s"], 2)
    out["peak_rss_mb"] = {
        "driver_process": _peak_rss_mb(resource.RUSAGE_SELF),
        "largest_worker": _peak_rss_mb(resource.RUSAGE_CHILDREN),
    }
    out["note"] = "2 shared cores: other work on the machine makes these wall times noisy"
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="folio-bench")
    parser.add_argument("--data", required=True, help="the data folder (books/, zim/, qa/)")
    parser.add_argument(
        "--questions", required=True, help="the folder of Folio's question sets (tests/qa in the repo)"
    )
    parser.add_argument("--out", default=None, help="also write the JSON here")
    parser.add_argument(
        "--only", action="append", choices=SECTIONS, default=None, help="run only this section (repeatable)"
    )
    parser.add_argument(
        "--scaling-work",
        default=".bench/scaling",
        help="where the scaling section keeps its generated libraries between runs",
    )
    parser.add_argument(
        "--plots", default=None, help="where the scaling section writes scaling.png and scaling.md"
    )
    parser.add_argument(
        "--fairytaleqa-library",
        default=None,
        help="a library of the FairytaleQA books: the scaling section also compares scalar kinds on it "
        "(copied first, never written)",
    )
    parser.add_argument(
        "--fullsize-work", default=".bench/fullsize", help="the fullsize section's work folder"
    )
    parser.add_argument("--fullsize-books", type=int, default=BOOKS, help="full-length books to ingest")
    parser.add_argument("--fullsize-words", type=int, default=BOOK_WORDS, help="words per full-length book")
    parser.add_argument(
        "--fullsize-windows", type=int, default=INDEX_WINDOWS, help="the index-level run's windows"
    )
    parser.add_argument(
        "--fullsize-parts", default="ingest,index,dask", help="which parts of the fullsize section to run"
    )
    parser.add_argument(
        "--fullsize-skip-compact", action="store_true", help="leave out the whole-library compaction"
    )
    args = parser.parse_args(argv)
    data_dir = Path(args.data).resolve()
    work = Path(tempfile.mkdtemp(prefix="folio-bench-"))
    results: dict[str, Any] = {"machine": {"cpus": os.cpu_count()}}
    scaling_work = Path(args.scaling_work).resolve()
    try:
        sections: dict[str, Callable[[], dict[str, Any]]] = {
            "books": lambda: book_bench(data_dir, work),
            "kiwix": lambda: kiwix_bench(data_dir, args.questions),
            "library_ingest": lambda: library_bench(data_dir),
            "ask": lambda: ask_bench(data_dir),
            "http": lambda: http_bench(data_dir),
            "speed": lambda: speed_bench(data_dir),
            "llm": lambda: llm_bench(data_dir),
            "formats": lambda: formats_bench(data_dir),
            "scaling": lambda: scaling_bench(
                data_dir,
                scaling_work,
                out_dir=Path(args.plots) if args.plots else scaling_work / "out",
                fairytaleqa_library=Path(args.fairytaleqa_library) if args.fairytaleqa_library else None,
            ),
            "fullsize": lambda: fullsize_bench(
                data_dir,
                Path(args.fullsize_work).resolve(),
                books=args.fullsize_books,
                words=args.fullsize_words,
                windows=args.fullsize_windows,
                out_dir=Path(args.plots) if args.plots else Path(args.fullsize_work).resolve() / "out",
                parts=tuple(args.fullsize_parts.split(",")),
                compact=not args.fullsize_skip_compact,
            ),
        }
        for section, bench in sections.items():
            if args.only and section not in args.only:
                continue
            print(f"bench: {section}...", file=sys.stderr, flush=True)
            results[section] = bench()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    text = json.dumps(results, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
