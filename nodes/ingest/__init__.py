"""The ingest DAG's node modules: one book file → manifest → chunks → indexes → concept map →
staged book (and the library DAG over many books)."""
