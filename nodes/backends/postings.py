"""Term postings beside FTS5 (``nodes.backends.library_index``): for each (term, book) the chunks holding
the term, how often, and each chunk's length in tokens, packed in one blob. What FTS5's bm25 reads for a
term, stored so that a search of the whole library (or of some books) scores every chunk holding a word
in one vectorised pass (numpy) instead of FTS5 scoring each matching row in turn: "sea" is held by 90,000
chunks of a library of 2,000,000 windows, and FTS5 takes about 0.7 µs a chunk, plus its phrase bonuses.

The scores are FTS5's own: the same terms (its tokenizer, called through apsw), the same statistics
(rows, mean length, each term's rows) and the same formula, evaluated in the same order in double
precision, so a ranking from the postings equals the one from FTS5 (tested on real books).

A book's postings are written and deleted with its chunks, in the commit's transaction: they are as
crash-safe as the chunks. The empty term ``""`` lists every chunk of a book (its rows and lengths:
the library's row count and mean length). A library made before the postings has none until
``compact`` (``folio doctor --compact``) writes them; until then its searches use FTS5 alone.

Config: none (``POSTINGS_MIN_CHUNKS`` in ``nodes.backends.index_postings``). Limitations: a search of
some chapters uses FTS5 (the postings do not know chapters); a query word the tokenizer cuts into several
tokens is a phrase, which the postings cannot score (FTS5 does); the bonus phrases are found from the word
neighbours beside them (``nodes.backends.neighbours``), and FTS5 checks only those the neighbours cannot
settle (a phrase of more than five tokens, or one without a word to anchor it).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

POSTING = np.dtype([("rowid", "<u4"), ("freq", "<u4"), ("size", "<u4")])
EVERY_CHUNK = ""  # the term whose postings list every chunk of the book (freq 0)
K1, B = 1.2, 0.75  # FTS5's bm25 parameters

Tokenize = Callable[[str], Sequence[str]]


@dataclass(frozen=True)
class Bonus:
    """A lexical bonus: the MATCH ``expression`` of its phrases, its ``weight`` (in units of the best
    bm25) and each phrase's tokens in order (``phrases``: a chunk holding any one earns it)."""

    expression: str
    weight: float
    phrases: tuple[tuple[str, ...], ...]

    @property
    def alternatives(self) -> tuple[frozenset[str], ...]:
        """Each phrase's tokens as a set (which words a chunk must hold to hold it)."""
        return tuple(frozenset(p) for p in self.phrases)


@dataclass(frozen=True)
class Corpus:
    """What bm25 reads of the whole library, from the postings' ``EVERY_CHUNK``: its ``rows``, their
    mean length and ``span`` (one more than the highest rowid), and each rowid's book (``owners``: the
    book's first rowid)."""

    rows: int
    avgdl: float
    span: int
    owners: np.ndarray
    books: dict[int, tuple[int, int]]  # a book's first rowid -> (its chunks, their tokens)


def corpus_of(blocks: Sequence[tuple[int, bytes]]) -> Corpus | None:
    """The ``Corpus`` of every book's ``(first rowid, EVERY_CHUNK records)``; None when empty."""
    every = unpack(b for _, b in blocks)
    if not len(every):
        return None
    span = int(every["rowid"].max()) + 1
    owners = np.zeros(span, dtype=np.int64)
    counts = [len(b) // POSTING.itemsize for _, b in blocks]
    owners[every["rowid"]] = np.repeat([lo for lo, _ in blocks], counts)
    books = {}
    for lo, blob in blocks:
        sizes = unpack([blob])["size"]
        books[int(lo)] = (len(sizes), int(sizes.astype(np.int64).sum()))
    tokens = sum(t for _, t in books.values())
    return Corpus(len(every), tokens / len(every), span, owners, books)


def fts5_tokenizer(conn: object, spec: str) -> Tokenize:
    """The tokens FTS5 indexes for a text, by the tokenizer ``spec`` ("porter unicode61 ...") of
    ``conn``'s FTS5 table."""
    import apsw

    name, *args = spec.split()
    tokenizer = conn.fts5_tokenizer(name, args)  # type: ignore[attr-defined]

    def tokenize(text: str) -> Sequence[str]:
        return tokenizer(
            text.encode("utf-8"),
            apsw.FTS5_TOKENIZE_DOCUMENT,
            None,
            include_offsets=False,
            include_colocated=False,
        )

    return tokenize


def book_postings(tokenize: Tokenize, chunks: Iterable[tuple[int, str]]) -> dict[str, bytes]:
    """One book's postings: term -> packed ``POSTING`` records (rowid order) of its chunks
    ``(rowid, text)``, and ``EVERY_CHUNK`` -> every chunk with its length."""
    return tokens_postings([(rowid, tokenize(text)) for rowid, text in chunks])


def tokens_postings(chunks: Iterable[tuple[int, Sequence[str]]]) -> dict[str, bytes]:
    """``book_postings`` of chunks already cut into their tokens ``(rowid, tokens)``."""
    lists: dict[str, list[tuple[int, int, int]]] = {EVERY_CHUNK: []}
    for rowid, tokens in chunks:
        size = len(tokens)
        lists[EVERY_CHUNK].append((rowid, 0, size))
        for term, freq in Counter(tokens).items():
            lists.setdefault(term, []).append((rowid, freq, size))
    return {term: np.array(sorted(v), dtype=POSTING).tobytes() for term, v in lists.items()}


def unpack(blobs: Iterable[bytes]) -> np.ndarray:
    """The ``POSTING`` records of several blobs, as one array."""
    return np.frombuffer(b"".join(blobs), dtype=POSTING)


def bm25_idf(rows: int, hits: int) -> float:
    """FTS5's bm25 idf of a phrase found in ``hits`` of ``rows`` rows (never below 1e-6)."""
    idf = math.log((rows - hits + 0.5) / (hits + 0.5))
    return idf if idf > 0 else 1e-6


def bm25_scores(
    per_term: Sequence[np.ndarray], rows: int, avgdl: float, span: int, scoped: bool = False
) -> np.ndarray:
    """Each chunk's bm25 (positive; 0 where no term is held), indexed by rowid (``span``: one more than
    the highest), for the query terms' postings ``per_term``, added per term in query order: as FTS5's
    ``bm25()`` computes it, ``idf * ((f * (k1 + 1)) / (f + k1 * (1 - b + b * D / avgdl)))``, or
    (``scoped``: over the statistics of some books) as ``scoped_bm25`` (``nodes.backends.index_store``)
    does, ``idf * f * (k1 + 1) / (f + ...)``: the same terms in another order, kept to the last bit."""
    scores = np.zeros(span, dtype=np.float64)
    for postings in per_term:
        if not len(postings):
            continue
        idf = bm25_idf(rows, len(postings))
        freq = postings["freq"].astype(np.float64)
        norm = K1 * (1 - B + B * postings["size"].astype(np.float64) / avgdl)
        if scoped:
            scores[postings["rowid"]] += idf * freq * (K1 + 1) / (freq + norm)
        else:
            scores[postings["rowid"]] += idf * ((freq * (K1 + 1.0)) / (freq + norm))
    return scores


def matched_rowids(per_term: Sequence[np.ndarray], span: int) -> np.ndarray:
    """The rowids (ascending) holding any of the terms."""
    mask = np.zeros(span, dtype=bool)
    for postings in per_term:
        mask[postings["rowid"]] = True
    return np.flatnonzero(mask)


def ranked(
    scores: np.ndarray,
    matched: np.ndarray,
    bonus: Callable[[np.ndarray], np.ndarray],
    held: np.ndarray,
    k: int,
) -> list[tuple[int, float]]:
    """The ``k`` best ``(rowid, score)`` of the ``matched`` rowids (ascending), ``score`` the bm25 plus
    ``bonus(rowids)``: only the ``k`` best by bm25 (and chunks tied with the k-th, which cannot pass it
    without a bonus) and the ``held`` rowids (those earning a bonus) can rank first. Ties go to the
    lower rowid."""
    if not len(matched):
        return []
    candidates = matched
    if len(matched) > k:
        base = scores[matched]
        kth = np.partition(base, len(base) - k)[len(base) - k]
        # the union of the bm25 contenders and the matched chunks holding a bonus, through a mask of every
        # rowid (numpy's hashing unique behind union1d / isin took about 3 ms at 2,000,000 windows)
        is_matched = np.zeros(len(scores), dtype=bool)
        is_matched[matched] = True
        held = held[held < len(scores)]
        keep = np.zeros(len(scores), dtype=bool)
        keep[matched[base >= kth]] = True
        keep[held[is_matched[held]]] = True
        candidates = np.flatnonzero(keep)
    total = scores[candidates] + bonus(candidates)
    best = np.lexsort((candidates, -total))[:k]
    return [(int(candidates[i]), float(total[i])) for i in best]


def ranked_per_book(
    scores: np.ndarray,
    matched: np.ndarray,
    owners: np.ndarray,
    bonus: Callable[[np.ndarray], np.ndarray],
    k: int,
) -> list[tuple[int, float]]:
    """At most ``k`` best ``(rowid, score)`` of each book (``owners``: each matched rowid's book key, a
    book's chunks a run of rowids), all of them ordered by score, then rowid."""
    if not len(matched):
        return []
    total = scores[matched] + bonus(matched)
    if k == 1:  # the router's question: each book's best chunk, in one pass over the runs
        starts = np.flatnonzero(np.r_[True, owners[1:] != owners[:-1]])
        group = np.cumsum(np.r_[True, owners[1:] != owners[:-1]]) - 1
        at_best = np.flatnonzero(total == np.maximum.reduceat(total, starts)[group])
        kept = at_best[np.r_[True, group[at_best][1:] != group[at_best][:-1]]]
    else:
        order = np.lexsort((matched, -total, owners))
        books = owners[order]
        first = np.r_[0, np.flatnonzero(books[1:] != books[:-1]) + 1]
        rank = np.arange(len(order)) - np.repeat(first, np.diff(np.r_[first, len(order)]))
        kept = order[rank < k]
    final = kept[np.lexsort((matched[kept], -total[kept]))]
    return [(int(matched[i]), float(total[i])) for i in final]


@dataclass(frozen=True)
class Scored:
    """A whole-library search's bm25 by rowid, the rowids holding a query term (ascending) and the best
    bm25 (the bonuses' unit: at least the idf of a word in one chunk)."""

    scores: np.ndarray
    matched: np.ndarray
    best: float


def scored(per_term: Sequence[np.ndarray], corpus: Corpus, books: Sequence[int] | None = None) -> Scored:
    """Each chunk's bm25 for the query terms' postings ``per_term``: FTS5's own over the whole library
    (``bm25_scores``), or over the statistics of the ``books`` searched (first rowids; ``scoped``)."""
    if books is None:
        rows = corpus.rows
        scores = bm25_scores(per_term, rows, corpus.avgdl, corpus.span)
    else:
        rows = sum(corpus.books[lo][0] for lo in books)
        tokens = sum(corpus.books[lo][1] for lo in books)
        scores = bm25_scores(per_term, rows, tokens / rows if rows else 1.0, corpus.span, scoped=True)
    matched = matched_rowids(per_term, corpus.span)
    rare = math.log(max(rows - 0.5, 1.5) / 1.5)
    return Scored(scores, matched, max(float(scores[matched].max()), rare) if len(matched) else 0.0)


def held_among(rows: np.ndarray, others: np.ndarray) -> np.ndarray:
    """Whether each of ``rows`` is one of ``others`` (rowids)."""
    if not len(rows) or not len(others):
        return np.zeros(len(rows), dtype=bool)
    mask = np.zeros(max(int(rows.max()), int(others.max())) + 1, dtype=bool)
    mask[others] = True
    return mask[rows]


def kth_best(found: Scored, k: int) -> float | None:
    """The ``k``-th best bm25 of the chunks matched; None when ``k`` or fewer match (all of them rank)."""
    if len(found.matched) <= k:
        return None
    base = found.scores[found.matched]
    return float(np.partition(base, len(base) - k)[len(base) - k])


def contenders(
    found: Scored, possible: Sequence[tuple[float, np.ndarray | None]], kth: float | None, which: int
) -> np.ndarray | None:
    """Of the possible holders of bonus ``which`` (``possible``: each bonus's ``(weight, rowids that
    may hold it)``, None: any chunk), those that could rank in the ``k`` best: their bm25 plus every
    bonus they may hold reaches the ``k``-th best bm25 (``kth_best``). Whether the others hold it cannot
    change the ``k`` best."""
    rows = possible[which][1]
    if rows is None or kth is None:
        return rows
    room = np.zeros(len(rows), dtype=np.float64)
    for weight, others in possible:
        room += weight if others is None else weight * held_among(rows, others)
    floor = kth - 1e-9 * max(1.0, found.best)  # rounding: keep a chunk at the boundary
    return rows[found.scores[rows] + found.best * room >= floor]


def best_rows(
    found: Scored,
    corpus: Corpus,
    bonuses: Sequence[tuple[float, np.ndarray]],
    k: int,
    per_book: bool,
) -> list[tuple[int, float]]:
    """The ranked ``(rowid, score)`` of a whole-library search, as FTS5's statement gives them: each
    chunk's bm25 plus ``best`` times the ``(weight, rowids holding it)`` of each bonus it holds; the ``k``
    best, or (``per_book``) the ``k`` best of each book."""
    if not len(found.matched):
        return []
    masks = []
    for weight, rows in bonuses:
        mask = np.zeros(corpus.span, dtype=bool)
        mask[rows] = True
        masks.append((weight, mask))

    def bonus(rowids: np.ndarray) -> np.ndarray:
        total = np.zeros(len(rowids), dtype=np.float64)
        for weight, mask in masks:
            total = total + weight * mask[rowids]
        return found.best * total

    if per_book:
        return ranked_per_book(found.scores, found.matched, corpus.owners[found.matched], bonus, k)
    held = (
        np.flatnonzero(np.logical_or.reduce([m for _, m in masks])) if masks else np.zeros(0, dtype=np.int64)
    )
    return ranked(found.scores, found.matched, bonus, held, k)
