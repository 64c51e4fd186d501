"""``folio doctor``: verify a library and repair what can be rebuilt from what it stores.

What is checked, in order (``examine``):

- ``library.sqlite`` opens and passes SQLite's ``quick_check``; if not, nothing else can be trusted: one
  finding names the file and the fix (move it away and ingest the books again).
- the lexical index (FTS5 ``integrity-check``): rebuilt from the stored chunks when damaged.
- every book: its descriptor parses, its chunks and windows match the descriptor's counts, its vectors
  have the library's size, its concept map parses. Not repairable here: the finding names the fix
  (``folio ingest SOURCE`` again, or ``folio remove BOOK``). Rows of a book the library does not list
  (orphans) are removed.
- the vector index of the current generation (missing, damaged, or not holding every window): rebuilt
  from the stored vectors (``LibraryIndex.rebuild_vectors``, run by the writer's ``recover``).
- the catalog (``catalog.duckdb``, derived data): written anew from ``library.sqlite`` when damaged.
- the caches (``cache/hamilton`` node results and metadata, ``cache/embeddings`` window embeddings,
  ``cache/summaries`` stored chapter summaries and synopses): a damaged one is cleared (its content is
  recomputed on the next ingest, or a summary on its next request).

``folio doctor --compact`` (``compact``) then folds the vector segments into one file and merges the
FTS5 index's own segments (``LibraryIndex.compact``). Repairs run under the library's writer lock.
Config keys: none. Limitations: a damaged
``library.sqlite`` is not salvaged row by row; ``quick_check`` does not verify every index entry
(``integrity_check`` would, at the cost of reading the whole file).
"""

from __future__ import annotations

import shutil
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from folio.dataflows.library import Library, shared_index
from folio.nodes.core.types import ConceptMap, FolioError


@dataclass(frozen=True)
class Finding:
    """One problem found: what (a file or book), why, what was done or must be done, and whether it
    was repaired."""

    subject: str
    problem: str
    fix: str
    repaired: bool


@dataclass(frozen=True)
class Checkup:
    """What ``examine`` checked and found."""

    library: str
    books: int
    findings: tuple[Finding, ...]

    @property
    def healthy(self) -> bool:
        """Nothing remains to be done by the user (every finding repaired)."""
        return all(f.repaired for f in self.findings)


def sqlite_problem(path: Path) -> str | None:
    """Why the SQLite file ``path`` is damaged (``quick_check``), or None when it is whole."""
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=60)
        try:
            rows = [r[0] for r in con.execute("PRAGMA quick_check")]
        finally:
            con.close()
    except sqlite3.Error as exc:
        return str(exc)
    return None if rows == ["ok"] else "; ".join(str(r) for r in rows[:3])


def book_problems(
    descriptor: dict[str, Any], counts: tuple[int, int, int], concept_map: bytes | None
) -> list[str]:
    """What is wrong with one readable book: counts against its descriptor, vector sizes, concept map."""
    chunks, windows, bad_vectors = counts
    problems = []
    if chunks != descriptor["n_chunks"]:
        problems.append(f"{chunks} chunks stored, its descriptor says {descriptor['n_chunks']}")
    if windows != descriptor["n_windows"]:
        problems.append(f"{windows} windows stored, its descriptor says {descriptor['n_windows']}")
    if bad_vectors:
        problems.append(f"{bad_vectors} window vectors of the wrong size")
    if concept_map is not None:
        try:
            ConceptMap.from_json(concept_map)
        except FolioError as exc:
            problems.append(f"damaged concept map ({exc.reason})")
    return problems


def book_fix(book_id: str, source_file: str | None) -> str:
    """What the user runs for a damaged book."""
    again = f"`folio ingest {source_file}` again, or " if source_file else "ingest its file again, or "
    return f"{again}`folio remove {book_id}`"


def cache_dirs(lib: Library) -> dict[str, Path]:
    """The library's caches: name -> the directory cleared when it is damaged."""
    return {
        "node cache": lib.cache_dir / "hamilton",
        "embedding cache": lib.cache_dir / "embeddings",
        "summary store": lib.cache_dir / "summaries",
    }


def cache_problem(directory: Path) -> str | None:
    """Why a cache directory's SQLite files are damaged, or None (also when there is no cache yet)."""
    for path in sorted(directory.rglob("*.db")) if directory.is_dir() else ():
        problem = sqlite_problem(path)
        if problem is not None:
            return f"{path.name}: {problem}"
    return None


def catalog_problem(path: Path) -> str | None:
    """Why the DuckDB catalog cannot be read, or None (also when there is none)."""
    if not path.exists():
        return None
    import duckdb

    try:
        con = duckdb.connect(str(path), read_only=True)
        try:
            con.execute("SELECT count(*) FROM books").fetchone()
        finally:
            con.close()
    except duckdb.Error as exc:
        return str(exc).strip().splitlines()[0]
    return None


def examine(library: Library) -> Checkup:
    """Check every part of the library and repair what can be rebuilt (under the writer lock)."""
    lib = library
    if not lib.database_path.exists():
        raise FolioError(str(lib.path), "no library here (no library.sqlite): run `folio ingest PATH` first")
    problem = sqlite_problem(lib.database_path)
    if problem is not None:
        fix = "move it away (keep a copy) and `folio ingest` the books again"
        return Checkup(
            str(lib.path), 0, (Finding(str(lib.database_path), f"damaged ({problem})", fix, False),)
        )
    findings: list[Finding] = []
    catalog = catalog_problem(lib.catalog_path)
    index = shared_index(lib.path)
    vectors = index.damaged_vectors()  # before the writer's recover() rebuilds it
    vectors_damaged = vectors is not None
    with lib.writer():  # recover(): drops unfinished staging, rebuilds a missing vector index
        if vectors_damaged:
            if index.vectors_missing():
                index.rebuild_vectors()
            findings.append(
                Finding(
                    str(vectors), "missing or damaged vector index", "rebuilt from the stored vectors", True
                )
            )
        lexical = index.lexical_problem()
        if lexical is not None:
            index.rebuild_lexical()
            findings.append(Finding(str(lib.database_path), f"lexical index: {lexical}", "rebuilt", True))
        postings = index.postings_problem()
        if postings is not None:
            index.write_every_postings()
            findings.append(
                Finding(str(lib.database_path), f"lexical index: {postings}", "written again", True)
            )
        if catalog is not None:
            lib.drop_catalog()
            lib.sync_catalog()
            findings.append(
                Finding(str(lib.catalog_path), f"damaged ({catalog})", "rebuilt from library.sqlite", True)
            )
        for name, directory in cache_dirs(lib).items():
            damage = cache_problem(directory)
            if damage is not None:
                shutil.rmtree(directory, ignore_errors=True)
                findings.append(Finding(str(directory), f"damaged {name} ({damage})", "cleared", True))
        findings.extend(_book_findings(lib))
    return Checkup(str(lib.path), len(lib.descriptors()) + len(lib.damaged_books()), tuple(findings))


def compact(library: Library) -> str:
    """Fold the library's vector segments into one and optimise its FTS5 index (under the writer lock);
    one line saying what was done."""
    import time

    from folio.nodes.backends.progress import progress_for

    index = shared_index(library.path)
    # a library made before the term postings or word neighbours: a bar while they are written
    bar = progress_for(False, desc="writing term postings and word neighbours", unit="book")
    with library.writer():
        before = len(index.segments())
        start = time.perf_counter()
        windows = index.compact(bar)
        seconds = time.perf_counter() - start
    after = len(index.segments())
    return f"compacted: {before} vector segments into {after} ({windows:,} windows) in {seconds:.1f} s"


def _book_findings(lib: Library) -> list[Finding]:
    index = shared_index(lib.path)
    counts = index.book_counts()
    descriptors = {d["book_id"]: d for d in index.descriptors()}
    damaged = dict(index.damaged_books())
    findings = [Finding(book_id, why, book_fix(book_id, None), False) for book_id, why in damaged.items()]
    for book_id, descriptor in descriptors.items():
        problems = book_problems(descriptor, counts.get(book_id, (0, 0, 0)), index.concept_map(book_id))
        if problems:
            fix = book_fix(book_id, descriptor.get("source_file"))
            findings.append(Finding(book_id, "; ".join(problems), fix, False))
    orphans = sorted(set(counts) - set(descriptors) - set(damaged))
    if orphans:
        index.commit(remove=orphans)
        lib.sync_catalog()
        findings.extend(
            Finding(b, "rows of a book the library does not list", "removed", True) for b in orphans
        )
    return findings


def report_lines(checkup: Checkup) -> list[str]:
    """The checkup as the lines ``folio doctor`` prints."""
    lines = [f"library {checkup.library}: {checkup.books} book(s) checked"]
    for f in checkup.findings:
        state = "repaired" if f.repaired else "damaged "
        lines.append(f"{state}  {f.subject}: {f.problem} — {f.fix}")
    remaining = sum(not f.repaired for f in checkup.findings)
    if remaining:
        lines.append(f"{remaining} problem(s) remain: see the fixes above")
    else:
        repaired = len(checkup.findings)
        lines.append(f"healthy ({repaired} problem(s) repaired)" if repaired else "healthy")
    return lines
