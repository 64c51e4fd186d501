"""The Kiwix query dataflow: question -> books -> candidates -> scores -> fused context.

``kiwix_answer`` builds the Hamilton driver over ``nodes.kiwix``, ``nodes.disambiguation``,
``nodes.scoring`` and ``nodes.fusion`` from a config (``dataflows.config.load_config``), runs it and
returns a ``KiwixResult``. ``add_kiwix_parser``/``run_kiwix_command`` implement
``folio kiwix QUERY (--zim PATH... | --kiwix-url URL) [--config FILE] [--json]``.

``kiwix_bench(data_dir)`` measures both question sets (``tests/qa/kiwix_questions.jsonl``, the
development set the search heuristics were tuned on, and ``kiwix_questions_heldout.jsonl``, written
before those changes and never tuned on): top-1/top-5 of the engine alone and of the pipeline, with
and without the right ZIM given; and query latency p50/p95 per backend (libzim in-process, and http
through a kiwix-serve it starts on 127.0.0.1 and stops by PID).

Metrics: ``top1`` is exact (the gold book and path); ``top1_equivalent`` also accepts at rank 1 an
article with the gold article's title from another loaded archive (an older edition of the same
Wikipedia selection holds the same article). Older editions are not searched (``superseded_books``),
so with the question ZIMs the two agree; both are reported.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from hamilton import driver

from dataflows.bench import latency_summary
from dataflows.config import load_config
from nodes import disambiguation, fusion, kiwix, scoring
from nodes.types import FolioError, KiwixContext, ScoredCandidate

QA_DIR = Path(__file__).resolve().parent.parent / "tests" / "qa"
QUESTIONS = QA_DIR / "kiwix_questions.jsonl"
HELDOUT_QUESTIONS = QA_DIR / "kiwix_questions_heldout.jsonl"
QUESTION_SETS = {"dev": QUESTIONS, "heldout": HELDOUT_QUESTIONS}
LATENCY_QUERIES = 50
_OUTPUTS = [
    "search_terms",
    "searched_books",
    "superseded_books",
    "selected_books",
    "scored_candidates",
    "kiwix_context",
    "kiwix_errors",
]


@dataclass(frozen=True)
class KiwixResult:
    """Everything one Kiwix query produced."""

    query: str
    search_terms: str
    selected_books: tuple[str, ...]
    candidates: tuple[ScoredCandidate, ...]
    context: KiwixContext
    errors: tuple[tuple[str, str], ...]
    searched_books: tuple[str, ...] = ()
    superseded_books: tuple[tuple[str, str], ...] = ()  # (older edition, newer edition)

    def as_dict(self, max_candidates: int = 10) -> dict[str, Any]:
        """A JSON-ready view: books, the top candidates with their per-signal breakdown, the context."""
        return {
            "query": self.query,
            "search_terms": self.search_terms,
            "searched_books": list(self.searched_books),
            "superseded_books": [{"book": old, "by": new} for old, new in self.superseded_books],
            "selected_books": list(self.selected_books),
            "primary_book": self.selected_books[0] if self.selected_books else None,
            "candidates_total": len(self.candidates),
            "candidates": [
                {
                    "rank": rank,
                    "book": s.candidate.book,
                    "path": s.candidate.path,
                    "title": s.candidate.title,
                    "url": s.candidate.url,
                    "origin": s.candidate.origin,
                    "score": s.score,
                    "breakdown": dict(s.breakdown),
                    "excerpt": s.candidate.excerpt,
                }
                for rank, s in enumerate(self.candidates[:max_candidates], 1)
            ],
            "context": self.context.text,
            "sources": [
                {"book": s.source, "title": s.title, "url": s.url, "score": s.score}
                for s in self.context.sections
            ],
            "errors": [{"source": src, "reason": reason} for src, reason in self.errors],
        }


def default_cache_dir() -> str:
    """The per-user cache folder (``$XDG_CACHE_HOME/folio`` or ``~/.cache/folio``)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return str(Path(base) / "folio")


def kiwix_config(
    config: Mapping[str, Any] | None = None,
    zim_paths: Sequence[str | os.PathLike[str]] | None = None,
    kiwix_url: str | None = None,
) -> dict[str, Any]:
    """The driver config: ``config`` (default: ``load_config()``) with the given ZIMs or server applied."""
    cfg = dict(config) if config is not None else load_config()
    if zim_paths:
        cfg.update(kiwix="libzim", zim_paths=[str(p) for p in zim_paths])
    elif kiwix_url:
        cfg.update(kiwix="http", kiwix_url=kiwix_url)
    if cfg.get("kiwix") == "libzim" and not cfg.get("zim_paths"):
        raise FolioError("kiwix", "no ZIM files given (--zim PATH or zim_paths in the config)")
    if cfg.get("kiwix") == "http" and not cfg.get("kiwix_url"):
        raise FolioError("kiwix", "no kiwix-serve URL given (--kiwix-url URL or kiwix_url in the config)")
    return cfg


def build_kiwix_driver(config: Mapping[str, Any]) -> driver.Driver:
    """The Hamilton driver of the Kiwix query path for ``config``."""
    return (
        driver.Builder()
        .with_modules(kiwix, disambiguation, scoring, fusion)
        .with_config(dict(config))
        .build()
    )


def kiwix_driver(config: Mapping[str, Any]) -> driver.Driver:
    """The Kiwix query driver for ``config`` (the name ``dataflows.viz`` draws)."""
    return build_kiwix_driver(config)


def run_kiwix_driver(
    dr: driver.Driver, query: str, cache_dir: str | None = None, backend: Any = None
) -> KiwixResult:
    """Run a built driver for one query; a given ``backend`` replaces (and is not closed by) the run."""
    if not query.strip():
        raise FolioError("query", "empty question")
    overrides = {"kiwix_backend": backend} if backend is not None else None
    outputs = _OUTPUTS if backend is not None else [*_OUTPUTS, "kiwix_backend"]
    inputs = {"query": query, "cache_dir": cache_dir or default_cache_dir()}
    out = dr.execute(outputs, inputs=inputs, overrides=overrides)
    try:
        context: KiwixContext = out["kiwix_context"]
        return KiwixResult(
            query=query,
            search_terms=out["search_terms"],
            selected_books=out["selected_books"],
            candidates=out["scored_candidates"],
            context=context,
            errors=tuple(out["kiwix_errors"]) + context.errors,
            searched_books=tuple(b.name for b in out["searched_books"]),
            superseded_books=tuple(out["superseded_books"]),
        )
    finally:
        if backend is None:
            out["kiwix_backend"].close()


def kiwix_answer(
    query: str,
    zim_paths: Sequence[str | os.PathLike[str]] | None = None,
    kiwix_url: str | None = None,
    config: Mapping[str, Any] | None = None,
    cache_dir: str | None = None,
) -> KiwixResult:
    """Answer context for ``query`` from ZIM files (libzim) or a kiwix-serve URL."""
    cfg = kiwix_config(config, zim_paths, kiwix_url)
    return run_kiwix_driver(build_kiwix_driver(cfg), query, cache_dir)


# --- CLI ---------------------------------------------------------------------------------------------


def add_kiwix_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``folio kiwix QUERY (--zim PATH... | --kiwix-url URL) [--config FILE] [--json]``."""
    parser = subparsers.add_parser("kiwix", help="find the articles that answer a question in Kiwix books")
    parser.add_argument("query", help="the question, in plain words")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--zim", nargs="+", metavar="PATH", help="ZIM files to search (libzim)")
    source.add_argument("--kiwix-url", metavar="URL", help="base URL of a kiwix-serve")
    parser.add_argument("--config", metavar="FILE", help="a YAML config over configs/default.yaml")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.set_defaults(func=run_kiwix_command)
    return parser


def _format_result(result: KiwixResult, max_candidates: int = 10, excerpt_chars: int = 160) -> str:
    """The result for a person: books, ranked candidates with each signal's points, then the context."""
    lines = [f"query:         {result.query}", f"search terms:  {result.search_terms or '(none)'}"]
    lines.append("books searched: " + (", ".join(result.searched_books) or "(none)"))
    for old, new in result.superseded_books:
        lines.append(f"  not searched: {old} (older edition of {new})")
    selected = [f"{b} (primary)" if i == 0 else b for i, b in enumerate(result.selected_books)]
    lines.append("selected books: " + (", ".join(selected) or "(no book found anything)"))
    shown = result.candidates[:max_candidates]
    lines.append(f"\ncandidates (top {len(shown)} of {len(result.candidates)}; score = sum of the signals):")
    for i, s in enumerate(shown, 1):
        c = s.candidate
        lines.append(f"  {i:2d}. {s.score:6.2f}  {c.title}")
        lines.append(f"             {c.book} : {c.path}  (found by {c.origin})")
        signals = "  ".join(f"{name}={points:+g}" for name, points in s.breakdown) or "(no signal fired)"
        lines.append(f"             {signals}")
        if c.excerpt:
            lines.append(f"             “{_shorten(c.excerpt, excerpt_chars)}”")
    if result.errors:
        lines.append("\nerrors:")
        lines.extend(f"  {src}: {reason}" for src, reason in result.errors)
    sources = "; ".join(f"[{s.source}] {s.title} ({s.score:g})" for s in result.context.sections)
    lines.append(f"\ncontext: {sources or '(none)'}")
    lines.append(result.context.text or "(no context)")
    return "\n".join(lines)


def _shorten(text: str, max_chars: int) -> str:
    """``text`` on one line in at most ``max_chars`` characters; a "lead … passage" excerpt keeps
    the start of both parts."""
    flat = " ".join(text.split())
    if len(flat) <= max_chars:
        return flat
    if " … " in flat:
        lead, passage = flat.split(" … ", 1)
        half = max_chars // 2
        return f"{_shorten(lead, half).removesuffix(' …')} … {_shorten(passage, max_chars - half)}"
    return flat[: max_chars - 1].rsplit(" ", 1)[0] + " …"


def run_kiwix_command(args: argparse.Namespace) -> int:
    """Run ``folio kiwix``; a ``FolioError`` is printed as one line ``source: reason`` (exit status 1)."""
    try:
        cfg = load_config(args.config) if args.config else None
        result = kiwix_answer(args.query, zim_paths=args.zim, kiwix_url=args.kiwix_url, config=cfg)
    except FolioError as exc:
        print(f"{exc.source}: {exc.reason}", file=sys.stderr)
        return 1
    print(json.dumps(result.as_dict(), indent=2, ensure_ascii=False) if args.json else _format_result(result))
    return 0


# --- evaluation ----------------------------------------------------------------------------------------


def load_questions(path: str | os.PathLike[str] = QUESTIONS) -> list[dict[str, Any]]:
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
    from nodes.backends.zim import ZimBackend

    cfg = kiwix_config(config, zim_paths)
    dr = build_kiwix_driver(cfg)
    top1 = top5 = equivalent = 0
    start = time.perf_counter()
    with ZimBackend([str(p) for p in zim_paths]) as backend:
        for q in questions:
            result = run_kiwix_driver(dr, q["question"], cache_dir, backend=backend)
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
    from nodes.backends.zim import ZimBackend

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
    dr = build_kiwix_driver(config)
    times = []
    for question in questions:
        start = time.perf_counter()
        run_kiwix_driver(dr, question, cache_dir, backend=backend)
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
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
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
    from nodes.backends.kiwix_http import KiwixHttpBackend
    from nodes.backends.zim import ZimBackend

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


def kiwix_bench(data_dir: str | os.PathLike[str], latency_queries: int = LATENCY_QUERIES) -> dict[str, Any]:
    """Both question sets' accuracy tables and the per-backend query latency.

    Latency runs ``latency_queries`` questions (every other question of the dev and held-out sets,
    cycled when there are fewer) over every ZIM in ``data_dir/zim``, each backend opened once.
    """
    zim_dir = Path(data_dir) / "zim"
    cfg = load_config(overrides={"llm": "none"})
    sets = {name: load_questions(path) for name, path in QUESTION_SETS.items()}
    pool = [q["question"] for qs in sets.values() for q in qs][::2]
    chosen = [pool[i % len(pool)] for i in range(latency_queries)] if pool else []
    with tempfile.TemporaryDirectory(prefix="folio-kiwix-bench-") as cache_dir:
        return {
            "question_sets": {name: accuracy_table(qs, zim_dir, cfg) for name, qs in sets.items()},
            "question_counts": {name: len(qs) for name, qs in sets.items()},
            "latency": kiwix_latency(sorted(zim_dir.glob("*.zim")), chosen, cfg, cache_dir),
        }


if __name__ == "__main__":  # pragma: no cover - manual benchmark
    print(json.dumps(kiwix_bench(sys.argv[1] if len(sys.argv) > 1 else "../shared/data"), indent=2))
