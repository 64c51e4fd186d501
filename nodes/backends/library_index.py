"""The library-wide indexes: one SQLite database and a few usearch HNSW segments over every book.

Files in the library directory::

    library.sqlite          (WAL) meta, books (descriptor + concept map), chapters, chunks, chunks_fts
                            (FTS5, external content, porter unicode61 remove_diacritics 2), windows
                            (window key -> chunk, with the window's float32 vector), segments (the
                            vectors files of the current generation, ``nodes.backends.vector_segments``),
                            postings (per term and book, ``nodes.backends.postings``), terms and
                            neighbours (word neighbours, ``nodes.backends.neighbours``), runs,
                            run_postings and run_neighbours (many books' postings merged into one row
                            per term, ``nodes.backends.postings_runs``)
    vectors-<G>.usearch     an HNSW segment written by generation G, never changed after; keys = window
                            keys (a run of them)

A query is one index lookup whatever the number of books: lexical search is one FTS5 statement with
library-wide term statistics, filtered by book and chapter columns (a search of a large library, whole or
of some books, scores the same bm25 from the term postings instead, the word neighbours finding the bonus
phrases and FTS5 only those they cannot settle; a search of the whole library reads each word's
postings from a few runs, not a row per book);
semantic search asks each HNSW segment for candidates and re-scores their union exactly from the stored
float32 vectors (so a quantised index costs little quality), or, for a scope of some books or chapters,
an exact scan of that scope's vectors (cached per book, bounded). Hits carry their book and chapter.

Writes (``commit``) add and remove whole books in one SQLite transaction (``BEGIN IMMEDIATE``,
``synchronous=FULL``); the new windows go to a new segment file (with the newest segments the merge
policy folds in), written and fsynced before that transaction commits, and the transaction records
the new generation and its list of segments: a crash at any step leaves the old library or the new
one. A removed book's windows stay in their segment as dead keys until a fold or ``compact``; the
same for its records in a postings run (a search masks them out).
``recover`` removes a vectors file no segment names and rebuilds one segment of every window when a
file is missing or damaged. Keys of chunks and windows are never reused.

Resources: one connection per process and thread, opened lazily and closed by ``close`` (SQLite's
default page cache, about 2 MB per connection); one memory-mapped view per segment per process (one
file descriptor each, at most ``MAX_SEGMENTS``); opening reads no per-book state (the descriptors are
read on first use, cached per generation); nothing is left to the garbage collector.

Limitations: the HNSW settings (connectivity, expansion, scalar kind) and the embedding model are
fixed by the library's first book with vectors; a book embedded by another model is refused (ingest
it into another library). A commit that folds segments rebuilds their HNSW from the stored vectors
(about 4 builds per window over its life; a fold stays under ``INLINE_MERGE_WINDOWS`` windows while the
library holds at most ``MAX_SEGMENTS`` files). A library this process may not write is read without
its write-ahead log when the log is empty or absent (SQLite's ``immutable``): a writer of another user
committing at the same time is not seen.

Modules: ``nodes.backends.index_store`` (the schema, connections, reads and the vector segments' files),
``index_search`` (lexical and semantic search), ``index_write`` (``commit``), ``index_recovery``
(``check``, ``compact``, ``rebuild_vectors``); ``LibraryIndex`` joins them, and this module is where
callers import it and its helpers from.
"""

from __future__ import annotations

from folio.nodes.backends.index_recovery import IndexRecovery
from folio.nodes.backends.index_search import IndexSearch
from folio.nodes.backends.index_search import best_per_chunk as best_per_chunk
from folio.nodes.backends.index_store import DATABASE as DATABASE
from folio.nodes.backends.index_store import DTYPES as DTYPES
from folio.nodes.backends.index_store import descriptor_problem as descriptor_problem
from folio.nodes.backends.index_store import vector_matrix as vector_matrix
from folio.nodes.backends.index_write import StagedRows as StagedRows
from folio.nodes.backends.index_write import VectorSettings as VectorSettings
from folio.nodes.backends.vector_segments import usearch_index as usearch_index  # callers import it here


class LibraryIndex(IndexSearch, IndexRecovery):
    """The library's one SQLite database and its HNSW segments: storage (``IndexStore``), search
    (``IndexSearch``), writes (``IndexWrite``), checks and recovery (``IndexRecovery``); per-thread
    connections, shared HNSW views. A library this process may not write is opened read-only
    (``read_only``): every read works, a write fails as SQLite's read-only error."""
