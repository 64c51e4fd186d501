"""Word neighbours beside the term postings (``nodes.backends.postings``): for each occurrence of a term in
a chunk, the vocabulary ids of the two tokens before it and the two after it, so that the chunks holding a
short phrase are found from the postings of one of its words in numpy, without FTS5's phrase queries.

Why: a search's bonus phrases ("the whale rose", "of the sea", the whole query) were FTS5 phrase
lookups, and a run of common words makes FTS5 step through the postings of "the" (every chunk): 20-70 ms a
query at 2,000,000 windows. Here a phrase of at most five tokens is found exactly from its *anchor*, its
rarest word whose place lets the other tokens lie within two of it: each occurrence of the anchor whose
recorded neighbours are the phrase's tokens is a chunk holding the phrase. A longer phrase (or one whose
words are all stop words) gets the chunks whose anchor has the right neighbours, a superset that FTS5
then checks.

Layout (in ``library.sqlite``, written and deleted with the book's chunks, in the commit's transaction):
``terms(term, id)`` the library's vocabulary (ids from 1, never reused; 0 is "no token": the chunk's
edge); ``neighbours(term, lo, near)`` for each (term, book) the ``NEAR`` rows of the term's occurrences,
in the order of its postings (chunk by chunk, then by position), and for the term ``""`` a marker row
(the number of terms given rows; ``check`` looks for each book's marker). The library's stop words'
tokens (stored in meta ``neighbours`` when the library starts with them) never anchor a phrase and get
no rows: half the tokens of English prose, so the rows hold about one id quadruple per two tokens (about
the size of the postings).

Config: none. Limitations: a library made before the neighbours has none until ``compact`` (``folio
doctor --compact``) writes them, and searches with FTS5's phrase queries until then.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

NEAR = np.dtype("<u4")  # one id; a row is four of them: the tokens at -2, -1, +1, +2
SLOTS = {-2: 0, -1: 1, 1: 2, 2: 3}
REACH = 2  # how far from its anchor a phrase token can be checked
NO_TOKEN = 0  # the id recorded where a chunk begins or ends
MARKER = ""  # the term whose row counts the book's neighbour rows


@dataclass(frozen=True)
class Anchor:
    """Where a phrase is looked up: its token at ``index`` (held by the fewest chunks among those that can
    anchor it) and whether every other token lies within ``REACH`` of it (``exact``: the chunks found hold
    the phrase; else they may)."""

    index: int
    exact: bool


def skipped_terms(meta: Mapping[str, str]) -> frozenset[str] | None:
    """The library's tokens without neighbour rows (meta ``neighbours``), or None when the library has no
    neighbours (made before them, until ``compact``)."""
    raw = meta.get("neighbours")
    return None if raw is None else frozenset(json.loads(raw))


def skip_meta(tokenize: Callable[[str], Sequence[str]], stopwords: Iterable[str]) -> str:
    """The meta value of a library starting with neighbours: the tokens of its ``stopwords``, sorted."""
    return json.dumps(sorted({t for w in stopwords for t in tokenize(w)}))


def anchor(tokens: Sequence[str], counts: Mapping[str, int], skipped: Collection[str]) -> Anchor | None:
    """The anchor of a phrase of ``tokens``: among the tokens with known postings (``counts``: chunks
    holding each) and neighbour rows (not ``skipped``), the one held by the fewest chunks whose place
    covers the phrase (``exact``), else the fewest overall; None when no token can anchor it."""
    n = len(tokens)
    usable = [i for i, t in enumerate(tokens) if t in counts and t not in skipped]
    if n < 2 or not usable:
        return None
    covering = [i for i in usable if i <= REACH and n - 1 - i <= REACH]
    pool = covering or usable
    best = min(pool, key=lambda i: (counts[tokens[i]], i))
    return Anchor(best, bool(covering))


def chunk_neighbours(ids: np.ndarray) -> np.ndarray:
    """The ``NEAR`` rows (n x 4) of a chunk's token ids in order: the ids at -2, -1, +1, +2 of each."""
    edge = np.full(REACH, NO_TOKEN, dtype=NEAR)
    padded = np.concatenate([edge, ids.astype(NEAR), edge])
    n = len(ids)
    return np.stack([padded[0:n], padded[1 : n + 1], padded[3 : n + 3], padded[4 : n + 4]], axis=1)


def book_neighbours(
    chunks: Sequence[tuple[int, Sequence[str]]], ids: Mapping[str, int], skipped: Collection[str]
) -> dict[str, bytes]:
    """One book's neighbour rows: term -> the ``NEAR`` rows of its occurrences (chunk rowid order, then
    position: the order of its postings' records), for every term not ``skipped``; ``MARKER`` -> how many
    terms have rows. ``chunks``: ``(rowid, tokens)``; ``ids``: the vocabulary id of every token."""
    terms: list[np.ndarray] = []
    near: list[np.ndarray] = []
    for _, tokens in sorted(chunks, key=lambda c: c[0]):
        if tokens:
            held = np.fromiter((ids[t] for t in tokens), dtype=NEAR, count=len(tokens))
            terms.append(held)
            near.append(chunk_neighbours(held))
    out: dict[str, bytes] = {}
    if terms:
        every, rows = np.concatenate(terms), np.concatenate(near)
        skip = {ids[t] for t in skipped if t in ids}
        order = np.argsort(every, kind="stable")  # by term, each term's occurrences in text order
        every, rows = every[order], rows[order]
        starts = np.flatnonzero(np.r_[True, every[1:] != every[:-1]])
        names = {i: t for t, i in ids.items()}
        for lo, hi in zip(starts, np.r_[starts[1:], len(every)], strict=True):
            term_id = int(every[lo])
            if term_id not in skip:
                out[names[term_id]] = np.ascontiguousarray(rows[lo:hi]).tobytes()
    out[MARKER] = np.array([len(out)], dtype=NEAR).tobytes()
    return out


@dataclass(frozen=True)
class Occurrences:
    """One term's occurrences in the chunks searched: each one's chunk (``owners``, a rowid) and its
    ``NEAR`` row (``rows``, n x 4)."""

    owners: np.ndarray
    rows: np.ndarray


def occurrences(rowids: np.ndarray, freqs: np.ndarray, near: bytes) -> Occurrences:
    """A term's ``Occurrences`` from its postings (``rowids`` and ``freqs``, one record a chunk) and its
    neighbour rows (``near``, one row an occurrence, in the same order)."""
    rows = np.frombuffer(near, dtype=NEAR).reshape(-1, 4)
    owners = np.repeat(rowids.astype(np.int64), freqs.astype(np.int64))
    if len(owners) != len(rows):
        raise ValueError("neighbour rows do not match the postings")
    return Occurrences(owners, rows)


def holding(found: Occurrences, at: int, tokens: Sequence[str], ids: Mapping[str, int]) -> np.ndarray:
    """The chunks (rowids, ascending) where the phrase of ``tokens`` stands around its token ``at``, whose
    occurrences are ``found``: every token within ``REACH`` of it is checked; a token the library never
    held holds nowhere."""
    checks = [(SLOTS[i - at], tokens[i]) for i in range(len(tokens)) if i != at and abs(i - at) <= REACH]
    if any(t not in ids for _, t in checks):
        return np.zeros(0, dtype=np.int64)
    ok = np.ones(len(found.rows), dtype=bool)
    for slot, token in checks:
        ok &= found.rows[:, slot] == ids[token]
    return ascending_unique(found.owners[ok])


def ascending_unique(values: np.ndarray) -> np.ndarray:
    """``np.unique(values)`` of values already in ascending order (an occurrence's chunk, chunk by chunk),
    in one pass: numpy's hashing ``unique`` took 0.5 ms a phrase at 2,000,000 windows. Values out of
    order go to ``np.unique``."""
    if len(values) < 2:
        return values.copy()
    if (values[1:] < values[:-1]).any():
        return np.unique(values)
    return values[np.concatenate(([True], values[1:] != values[:-1]))]
