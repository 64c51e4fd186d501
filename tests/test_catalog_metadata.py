"""The DuckDB catalog keeps each book's metadata (authors, series, tags, identifiers, pubdate), and a
catalog of the earlier schema is rebuilt (dataflows/library.py)."""

from __future__ import annotations

from pathlib import Path

import duckdb

try:  # the benchmarks live in bench/ once issue 29's move is merged; before it, in folio.dataflows
    from bench.scaling import generated_library, small_books
except ModuleNotFoundError:
    from bench.scaling import generated_library, small_books
from tests.conftest import DATA_DIR

EARLIER = """
CREATE TABLE books(
    book_id VARCHAR PRIMARY KEY, title VARCHAR, author VARCHAR, language VARCHAR, source_file VARCHAR,
    format VARCHAR, content_hash VARCHAR, embedding_model VARCHAR, chunk_tokens INTEGER,
    n_chapters INTEGER, n_chunks INTEGER, n_windows INTEGER, ingested_at TIMESTAMP DEFAULT current_timestamp);
"""


def test_a_catalog_of_the_earlier_schema_is_rebuilt_with_the_metadata_columns(tmp_path: Path) -> None:
    lib = generated_library(tmp_path / "lib", small_books(DATA_DIR, 3, words=60))
    lib.close()
    lib.drop_catalog()
    con = duckdb.connect(str(lib.catalog_path))
    con.execute(EARLIER)
    con.close()
    lib.sync_catalog()
    con = duckdb.connect(str(lib.catalog_path), read_only=True)
    try:
        rows = con.execute("SELECT title, authors, series, tags FROM books ORDER BY title").fetchall()
    finally:
        con.close()
    assert [r[0] for r in rows] == ["Piece 0001", "Piece 0002", "Piece 0003"]
    assert all(r[1] is None and r[2] is None for r in rows)  # generated books carry no such metadata
    assert [r[3] for r in rows] == [None, None, None]
    lib.close()
