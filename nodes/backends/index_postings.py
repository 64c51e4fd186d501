"""Lexical search from the term postings (``nodes.backends.postings``) in a large library: the rows that
``IndexSearch``'s FTS5 statement gives, with the same scores and order, for a search of the whole library
or of some books (not of some chapters), scored in numpy instead of FTS5 scoring each matching chunk.
FTS5 still finds the bonus phrases, but only where they can matter: among the chunks holding all of a
phrase's query words (none: FTS5 is not asked; few: chunk by chunk), and for the ``k`` best only among
those that can still rank; the lookups run on several threads at once (the caller's and workers', each
on its own connection over the same snapshot), the rarest phrases first.

Config: none (``POSTINGS_MIN_CHUNKS``, ``POINT_CHECK_POSTINGS``, ``PHRASE_WORKERS``). Limitations: see
``nodes.backends.postings``; a library made before the postings, or smaller than
``POSTINGS_MIN_CHUNKS``, is searched by FTS5 alone.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Collection, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, TypeVar

import numpy as np

from folio.nodes.backends.index_store import FTS_TOKENIZE, IndexStore, Scope, fts_select, sql_in
from folio.nodes.backends.postings import (
    EVERY_CHUNK,
    Bonus,
    Corpus,
    Scored,
    best_rows,
    contenders,
    corpus_of,
    fts5_tokenizer,
    kth_best,
    scored,
    unpack,
)
from folio.nodes.backends.workers import available_cores

POSTINGS_MIN_CHUNKS = 20_000  # from this many chunks a search of the whole library or of books reads them
# FTS5 checks a phrase in one chunk (105-155 µs, twice that beside a second thread) in the time its phrase
# query steps through 130-520 chunks of the phrase's rarest word (0.26-0.97 µs each; measured at 2 M
# windows on 7 phrases: fewest with "the"): fewer are checked one by one
POINT_CHECK_POSTINGS = 300

# FTS5 looks up the bonus phrases of a query on this many threads at once, each on its own connection over
# the same snapshot: the calling thread and ``available_cores() - 1`` workers, at most 3 of them
PHRASE_WORKERS = 3

T = TypeVar("T")
_POOL: tuple[int, ThreadPoolExecutor] | None = None  # the process's phrase workers (and its pid)
_POOL_LOCK = threading.Lock()


def phrase_threads() -> int:
    """Threads that look up a query's bonus phrases at once: the caller's and one fewer worker than the
    cores this process may use, at most ``PHRASE_WORKERS``."""
    return 1 + max(0, min(PHRASE_WORKERS, available_cores() - 1))


def phrase_pool() -> ThreadPoolExecutor:
    """The process's ``PHRASE_WORKERS`` threads that look up bonus phrases (made anew in a child process)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None or _POOL[0] != os.getpid():
            _POOL = (os.getpid(), ThreadPoolExecutor(PHRASE_WORKERS, thread_name_prefix="folio-phrases"))
        return _POOL[1]


Narrow = Callable[[Iterable[Collection[str]]], "tuple[np.ndarray | None, int]"]
Bonuses = Callable[[Narrow], list[Bonus]]


class IndexPostings(IndexStore):
    """The library index's searches from the term postings."""

    def _concurrently(self, conn: Any, calls: Sequence[Callable[[Any], T]]) -> list[T]:
        """``call(connection)`` for each of ``calls``, in order: on ``conn`` and, at once, on worker
        threads' own connections over the same snapshot (a worker that finds another generation, a book
        added or removed meanwhile, takes none); each thread takes the next call when done with one, and a
        worker still waiting for a thread when this one is done is not waited for."""
        workers = min(phrase_threads(), len(calls)) - 1
        if workers < 1:
            return [call(conn) for call in calls]
        generation, lock, left = self._generation(conn), threading.Lock(), iter(enumerate(calls))
        results: dict[int, T] = {}

        def drain(c: Any) -> None:
            while True:
                with lock:
                    taken = next(left, None)
                if taken is None:
                    return
                results[taken[0]] = taken[1](c)

        def work() -> None:
            with self._reading() as c:
                if self._generation(c) == generation:
                    drain(c)

        running = [phrase_pool().submit(work) for _ in range(workers)]
        drain(conn)
        for future in running:
            if not future.cancel():
                future.result()
        return [results[i] for i in range(len(calls))]

    def _corpus(self, conn: Any) -> Corpus | None:
        """The whole library's ``Corpus`` when its postings are whole and it holds at least
        ``POSTINGS_MIN_CHUNKS`` chunks, else None (cached per generation)."""

        def make(c: Any) -> Corpus | None:
            ready = c.execute("SELECT value FROM meta WHERE key = 'postings'").fetchone()
            if ready is None or ready[0] != "complete":
                return None
            sql = "SELECT lo, records FROM postings WHERE term = ?"
            return corpus_of(list(c.execute(sql, (EVERY_CHUNK,))))

        corpus: Corpus | None = self._cached(conn, "corpus", make)
        return None if corpus is None or corpus.rows < POSTINGS_MIN_CHUNKS else corpus

    def _first_rowids(self, conn: Any, book_ids: Collection[str]) -> list[int]:
        """The first chunk rowid of each book of ``book_ids`` the library holds (its postings' key)."""
        sql = "SELECT book_id, min(rowid) FROM chunks GROUP BY book_id"
        starts: dict[str, int] = self._cached(conn, "starts", lambda c: dict(c.execute(sql)))
        return sorted({starts[b] for b in book_ids if b in starts})

    @staticmethod
    def _holders(
        conn: Any,
        expression: str,
        candidates: np.ndarray | None,
        fewest: int,
        exists: bool = False,
        where: tuple[Scope, Sequence[tuple[int, int]]] = (("", []), ()),
    ) -> np.ndarray:
        """The rowids matching ``expression`` among the chunks ``where`` keeps (scope, rowid spans;
        ``exists``: one at most): among the ``candidates`` when they are few against ``fewest`` (the
        rarest word's chunks, which FTS5's phrase query walks: ``POINT_CHECK_POSTINGS``; no candidate:
        no FTS5 lookup at all), else all."""
        limit = " LIMIT 1" if exists else ""
        if candidates is not None and not len(candidates):
            return np.zeros(0, dtype=np.int64)
        if candidates is not None and len(candidates) * POINT_CHECK_POSTINGS <= fewest:
            rows, params = sql_in("rowid", [int(r) for r in candidates])
            sql = f"SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ? AND {rows}{limit}"
            return np.array([r[0] for r in conn.execute(sql, [expression, *params])], dtype=np.int64)
        sql, params = fts_select("chunks_fts.rowid", [], expression, *where)
        return np.array([r[0] for r in conn.execute(sql + limit, params)], dtype=np.int64)

    def _postings_rows(
        self,
        conn: Any,
        query: tuple[str, Sequence[str]],
        k: int,
        per_book: bool,
        book_ids: Collection[str] | None,
        where: tuple[Scope, Sequence[tuple[int, int]]],
        bonuses_of: Bonuses,
    ) -> list[tuple] | None:
        """The rows FTS5's statement gives (``IndexSearch._lexical_rows``: chunk columns, score, best
        bm25) for ``query`` (its text and MATCH terms) over the whole library or ``book_ids``, scored from
        the postings; ``where``: the books' scope and rowid spans; ``bonuses_of(narrow)``: the query's
        bonuses over them. None when the library has no whole postings or is small (``_corpus``), or a term
        is a phrase to the tokenizer."""
        corpus = self._corpus(conn)
        if corpus is None:
            return None
        tokenize = fts5_tokenizer(conn, FTS_TOKENIZE)
        tokens = [tokenize(t.strip('"')) for t in query[1]]
        if any(len(t) != 1 for t in tokens):
            return None
        books = None if book_ids is None else self._first_rowids(conn, book_ids)
        if books is not None and not books:
            return []
        sql, params = "SELECT records FROM postings WHERE term = ?", []
        if books is not None:
            sql, params = sql + " AND lo IN (SELECT value FROM json_each(?))", [str(books)]
        per_term = [unpack(r[0] for r in conn.execute(sql, (t[0], *params))) for t in tokens]
        held_by = {t[0]: p for t, p in zip(tokens, per_term, strict=True)}

        narrowed_by: dict[tuple[frozenset[str], ...], tuple[np.ndarray | None, int]] = {}
        holding: dict[str, np.ndarray] = {}  # a query word -> which rowids hold it

        def held(word: str) -> np.ndarray:
            if word not in holding:
                holding[word] = np.zeros(corpus.span, dtype=bool)
                holding[word][held_by[word]["rowid"]] = True
            return holding[word]

        def narrow(phrases: Iterable[Collection[str]]) -> tuple[np.ndarray | None, int]:
            """The chunks that may hold one of the phrases (those holding each of its query words; None
            when a phrase holds none) and the fewest chunks holding one of those words (remembered: a
            shingle is narrowed for its presence, then for its holders)."""
            key = tuple(frozenset(p) for p in phrases)
            if key in narrowed_by:
                return narrowed_by[key]
            mask, fewest = np.zeros(corpus.span, dtype=bool), corpus.rows
            for phrase in key:
                words = [w for w in {w for t in phrase for w in tokenize(t)} if w in held_by]
                if not words:
                    narrowed_by[key] = (None, corpus.rows)  # words the query does not search: FTS5 alone
                    return narrowed_by[key]
                mask |= np.logical_and.reduce([held(w) for w in words])
                fewest = min([fewest, *(len(held_by[w]) for w in words)])
            narrowed_by[key] = (np.flatnonzero(mask), fewest)
            return narrowed_by[key]

        found = scored(per_term, corpus, books)
        bonuses = bonuses_of(narrow)
        narrowed = [narrow(b.alternatives) for b in bonuses]
        possible = self._phrase_holders(conn, found, bonuses, narrowed, (k, per_book), where)
        top = best_rows(found, corpus, possible, k, per_book)
        rows = self.chunks_by_rowid(conn, [r for r, _ in top])
        return [(*rows[r], score, found.best) for r, score in top if r in rows]

    def _phrase_holders(
        self,
        conn: Any,
        found: Scored,
        bonuses: Sequence[Bonus],
        narrowed: Sequence[tuple[np.ndarray | None, int]],
        ranking: tuple[int, bool],
        where: tuple[Scope, Sequence[tuple[int, int]]],
    ) -> list[tuple[float, np.ndarray]]:
        """Each bonus's weight and the rowids found holding it, as many as the ranking (``k``, per book)
        needs: ``narrowed`` gives the chunks that may hold each and the fewest postings of its words.
        Each book's best: every possible holder, all at once; else the rarest phrases first, as many at
        once as there are threads: the holders known prune what the others can still change."""
        k, per_book = ranking
        possible = [(b.weight, rows) for b, (rows, _) in zip(bonuses, narrowed, strict=True)]
        order = sorted(range(len(bonuses)), key=lambda i: (narrowed[i][1], -bonuses[i].weight))
        threads = phrase_threads()
        kth = kth_best(found, k)
        tiers = [order] if per_book else [order[i : i + threads] for i in range(0, len(order), threads)]
        for tier in tiers:
            lookups = [
                partial(
                    self._holders,
                    expression=bonuses[i].expression,
                    candidates=possible[i][1] if per_book else contenders(found, possible, kth, i),
                    fewest=narrowed[i][1],
                    where=where,
                )
                for i in tier
            ]
            for i, holders in zip(tier, self._concurrently(conn, lookups), strict=True):
                possible[i] = (bonuses[i].weight, holders)
        return [(w, h) for w, h in possible if h is not None]
