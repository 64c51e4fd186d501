"""Lexical index: the book's rows for the library-wide FTS5 index, staged with apsw.

The staged ``book.sqlite`` holds chapters, chunks (with exact chapter offsets) and the window → chunk
map; the library commit (``nodes.backends.library_index``) indexes its chunks into the library's one
FTS5 table (``porter unicode61 remove_diacritics 2`` tokenizer, library-wide term statistics) in the
same transaction that adds the book. Queries are bm25-ranked and filterable by book and chapter, with
phrase and proximity bonuses; ``nodes.core.text.fts_match_expression`` / ``fts_phrases`` / ``fts_shingles``
build query expressions that never raise an FTS5 syntax error.

Config keys: none. Limitations: English stemming (porter) only.
"""

from __future__ import annotations

from pathlib import Path

from folio.nodes.core.types import Chunk, IndexFile, Manifest, Window

SCHEMA = """
CREATE TABLE chapters(chapter_id TEXT PRIMARY KEY, ord INTEGER NOT NULL, title TEXT NOT NULL, \
text TEXT NOT NULL);
CREATE TABLE chunks(
    rowid INTEGER PRIMARY KEY, chunk_id TEXT UNIQUE NOT NULL, chapter_id TEXT NOT NULL,
    ordinal INTEGER NOT NULL, start INTEGER NOT NULL, end INTEGER NOT NULL, n_tokens INTEGER NOT NULL,
    text TEXT NOT NULL);
CREATE INDEX chunks_chapter ON chunks(chapter_id);
CREATE TABLE windows(window_id INTEGER PRIMARY KEY, chunk_rowid INTEGER NOT NULL, start INTEGER, end INTEGER);
"""


def write_store(
    path: Path, manifest: Manifest, chunks: tuple[Chunk, ...], windows: tuple[Window, ...]
) -> None:
    import apsw

    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        path.unlink()
    conn = apsw.Connection(str(path))
    try:
        conn.execute("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;")
        with conn:
            conn.execute(SCHEMA)
            conn.executemany(
                "INSERT INTO chapters VALUES (?, ?, ?, ?)",
                [(c.chapter_id, c.order, c.title, c.text) for c in manifest.chapters],
            )
            conn.executemany(
                "INSERT INTO chunks VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (i + 1, c.chunk_id, c.chapter_id, c.ordinal, c.start, c.end, c.n_tokens, c.text)
                    for i, c in enumerate(chunks)
                ],
            )
            rowid = {c.chunk_id: i + 1 for i, c in enumerate(chunks)}
            conn.executemany(
                "INSERT INTO windows VALUES (?, ?, ?, ?)",
                [(w.window_id, rowid[w.chunk_id], w.start, w.end) for w in windows],
            )
    finally:
        conn.close()


def lexical_index(
    manifest: Manifest, chunks: tuple[Chunk, ...], windows: tuple[Window, ...], staging_dir: str
) -> IndexFile:
    """The book's rows for the library's lexical index (``book.sqlite``), in the staging directory."""
    path = Path(staging_dir) / "book.sqlite"
    write_store(path, manifest, chunks, windows)
    return IndexFile(path=str(path), count=len(chunks))
