"""Lexical search from the term postings (``nodes.backends.postings``) in a large library: the rows that
``IndexSearch``'s FTS5 statement gives, with the same scores and order, for a search of the whole library
or of some books (not of some chapters), scored in numpy instead of FTS5 scoring each matching chunk.
The bonus phrases' holders come from the word neighbours (``nodes.backends.neighbours``): a phrase of up
to five tokens with a word to anchor it is settled in numpy from that word's occurrences. FTS5 finds the
others, but only where they can matter: among the chunks the neighbours leave (or, without neighbours,
those holding all of a phrase's query words; none: FTS5 is not asked; few: chunk by chunk), and for the
``k`` best only among those that can still rank; the lookups run on several threads at once (the caller's
and workers', each on its own connection over the same snapshot), the rarest phrases first. A search of
the whole library reads each word's postings and neighbours from the postings runs
(``nodes.backends.postings_runs``: a row per run, then one per book in no run), masking out the records of
books removed since a run was written.

Config: none (``POSTINGS_MIN_CHUNKS``, ``POINT_CHECK_POSTINGS``, ``PHRASE_WORKERS``). Limitations: see
``nodes.backends.postings``; a library made before the postings, or smaller than
``POSTINGS_MIN_CHUNKS``, is searched by FTS5 alone.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Callable, Collection, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, TypeVar

import numpy as np

from folio.nodes.backends.index_store import FTS_TOKENIZE, IndexStore, Scope, fts_select, sql_in
from folio.nodes.backends.neighbours import (
    Occurrences,
    anchor,
    ascending_unique,
    holding,
    occurrences,
    skipped_terms,
)
from folio.nodes.backends.postings import (
    EVERY_CHUNK,
    POSTING,
    Bonus,
    Corpus,
    Scored,
    best_rows,
    bm25_idf,
    contenders,
    corpus_of,
    fts5_tokenizer,
    kth_best,
    scored,
    unpack,
)
from folio.nodes.backends.postings_runs import Run, alive, covered, read_runs
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
# the chunks holding a phrase (ordered tokens) and whether exactly so (else they may), from the word
# neighbours; None where they cannot tell (FTS5 does)
Near = Callable[[Sequence[str]], "tuple[np.ndarray, bool] | None"]
Bonuses = Callable[[Narrow, "Near | None"], list[Bonus]]


def near_bonus(bonus: Bonus, near: Near) -> tuple[np.ndarray, bool] | None:
    """The word neighbours' answer for a bonus: the chunks holding one of its phrases (the union) and
    whether exactly so; None when they cannot tell for one of them."""
    answers = [near(p) for p in bonus.phrases]
    if not answers or any(a is None for a in answers):
        return None
    held = [a for a in answers if a is not None]
    rows = held[0][0] if len(held) == 1 else ascending_unique(np.sort(np.concatenate([r for r, _ in held])))
    return rows, all(exact for _, exact in held)


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

    def _no_idf(self, conn: Any, terms: Sequence[str], k: int, limits: tuple[int, float]) -> set[str]:
        """The MATCH terms that a whole-library search of a large library (``limits``: at least so many
        chunks) with postings runs can leave out: each surely held by half the chunks or more (no idf: at
        most ``limits[1]`` a chunk), counted from the runs' records less every dead chunk and the books in
        no run; none when the others could not fill ``k`` hits."""
        (large, no_idf), corpus, runs = limits, self._corpus(conn), self._runs(conn)
        if corpus is None or corpus.rows < large or not runs or len(terms) < 2:
            return set()
        dead, top = sum(r.dead for r in runs), covered(runs)
        in_runs = "SELECT coalesce(sum(chunks), 0) FROM run_postings WHERE term = ?"
        newer = "SELECT coalesce(sum(length(records)), 0) FROM postings WHERE term = ? AND lo > ?"
        fewest: dict[str, int] = {}
        tokenize = fts5_tokenizer(conn, FTS_TOKENIZE)
        for term in terms:
            tokens = tokenize(term.strip('"'))
            if len(tokens) != 1:
                return set()
            word = tokens[0]
            held = conn.execute(in_runs, (word,)).fetchone()[0] - dead
            fewest[term] = held + conn.execute(newer, (word, top)).fetchone()[0] // POSTING.itemsize
        dropped = {t for t, n in fewest.items() if n > 0 and bm25_idf(corpus.rows, n) <= no_idf}
        kept = [fewest[t] for t in terms if t not in dropped]
        return dropped if kept and max(kept) >= k else set()

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
        rows_of = self._term_rows(conn, books)
        read = [rows_of("postings", t[0]) for t in tokens]
        raw = {t[0]: unpack(r[1] for r in rows) for t, rows in zip(tokens, read, strict=True)}
        held_by = {t: self._live(conn, records, corpus) for t, records in raw.items()}
        per_term = [held_by[t[0]] for t in tokens]
        los = {t[0]: [int(r[0]) for r in rows] for t, rows in zip(tokens, read, strict=True)}
        near = self._near(conn, tokenize, (held_by, raw, corpus.owners), los, rows_of)

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
        bonuses = bonuses_of(narrow, near)
        known = [None if near is None else near_bonus(b, near) for b in bonuses]
        settled = (None, corpus.rows)  # the neighbours settled it: nothing to narrow
        narrowed = [
            settled if kn and kn[1] else narrow(b.alternatives) for b, kn in zip(bonuses, known, strict=True)
        ]
        possible = self._phrase_holders(conn, found, bonuses, (narrowed, known), (k, per_book), where)
        top = best_rows(found, corpus, possible, k, per_book)
        rows = self.chunks_by_rowid(conn, [r for r, _ in top])
        return [(*rows[r], score, found.best) for r, score in top if r in rows]

    def _runs(self, conn: Any) -> tuple[Run, ...]:
        """The library's postings runs (``postings_runs``), cached per generation."""
        runs: tuple[Run, ...] = self._cached(conn, "runs", read_runs)
        return runs

    def _term_rows(self, conn: Any, books: Sequence[int] | None) -> Callable[[str, str], list[tuple]]:
        """A reader of one term's rows of ``"postings"`` or ``"neighbours"`` over the books searched
        (``books``: their first rowids; None: the whole library), ``(key, blob)`` in the order of the
        records: a book's row keyed by its first rowid; for the whole library, each postings run's row
        (keyed by minus its id), then the books in no run."""
        runs = self._runs(conn) if books is None else ()
        column = {"postings": "records", "neighbours": "near"}

        def rows_of(table: str, term: str) -> list[tuple]:
            if books is not None:
                sql = f"SELECT lo, {column[table]} FROM {table} WHERE term = ? AND lo IN "
                return list(
                    conn.execute(sql + "(SELECT value FROM json_each(?)) ORDER BY lo", (term, str(books)))
                )
            merged = f"SELECT -run, {column[table]} FROM run_{table} WHERE term = ? ORDER BY run"
            newer = f"SELECT lo, {column[table]} FROM {table} WHERE term = ? AND lo > ? ORDER BY lo"
            held = list(conn.execute(merged, (term,))) if runs else []
            return held + list(conn.execute(newer, (term, covered(runs))))

        return rows_of

    def _live(self, conn: Any, records: np.ndarray, corpus: Corpus) -> np.ndarray:
        """``records`` less those of books removed since their postings run was written (none when no
        run holds a removed book)."""
        if not any(r.dead for r in self._runs(conn)):
            return records
        return records[alive(records["rowid"].astype(np.int64), corpus.owners)]

    def _near(
        self,
        conn: Any,
        tokenize: Callable[[str], Sequence[str]],
        held: tuple[dict[str, np.ndarray], dict[str, np.ndarray], np.ndarray],
        los: dict[str, list[int]],
        rows_of: Callable[[str, str], list[tuple]],
    ) -> Near | None:
        """The word neighbours' answer for a phrase (``Near``) over the books searched (``rows_of``: their
        rows of a term, ``_term_rows``), anchored on a query word (``held``: each word's live postings, its
        postings as read, and each rowid's book, 0 for none; ``los``: the keys of the rows read); None for a
        library without neighbours (until ``compact``)."""
        skipped = self._cached(conn, "neighbourless", lambda c: skipped_terms(self._meta(c)))
        if skipped is None:
            return None
        held_by, raw, owners = held
        counts = {t: len(p) for t, p in held_by.items()}
        answers: dict[tuple[str, ...], tuple[np.ndarray, bool] | None] = {}
        found: dict[str, Occurrences | None] = {}  # an anchor word's occurrences, read once a search
        ids: dict[str, int] = {}  # the vocabulary ids of the tokens looked up (a search looks each up once)
        looked_up: set[str] = set()

        def occurring(word: str) -> Occurrences | None:
            if word not in found:
                rows = rows_of("neighbours", word)
                found[word] = None  # rows that do not match the postings: FTS5 decides
                if [int(r[0]) for r in rows] == los[word]:
                    records = raw[word]
                    with contextlib.suppress(ValueError):
                        found[word] = occurrences(
                            records["rowid"], records["freq"], b"".join(r[1] for r in rows)
                        )
                    every = found[word]
                    if every is not None and len(records) != len(held_by[word]):
                        keep = alive(every.owners, owners)
                        found[word] = Occurrences(every.owners[keep], every.rows[keep])
            return found[word]

        def near(phrase: Sequence[str]) -> tuple[np.ndarray, bool] | None:
            key = tuple(phrase)
            if key not in answers:
                tokens = list(tokenize(" ".join(key)))
                at = anchor(tokens, counts, skipped)
                held = None if at is None else occurring(tokens[at.index])
                answers[key] = None
                if at is not None and held is not None:
                    new = set(tokens) - looked_up
                    if new:
                        looked_up.update(new)
                        ids.update(self._term_ids(conn, new))
                    answers[key] = (holding(held, at.index, tokens, ids), at.exact)
            return answers[key]

        return near

    @staticmethod
    def _term_ids(conn: Any, tokens: Collection[str]) -> dict[str, int]:
        """The vocabulary ids of those of ``tokens`` the library holds."""
        sql = "SELECT term, id FROM terms WHERE term IN (SELECT value FROM json_each(?))"
        return {str(t): int(i) for t, i in conn.execute(sql, (json.dumps(sorted(set(tokens))),))}

    def _phrase_holders(
        self,
        conn: Any,
        found: Scored,
        bonuses: Sequence[Bonus],
        looked: tuple[Sequence[tuple[np.ndarray | None, int]], Sequence[tuple[np.ndarray, bool] | None]],
        ranking: tuple[int, bool],
        where: tuple[Scope, Sequence[tuple[int, int]]],
    ) -> list[tuple[float, np.ndarray]]:
        """Each bonus's weight and the rowids found holding it, as many as the ranking (``k``, per book)
        needs: ``looked`` gives, for each, the chunks that may hold it and the fewest postings of its
        words (``narrow``), and the word neighbours' answer (the holders, exactly or a superset; None:
        they cannot tell). Exact holders need no FTS5; of the others, each book's best: every possible
        holder, all at once; else the rarest phrases first, as many at once as there are threads: the
        holders known prune what the others can still change."""
        k, per_book = ranking
        narrowed, known = looked
        possible = [
            (b.weight, rows if kn is None else kn[0])
            for b, (rows, _), kn in zip(bonuses, narrowed, known, strict=True)
        ]
        pending = [i for i, kn in enumerate(known) if kn is None or not kn[1]]
        order = sorted(pending, key=lambda i: (narrowed[i][1], -bonuses[i].weight))
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
