"""A large library's lexical lookup runs beside the query encode (``ranking.started_lexical``): same hits,
the encode on one torch thread meanwhile, errors raised where the hits are read."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future

import pytest

from folio.dataflows.api import search
from folio.dataflows.library import Library
from folio.nodes.backends import encoder as encoder_module
from folio.nodes.backends.encoder import torch_threads
from folio.nodes.core import ranking
from folio.nodes.core.ranking import LexicalSearch, lexical_beside, started_lexical
from folio.nodes.core.types import FolioError

QUERY = "Who stole the tarts?"


def _key(hits):
    return [(h.book_id, h.chunk_id, round(h.score, 9)) for h in hits]


def test_chunk_total_counts_the_library_chunks(alice_library):
    lib = Library(alice_library)
    (store,) = lib.stores()
    rows = lib.index.chunk_rows(store.book_id)
    assert lib.index.chunk_total() == len(list(rows)) > 0


def test_a_small_library_searches_here_and_now(alice_library):
    stores = Library(alice_library).stores()
    assert not lexical_beside(stores)
    started = started_lexical(stores, QUERY, 10, None)
    assert started.pending is None and started.encode_threads == 0
    assert _key(started.hits()) == _key(ranking.ranked_lexical(stores, QUERY, 10, None))


def test_a_large_library_searches_on_the_lexical_thread(alice_library, monkeypatch):
    monkeypatch.setattr(ranking, "BESIDE_CHUNKS", 1)
    stores = Library(alice_library).stores()
    threads: list[str] = []
    plain = ranking.ranked_lexical

    def recorded(*args):
        threads.append(threading.current_thread().name)
        return plain(*args)

    monkeypatch.setattr(ranking, "ranked_lexical", recorded)
    started = started_lexical(stores, QUERY, 10, None)
    assert started.pending is not None and started.encode_threads == 1
    hits = started.hits()
    assert threads and threads[0].startswith("folio-lexical")
    assert _key(hits) == _key(plain(stores, QUERY, 10, None)) and hits


def test_a_chapter_scope_searches_here_and_now_even_in_a_large_library(alice_library, monkeypatch):
    monkeypatch.setattr(ranking, "BESIDE_CHUNKS", 1)
    stores = Library(alice_library).stores()
    chapter = ranking.ranked_lexical(stores, QUERY, 10, None)[0].chapter_id
    started = started_lexical(stores, QUERY, 10, (chapter,))
    assert started.pending is None and started.hits()
    assert {h.chapter_id for h in started.hits()} == {chapter}


def test_the_lexical_threads_error_is_raised_where_the_hits_are_read():
    failed: Future = Future()
    failed.set_exception(FolioError("library", "the index is damaged"))
    with pytest.raises(FolioError, match="the index is damaged"):
        LexicalSearch(pending=failed).hits()


def test_hybrid_search_encodes_while_the_lookup_runs_and_ranks_alike(alice_library, monkeypatch):
    inline = search(QUERY, library=alice_library, mode="hybrid", k=10)
    monkeypatch.setattr(ranking, "BESIDE_CHUNKS", 1)
    events: list[tuple[str, float, object]] = []
    plain_lexical, plain_encode = ranking.ranked_lexical, encoder_module.Encoder.encode_query

    def slow_lexical(*args):
        events.append(("lexical start", time.monotonic(), threading.current_thread().name))
        time.sleep(0.3)  # long enough that a sequential run could not overlap it
        out = plain_lexical(*args)
        events.append(("lexical end", time.monotonic(), None))
        return out

    def recorded_encode(self, query, threads=0):
        events.append(("encode", time.monotonic(), threads))
        return plain_encode(self, query, threads=threads)

    monkeypatch.setattr(ranking, "ranked_lexical", slow_lexical)
    monkeypatch.setattr(encoder_module.Encoder, "encode_query", recorded_encode)
    beside = search(QUERY, library=alice_library, mode="hybrid", k=10)
    when = {name: (t, extra) for name, t, extra in events}
    assert str(when["lexical start"][1]).startswith("folio-lexical")
    assert when["encode"][1] == 1  # one torch thread while the lookup holds the other core
    assert when["encode"][0] < when["lexical end"][0]  # the encode did not wait for the lookup
    # one torch thread sums in another order: the vector may differ in the last float bits, never the ranks
    assert [h.chunk_id for h in beside] == [h.chunk_id for h in inline] and inline
    assert max(abs(a.score - b.score) for a, b in zip(beside, inline, strict=True)) < 1e-5


def test_torch_threads_are_set_inside_and_put_back():
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    with torch_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    with torch_threads(0):
        assert torch.get_num_threads() == before
