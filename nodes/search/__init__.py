"""The search DAG's node modules: the encoder client (shared with ingest) and lexical / semantic /
hybrid retrieval."""
