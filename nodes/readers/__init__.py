"""Book readers, one module per format, behind one format table (``readers.table``).

Each reader takes the file (its path and bytes, already read within ``max_book_bytes``) and returns a
``ParsedBook``: chapters in reading order, plain text (see ``folio.nodes.ingest.parsing``), page marks
where the
format has pages. ``table.FORMATS`` maps file suffixes and magic bytes to readers; ``ingest``, the folder
scan and every suffix check read it, so adding a format is one module and one row.
"""
