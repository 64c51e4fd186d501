"""Search in the library index (``nodes.backends.library_index``): lexical (one FTS5 statement with the
scope's own term statistics, phrase and shingle bonuses) and semantic (the HNSW segments re-scored
exactly, or an exact scan of a scope's cached vectors).

Config: none (``EXACT_MAX_WINDOWS``, the constants of ``nodes.backends.index_store``). Limitations: see
``nodes.backends.library_index``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Sequence
from functools import partial
from typing import Any

import numpy as np

from folio.nodes.backends.index_postings import IndexPostings, Narrow, Near
from folio.nodes.backends.index_store import (
    BM25_K1,
    CHUNK_COLUMNS,
    Scope,
    fts_select,
    row_hit,
    sql_in,
    sql_scope,
    vector_matrix,
)
from folio.nodes.backends.postings import Bonus, bm25_idf
from folio.nodes.backends.vector_segments import (
    Segment,
    search_breadths,
)
from folio.nodes.core.text import (
    fts_match_expression,
    fts_phrase_expression,
    fts_phrases,
    fts_shingles,
    fts_tokens,
)
from folio.nodes.core.types import FolioError, Hit

PHRASE_BONUS = 1.0  # a verbatim phrase of the query: + the best bm25 score of the query in scope
SHINGLE_BONUS = 0.5  # all of the query's 3-word runs held: + this share of the best score
STATS_CACHE = 256  # scopes whose term-statistics base (chunks, mean length) is kept per generation
EXACT_MAX_WINDOWS = 50_000  # a scope up to this many windows is scored exactly, a larger one by the HNSW
VECTOR_CACHE_BYTES = 256 * 2**20  # per-book vectors kept for scoped searches (LRU)
LARGE_LIBRARY_CHUNKS = 20_000  # from this many chunks a whole-library search leaves out words without idf
TERM_HITS_CACHE = 4096  # words whose library-wide chunk counts are kept per generation
NO_IDF = 1e-6  # FTS5's bm25 idf of a word in half the rows or more
MAX_SPANS = 16  # rowid spans a scoped search walks at most (the closest are joined beyond)


def best_per_chunk(rowids: np.ndarray, sims: np.ndarray, k: int) -> list[tuple[int, float]]:
    """The ``k`` chunks with the best window similarity, as ``(chunk rowid, similarity)``."""
    best: dict[int, float] = {}
    for rowid, sim in zip(rowids.tolist(), sims.tolist(), strict=True):
        if sim > best.get(rowid, -2.0):
            best[rowid] = sim
    return sorted(best.items(), key=lambda kv: (-kv[1], kv[0]))[:k]


def _varint(blob: bytes) -> int:
    """SQLite's variable-length integer at the start of ``blob`` (FTS5 ``docsize`` rows)."""
    value = 0
    for i, byte in enumerate(blob[:9]):
        if i == 8:
            return (value << 8) | byte
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            break
    return value


def informative_terms(terms: Sequence[str], hits: Sequence[int], rows: int, k: int) -> tuple[str, ...]:
    """The MATCH terms worth scanning in a whole-library search of ``rows`` chunks: those FTS5's bm25
    gives an idf (found in fewer than half the chunks: "time" in 133,000 of 247,000 adds at most 2.2e-6
    to a score yet costs a scan and a score of every chunk holding it); all of them when none has one or
    the kept ones cannot fill ``k`` hits."""
    kept = [(t, h) for t, h in zip(terms, hits, strict=True) if h and bm25_idf(rows, h) > NO_IDF]
    if not kept or max(h for _, h in kept) < k:
        return tuple(terms)
    return tuple(t for t, _ in kept)


def left_out_bound(dropped: int, bonuses: Sequence[Bonus], kept: Collection[str], best: float) -> float:
    """The most a chunk holding none of the ``kept`` words can score: ``dropped`` words without idf
    (each at most ``NO_IDF * (k1 + 1)``) and the bonuses with a phrase holding no kept word, in units of
    ``best``. A search that left words out is exact when its ``k``-th hit scores above this."""
    words = set(kept)
    own = sum(b.weight for b in bonuses if any(not a & words for a in b.alternatives))
    return dropped * NO_IDF * (BM25_K1 + 1) + best * own


def merged_spans(ranges: Sequence[tuple[int, int]], limit: int = MAX_SPANS) -> tuple[tuple[int, int], ...]:
    """The rowid ranges (one per book) as the fewest spans covering them: overlapping or adjacent ones
    joined, then the two closest joined until at most ``limit`` remain."""
    spans: list[list[int]] = []
    for lo, hi in sorted(ranges):
        if spans and lo <= spans[-1][1] + 1:
            spans[-1][1] = max(spans[-1][1], hi)
        else:
            spans.append([lo, hi])
    while len(spans) > max(1, limit):
        i = min(range(len(spans) - 1), key=lambda j: (spans[j + 1][0] - spans[j][1], j))
        spans[i : i + 2] = [[spans[i][0], spans[i + 1][1]]]
    return tuple((lo, hi) for lo, hi in spans)


class IndexSearch(IndexPostings):
    """The library index's searches."""

    def book_id_set(self) -> frozenset[str]:
        """Every book's id, its descriptor readable or damaged (cached per generation): what a search of
        the whole library covers (``book_store.scopes``)."""

        def make(conn: Any) -> frozenset[str]:
            descriptors, damaged = self._books()
            return frozenset([d["book_id"] for d in descriptors] + [b for b, _ in damaged])

        with self._reading() as conn:
            ids: frozenset[str] = self._cached(conn, "book_ids", make)
        return ids

    def chunk_total(self) -> int:
        """Chunks in the library (cached per generation)."""
        with self._reading() as conn:
            return self._chunk_count(conn)

    # --- lexical -----------------------------------------------------------------------------------
    @staticmethod
    def _per_expression(
        conn: Any, wrap: str, expressions: Sequence[str], scope: Scope, spans: Sequence[tuple[int, int]] = ()
    ) -> tuple:
        """One value per expression, in one statement: ``wrap`` filled with ``FROM (the chunks in scope
        matching it)`` (``EXISTS(SELECT 1 {})``, ``(SELECT count(*) {})``), walking only ``spans``."""
        parts, params = [], []
        for e in expressions:
            sql, ps = fts_select("chunks_fts.rowid", [], e, scope, spans)
            parts.append(wrap.format(f"FROM ({sql})"))
            params.extend(ps)
        return conn.execute("SELECT " + ", ".join(parts), params).fetchone()

    def _present(
        self, conn: Any, expressions: Sequence[str], scope: Scope, spans: Sequence[tuple[int, int]] = ()
    ) -> list[str]:
        """The MATCH expressions that match some chunk in scope (one statement)."""
        if not expressions:
            return []
        flags = self._per_expression(conn, "EXISTS(SELECT 1 {})", expressions, scope, spans)
        return [e for e, flag in zip(expressions, flags, strict=True) if flag]

    def _scope_stats(self, conn: Any, scope: tuple[str, list[object]]) -> tuple[int, float]:
        """``(chunks, mean FTS5 tokens per chunk)`` in scope (cached per generation and scope)."""
        key = "stats:" + scope[0] + repr(scope[1])

        def make(c: Any) -> tuple[int, float]:
            sizes = [
                _varint(bytes(sz))
                for (sz,) in c.execute(
                    "SELECT d.sz FROM chunks_fts_docsize d JOIN chunks c ON c.rowid = d.id "
                    f"WHERE 1{scope[0]}",
                    scope[1],
                )
            ]
            return len(sizes), (sum(sizes) / len(sizes) if sizes else 1.0)

        value: tuple[int, float] = self._cached(conn, key, make)
        self._trim("stats:", STATS_CACHE)
        return value

    def _trim(self, prefix: str, limit: int) -> None:
        """Keep at most ``limit`` of the per-generation values named ``prefix...`` (the oldest go)."""
        with self._lock:
            held = [key for key in self._by_generation if key.startswith(prefix)]
            for old in held[: max(0, len(held) - limit)]:
                del self._by_generation[old]

    def _chunk_count(self, conn: Any) -> int:
        sql = "SELECT count(*) FROM chunks"
        return int(self._cached(conn, "chunk_count", lambda c: c.execute(sql).fetchone()[0]))

    def _bm25_sql(
        self, conn: Any, terms: Sequence[str], scope: Scope, spans: Sequence[tuple[int, int]] = ()
    ) -> tuple[str, list[object], int]:
        """The bm25 expression for the query's terms and its parameters, and the number of chunks in
        scope: FTS5's own bm25 for the whole library, else the same formula over the scope's statistics
        (chunks, mean length, each term's chunks in scope), so a book searched alone ranks as if indexed
        alone and books searched together share one set of statistics. ``spans``: the scope's rowid spans
        (``_spans``), narrowing each term's count."""
        if not scope[0]:
            return "-bm25(chunks_fts)", [], self._chunk_count(conn)
        rows, avgdl = self._scope_stats(conn, scope)
        hits = self._per_expression(conn, "(SELECT count(*) {})", terms, scope, spans)
        idfs = [bm25_idf(rows, int(h)) for h in hits]
        return f"scoped_bm25(chunks_fts, ?{', ?' * len(idfs)})", [avgdl, *idfs], rows

    def _term_hits(self, conn: Any, terms: Sequence[str]) -> list[int]:
        """The library's chunks holding each MATCH term (cached per generation, ``TERM_HITS_CACHE``)."""
        sql = "SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ?"

        def count(term: str) -> int:
            return int(self._cached(conn, "hits:" + term, lambda c: c.execute(sql, (term,)).fetchone()[0]))

        hits = [count(t) for t in terms]
        self._trim("hits:", TERM_HITS_CACHE)
        return hits

    def _searched_terms(self, conn: Any, terms: Sequence[str], scoped: bool, k: int) -> tuple[str, ...]:
        """The terms a search matches: all of them, except in a whole-library search of a large library
        (``LARGE_LIBRARY_CHUNKS``), where words without idf are left out (``informative_terms``)."""
        if scoped or len(terms) < 2:
            return tuple(terms)
        rows = self._chunk_count(conn)
        if rows < LARGE_LIBRARY_CHUNKS:
            return tuple(terms)
        return informative_terms(terms, self._term_hits(conn, terms), rows, k)

    def _spans(self, conn: Any, book_ids: Collection[str] | None) -> tuple[tuple[int, int], ...]:
        """The rowid spans of the books' chunks (``merged_spans``, cached per generation and books), so
        that FTS5 walks only those stretches of each word's postings where it walked all of them to keep
        the books' chunks (a book's chunks are committed together: one book's span holds its chunks
        alone); the chunk filter still decides. None for the whole library."""
        if book_ids is None:
            return ()
        where, params = sql_scope(book_ids, None)
        sql = f"SELECT min(c.rowid), max(c.rowid) FROM chunks c WHERE 1{where} GROUP BY c.book_id"
        spans: tuple[tuple[int, int], ...] = self._cached(
            conn,
            "span:" + repr(params),
            lambda c: merged_spans([(int(a), int(b)) for a, b in c.execute(sql, params)]),
        )
        self._trim("span:", STATS_CACHE)
        return spans

    def _bonuses(
        self,
        conn: Any,
        query: str,
        books: Scope,
        spans: Sequence[tuple[int, int]] = (),
        narrow: Narrow | None = None,
        near: Near | None = None,
    ) -> list[Bonus]:
        """The query's phrase and shingle bonuses held by some chunk of the books searched (``narrow``:
        the chunks that can hold a run, from the postings: none there, and FTS5 is not asked; ``near``:
        the chunks holding a run, or that may, from the word neighbours)."""
        bonuses: list[Bonus] = []
        phrases = fts_phrases(query)
        phrase = fts_phrase_expression(phrases)
        if phrase is not None:
            bonuses.append(Bonus(phrase, PHRASE_BONUS, phrases))
        runs = {fts_phrase_expression((s,)) or "": s for s in fts_shingles(query)}
        if narrow is None:
            present = self._present(conn, list(runs), books, spans)
        else:
            known = {e: None if near is None else near(r) for e, r in runs.items()}
            pending = [e for e, kn in known.items() if kn is None or not kn[1]]  # FTS5 decides these
            lookups = []
            for e in pending:
                candidates, fewest = narrow([runs[e]])
                held = known[e]
                lookups.append(
                    partial(
                        self._holders,
                        expression=e,
                        candidates=candidates if held is None else held[0],
                        fewest=fewest,
                        exists=True,
                        where=(books, spans),
                    )
                )
            looked = dict(zip(pending, self._concurrently(conn, lookups), strict=True))
            settled = {e: kn[0] for e, kn in known.items() if kn is not None and kn[1]}
            present = [e for e in runs if len(looked[e] if e in looked else settled[e])]
        bonuses.extend(Bonus(e, SHINGLE_BONUS / len(present), (runs[e],)) for e in present)
        return bonuses

    def lexical(
        self,
        query: str,
        k: int = 10,
        book_ids: Collection[str] | None = None,
        chapter_ids: Collection[str] | None = None,
        per_book: bool = False,
    ) -> list[Hit]:
        """bm25-ranked chunks with phrase and proximity bonuses, in one statement; any query string is
        safe (no FTS5 syntax errors). ``per_book``: at most ``k`` hits of each book.

        A chunk's score is its bm25 over the query's content words (the statistics of the books searched,
        whatever chapters are kept: FTS5's own for the whole library, ``_bm25_sql``) plus,
        in units of the best ``-bm25`` in scope, ``PHRASE_BONUS`` when it holds one of
        ``fts_phrases(query)`` verbatim and ``SHINGLE_BONUS`` times the share of ``fts_shingles(query)``
        it holds: a chunk holding the line typed ranks above every chunk that only repeats its words.
        A whole-library search of a large library first leaves out words without idf
        (``_searched_terms``) and falls back to all the words unless its ``k``-th hit beats any chunk it
        left out (``left_out_bound``): the same hits, without scoring every chunk that says "time".
        """
        expression = fts_match_expression(query)
        if expression is None or k <= 0 or (book_ids is not None and not book_ids):
            return []
        if chapter_ids is not None and not chapter_ids:
            return []
        scope = sql_scope(book_ids, chapter_ids)
        books = sql_scope(book_ids, None)  # statistics and bonus runs: the books' (chapters only filter)
        with self._reading() as conn:
            terms = expression.split(" OR ")
            spans = self._spans(conn, book_ids)
            if chapter_ids is None:

                def bonuses_of(narrow: Narrow, near: Near | None) -> list[Bonus]:
                    return self._bonuses(conn, query, books, spans, narrow, near)

                where = (books, spans)
                searched = self._postings_search(
                    conn, (query, terms), (k, per_book), book_ids, where, bonuses_of
                )
                if searched is not None:
                    return [row_hit(row, row[8]) for row in searched]
            bonuses = self._bonuses(conn, query, books, spans)
            kept = terms if per_book else self._searched_terms(conn, terms, bool(books[0]), k)
            rows = self._lexical_rows(conn, kept, bonuses, (scope, books, spans), k, per_book)
            if len(kept) < len(terms):
                words = [t.strip('"') for t in kept]
                best = rows[0][9] if rows else 0.0
                bound = left_out_bound(len(terms) - len(kept), bonuses, words, best)
                if len(rows) < k or rows[-1][8] <= bound:
                    rows = self._lexical_rows(conn, terms, bonuses, (scope, books, spans), k, per_book)
            return [row_hit(row, row[8]) for row in rows]

    def _postings_search(
        self,
        conn: Any,
        query: tuple[str, Sequence[str]],
        ranking: tuple[int, bool],
        book_ids: Collection[str] | None,
        where: tuple[Scope, Sequence[tuple[int, int]]],
        bonuses_of: Callable[[Narrow, Near | None], list[Bonus]],
    ) -> list[tuple] | None:
        """``_postings_rows`` for ``query`` (its text and MATCH terms; ``ranking``: k, per book); in a
        whole-library search of a large library, first without the words that surely have no idf
        (``_no_idf``), then with every word unless the ``k``-th hit beats any chunk left out
        (``left_out_bound``), as the FTS5 path does."""
        k, per_book = ranking
        terms = list(query[1])
        whole = not per_book and book_ids is None
        dropped = self._no_idf(conn, terms, k, (LARGE_LIBRARY_CHUNKS, NO_IDF)) if whole else set()
        if dropped:
            kept = [t for t in terms if t not in dropped]
            held: list[list[Bonus]] = []

            def holding(narrow: Narrow, near: Near | None) -> list[Bonus]:
                held.append(bonuses_of(narrow, near))
                return held[-1]

            rows = self._postings_rows(conn, (query[0], kept), k, per_book, book_ids, where, holding)
            if rows is None:
                return None
            words = [t.strip('"') for t in kept]
            best = rows[0][9] if rows else 0.0
            if len(rows) == k and rows[-1][8] > left_out_bound(len(dropped), held[-1], words, best):
                return rows
        return self._postings_rows(conn, (query[0], terms), k, per_book, book_ids, where, bonuses_of)

    def _lexical_rows(
        self,
        conn: Any,
        terms: Sequence[str],
        bonuses: Sequence[Bonus],
        scopes: tuple[Scope, Scope, tuple[tuple[int, int], ...]],
        k: int,
        per_book: bool,
    ) -> list[tuple]:
        """The ranked rows (``CHUNK_COLUMNS``, score, best ``-bm25`` in scope) of one lexical statement
        matching any of ``terms`` in ``scopes`` (the chunks kept, the books searched, their ``_spans``)."""
        scope, books, spans = scopes
        bonus_sql = " + ".join(f"{b.weight!r} * (b.r IN (SELECT r FROM p{i}))" for i, b in enumerate(bonuses))
        bm25, bm25_params, rows = self._bm25_sql(conn, terms, books, spans)
        matches, params = fts_select(
            f"chunks_fts.rowid AS r, {bm25} AS s", bm25_params, " OR ".join(terms), scope, spans
        )
        phrases = ""
        for i, b in enumerate(bonuses):
            sql, ps = fts_select("chunks_fts.rowid AS r", [], b.expression, ("", []), spans)
            phrases += f"p{i} AS MATERIALIZED ({sql}), "
            params.extend(ps)
        # without per_book, only the k best by bm25 and the chunks holding a bonus phrase can rank first
        held = " UNION ".join(f"SELECT r FROM p{i}" for i in range(len(bonuses)))
        candidates = (
            "b"
            if per_book or not bonuses
            else f"(SELECT * FROM (SELECT r, s FROM b ORDER BY s DESC, r LIMIT {int(k)}) "
            f"UNION SELECT r, s FROM b WHERE r IN ({held})) AS b"
        )
        head = (
            f"WITH b AS MATERIALIZED ({matches}), {phrases}"
            "top AS (SELECT max(max(s), ?) AS best FROM b), "
            f"scored AS (SELECT b.r AS r, b.s + top.best * ({bonus_sql or '0'}) AS score, top.best AS best "
            f"FROM {candidates} JOIN top)"
        )
        if per_book:  # at most k of each book
            sql = (
                f"{head}, ranked AS (SELECT scored.r AS r, scored.score AS score, scored.best AS best, "
                "ROW_NUMBER() OVER (PARTITION BY c.book_id ORDER BY scored.score DESC, c.rowid) AS n "
                "FROM scored JOIN chunks c ON c.rowid = scored.r) "
                f"SELECT {CHUNK_COLUMNS}, ranked.score, ranked.best FROM ranked "
                "JOIN chunks c ON c.rowid = ranked.r WHERE ranked.n <= ? ORDER BY ranked.score DESC, c.rowid"
            )
        else:
            sql = (
                f"{head}, best AS (SELECT r, score, best FROM scored ORDER BY score DESC, r LIMIT ?) "
                f"SELECT {CHUNK_COLUMNS}, best.score, best.best FROM best JOIN chunks c ON c.rowid = best.r "
                "ORDER BY best.score DESC, c.rowid"
            )
        rare = math.log(max(rows - 0.5, 1.5) / 1.5)  # idf of a word in one chunk: the least bonus
        params.extend([rare, int(k)])
        return list(conn.execute(sql, params))

    def books_holding(self, text: str, book_ids: Collection[str] | None = None) -> frozenset[str]:
        """The books (of ``book_ids``) some chunk of which holds the words of ``text`` in this order."""
        expression = fts_phrase_expression((tuple(fts_tokens(text)),))
        if expression is None:
            return frozenset()
        where, params = sql_scope(book_ids, None)
        sql = (
            "SELECT DISTINCT c.book_id FROM chunks_fts JOIN chunks c ON c.rowid = chunks_fts.rowid "
            f"WHERE chunks_fts MATCH ?{where}"
        )
        with self._reading() as conn:
            return frozenset(r[0] for r in conn.execute(sql, [expression, *params]))

    def chunks_holding(self, text: str, book_id: str) -> list[Hit]:
        """The book's chunks holding the words of ``text`` in this order (FTS5 phrase), in reading order."""
        expression = fts_phrase_expression((tuple(fts_tokens(text)),))
        if expression is None:
            return []
        sql = (
            f"SELECT {CHUNK_COLUMNS} FROM chunks_fts JOIN chunks c ON c.rowid = chunks_fts.rowid "
            "WHERE chunks_fts MATCH ? AND c.book_id = ? ORDER BY c.ordinal"
        )
        with self._reading() as conn:
            return [row_hit(row, 0.0) for row in conn.execute(sql, [expression, book_id])]

    def _segment_views(self, segments: Sequence[Segment]) -> list[Any] | None:
        """The views of ``segments`` (None when a file is missing); views of other segments are dropped
        (their files closed), so the open files follow the library's segments."""
        with self._lock:
            wanted = {s.generation for s in segments}
            for old in [g for g in self._views if g not in wanted]:
                del self._views[old]
        views = [self._view(s.generation) for s in segments]
        return None if any(v is None for v in views) else views

    def _book_vectors(
        self, conn: Any, generation: int, book_id: str
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(chunk rowids, chapter ids, vectors)`` of the book's windows (LRU cache, bounded bytes)."""
        key = (generation, book_id)
        with self._lock:
            if key in self._vector_cache:
                self._vector_cache.move_to_end(key)
                return self._vector_cache[key]
        rows = list(
            conn.execute(
                "SELECT w.chunk_rowid, c.chapter_id, w.vector FROM windows w JOIN chunks c "
                "ON c.rowid = w.chunk_rowid WHERE w.book_id = ? ORDER BY w.key",
                (book_id,),
            )
        )
        rowids = np.array([r[0] for r in rows], dtype=np.int64)
        chapters = np.array([r[1] for r in rows], dtype=object)
        matrix = vector_matrix([r[2] for r in rows]) if rows else np.zeros((0, 1), dtype=np.float32)
        value = (rowids, chapters, matrix)
        with self._lock:
            self._vector_cache[key] = value
            self._cache_bytes += matrix.nbytes
            while self._cache_bytes > VECTOR_CACHE_BYTES and len(self._vector_cache) > 1:
                _, (_, _, old) = self._vector_cache.popitem(last=False)
                self._cache_bytes -= old.nbytes
        return value

    def _scope_windows(self, conn: Any, book_ids: Collection[str] | None) -> int:
        if book_ids is None:
            return self._cached(
                conn, "window_count", lambda c: int(c.execute("SELECT count(*) FROM windows").fetchone()[0])
            )
        where, params = sql_in("book_id", sorted(set(book_ids)))
        return int(conn.execute(f"SELECT count(*) FROM windows WHERE {where}", params).fetchone()[0])

    def _exact(
        self,
        conn: Any,
        generation: int,
        q: np.ndarray,
        k: int,
        book_ids: Collection[str],
        chapter_ids: Collection[str] | None,
    ) -> list[tuple[int, float]]:
        rowids, sims = [], []
        allowed = set(chapter_ids) if chapter_ids is not None else None
        for book_id in sorted(set(book_ids)):
            ids, chapters, matrix = self._book_vectors(conn, generation, book_id)
            if not len(ids):
                continue
            mask = np.ones(len(ids), dtype=bool) if allowed is None else np.isin(chapters, list(allowed))
            rowids.append(ids[mask])
            sims.append(np.asarray(matrix[mask] @ q, dtype=np.float64))
        if not rowids:
            return []
        return best_per_chunk(np.concatenate(rowids), np.concatenate(sims), k)

    def _approximate(
        self,
        conn: Any,
        views: Sequence[tuple[Segment, Any]],
        q: np.ndarray,
        k: int,
        count: int,
        book_ids: Collection[str] | None,
        chapter_ids: Collection[str] | None,
    ) -> list[tuple[int, float]]:
        """Every segment's HNSW candidates (``count`` live ones each), re-scored exactly from their stored
        vectors, kept when in scope: the merge across segments is exact."""
        keys: list[int] = []
        breadths = search_breadths([s for s, _ in views], count)
        for (_, view), breadth in zip(views, breadths, strict=True):
            matches = view.search(q, min(breadth, len(view)), threads=1)  # one query: no thread pool
            keys.extend(int(x) for x in np.asarray(matches.keys).ravel().tolist())
        if not keys:
            return []
        where, params = sql_in("w.key", keys)
        scope, scope_params = sql_scope(book_ids, chapter_ids)
        rows = list(
            conn.execute(
                f"SELECT w.chunk_rowid, w.vector FROM windows w JOIN chunks c ON c.rowid = w.chunk_rowid "
                f"WHERE {where}{scope}",
                [*params, *scope_params],
            )
        )
        if not rows:
            return []
        matrix = vector_matrix([r[1] for r in rows])
        return best_per_chunk(
            np.array([r[0] for r in rows], dtype=np.int64), np.asarray(matrix @ q, dtype=np.float64), k
        )

    def semantic(
        self,
        query_vector: np.ndarray,
        k: int = 10,
        book_ids: Collection[str] | None = None,
        chapter_ids: Collection[str] | None = None,
    ) -> list[Hit]:
        """Chunks ranked by the cosine similarity of their best window to the query vector (exact
        float32 scores): the whole library through the HNSW, a scope of books or chapters exactly."""
        if k <= 0 or (book_ids is not None and not book_ids) or (chapter_ids is not None and not chapter_ids):
            return []
        q = np.asarray(query_vector, dtype=np.float32).ravel()
        for attempt in range(2):
            stale = False
            with self._reading() as conn:
                generation = self._generation(conn)
                segments = self._segments(conn)
                total = sum(s.live for s in segments)
                if total == 0:
                    return []
                if book_ids is None and chapter_ids is not None:  # chapters of any book: theirs, exactly
                    where, params = sql_in("chapter_id", sorted(set(chapter_ids)))
                    book_ids = [
                        r[0]
                        for r in conn.execute(f"SELECT DISTINCT book_id FROM chapters WHERE {where}", params)
                    ]
                    if not book_ids:
                        return []
                scoped = self._scope_windows(conn, book_ids) if book_ids is not None else total
                if book_ids is not None and (chapter_ids is not None or scoped <= EXACT_MAX_WINDOWS):
                    top = self._exact(conn, generation, q, k, book_ids, chapter_ids)
                else:
                    views = self._segment_views(segments)
                    if views is None:
                        stale = True  # a writer removed a file between our reads, or it is missing
                    else:
                        want = int(max(4 * k, k + 16) * max(1.0, total / max(scoped, 1)))
                        pairs = list(zip(segments, views, strict=True))
                        top = self._approximate(conn, pairs, q, k, want, book_ids, chapter_ids)
                        if book_ids is not None and len(top) < k:
                            top = self._exact(conn, generation, q, k, book_ids, chapter_ids)
                if not stale:
                    rows = self.chunks_by_rowid(conn, [r for r, _ in top])
                    return [row_hit(rows[r], s) for r, s in top if r in rows]
            if attempt == 0 and self.generation() != generation:
                continue
            break
        raise FolioError(
            str(self.damaged_vectors() or self.vectors_path(generation)),
            "the vector index is missing; reopen the library to rebuild it",
        )
