"""Node-level caching in the library: re-ingest reuses work, config changes re-run exactly downstream."""

import shutil

from folio.dataflows.api import ingest
from folio.dataflows.caching import DiskCacheResultStore, cache_info, last_run
from folio.dataflows.config import load_config
from folio.dataflows.registry import ingest_driver
from tests.conftest import ALICE_EPUB, BOOKS

ALWAYS_RUN = {"parsed_book", "encoder", "lexical_index", "vector_index", "concept_map_file", "staged_book"}


def _reingest(library, **overrides):
    report = ingest([ALICE_EPUB], library=library, config=overrides or None)
    assert report.ok, report.errors
    return last_run(ingest_driver(load_config(None, overrides=overrides), cache_library=library))


def test_unchanged_book_reuses_every_cached_node(alice_copy):
    run = _reingest(alice_copy)
    assert set(run["executed"]) <= ALWAYS_RUN
    assert {"manifest", "chunks", "windows", "window_vectors", "chunk_vectors", "concept_map"} <= set(
        run["from_cache"]
    )


def test_new_theme_threshold_reclusters_only(alice_copy):
    run = _reingest(alice_copy, concept_theme_threshold=0.61)
    assert "concept_map" in run["executed"]
    assert not {"chunks", "windows", "window_vectors", "chunk_vectors"} & set(run["executed"])


def test_new_chunk_size_rechunks_and_reembeds(alice_copy):
    run = _reingest(alice_copy, chunk_tokens=512)
    assert {"chunk_size", "chunks", "windows", "window_vectors", "chunk_vectors", "concept_map"} <= set(
        run["executed"]
    )
    assert "manifest" in run["from_cache"]


def test_edited_chapter_reembeds_only_its_windows(tmp_path):
    book = tmp_path / "alice.txt"
    shutil.copy(BOOKS / "txt/pg11_carroll_alices-adventures-in-wonderland.txt", book)
    library = tmp_path / "library"
    assert ingest([book], library=library).ok
    first = cache_info(library)["window_embeddings"]
    text = book.read_text(encoding="utf-8-sig")
    anchor = "There was a table set out under a tree in front of the house"
    assert anchor in text
    book.write_text(
        text.replace(anchor, "A long table, edited for this test, stood under a tree. " + anchor),
        encoding="utf-8",
    )
    assert ingest([book], library=library).ok
    added = cache_info(library)["window_embeddings"] - first
    assert 0 < added <= 0.1 * first  # one chapter's windows at most, not the book's


def test_an_uncached_ingest_neither_reads_nor_writes_window_vectors(tmp_path):
    book = tmp_path / "time-machine.txt"
    shutil.copy(BOOKS / "txt/pg35_wells_the-time-machine.txt", book)
    library = tmp_path / "library"
    report = ingest([book], library=library, cache=False)
    assert report.ok and report.ingested[0].n_windows > 0
    assert cache_info(library)["window_embeddings"] == 0


def test_cache_lives_inside_each_library(alice_copy, tmp_path):
    assert cache_info(alice_copy)["node_results"] > 0
    other = tmp_path / "other"
    assert cache_info(other)["node_results"] == 0
    assert not (other / "cache").exists()


def test_clients_are_versioned_but_never_stored(tmp_path):
    from folio.nodes.backends.encoder import load_encoder

    store = DiskCacheResultStore(tmp_path / "results")
    store.set("v1", load_encoder("minilm"))
    store.set("v2", (1, 2, 3))
    assert not store.exists("v1") and store.get("v2") == (1, 2, 3)
