"""Staging: the book's descriptor (``book.json``) written last, marking the staged directory complete.

``book.json`` holds what the catalog needs (metadata, chapters without text, counts, the embedding
model and chunk settings; the translator and edition when the file names them, for the always-on
context: ``nodes/backends/editions.py``); the commit stores it in the library index, from which the
DuckDB catalog can always be rebuilt. Metadata: the reader's title, author and language, overridden by
the ``source_metadata`` input (JSON from ``dataflows``: a Calibre library's title, authors, series and
index, tags, language, identifiers, publication date, and the file's size, mtime and sha256, which
``folio sync`` compares); ``authors`` is the list, ``author`` the names joined with " and ".

Config keys: none. Limitations: the commit into the library is done by ``dataflows.library``.
"""

from __future__ import annotations

import json
from pathlib import Path

from folio.nodes.backends.editions import edition_info
from folio.nodes.backends.encoder import Encoder
from folio.nodes.core.types import Chunk, ConceptMap, IndexFile, Manifest, StagedBook

FORMAT_VERSION = 1


METADATA_KEYS = ("series", "series_index", "tags", "identifiers", "pubdate", "calibre_id")
STAMP_KEYS = ("file_size", "file_mtime_ns", "file_sha256")


def book_metadata(manifest: Manifest, source_metadata: str = "") -> dict:
    """The book's metadata: the reader's, overridden by ``source_metadata`` (JSON; see the docstring)."""
    given = json.loads(source_metadata) if source_metadata else {}
    authors = [str(a) for a in given.get("authors") or () if str(a).strip()]
    if not authors:
        authors = [a.strip() for a in manifest.author.split(" and ") if a.strip() and a.strip() != "Unknown"]
    out: dict[str, object] = {
        "title": str(given.get("title") or manifest.title),
        "author": " and ".join(authors) or manifest.author,
        "authors": authors,
        "language": str(given.get("language") or manifest.language),
        "series": given.get("series") or None,
        "series_index": given.get("series_index"),
        "tags": [str(t) for t in given.get("tags") or ()],
        "identifiers": dict(given.get("identifiers") or {}),
        "pubdate": given.get("pubdate") or None,
    }
    out.update({k: given[k] for k in ("calibre_id", *STAMP_KEYS) if k in given})
    return out


def _descriptor(
    manifest: Manifest,
    chunks: tuple[Chunk, ...],
    n_windows: int,
    model_id: str,
    chunk_size: int,
    chunk_overlap: float,
    metadata: dict,
) -> dict[str, object]:
    per_chapter: dict[str, int] = {}
    for chunk in chunks:
        per_chapter[chunk.chapter_id] = per_chapter.get(chunk.chapter_id, 0) + 1
    return {
        "format_version": FORMAT_VERSION,
        "book_id": manifest.book_id,
        **metadata,
        "source_file": manifest.source_file,
        **edition_info(manifest.source_file),  # translator / edition, when the file names them
        "format": manifest.format,
        "content_hash": manifest.content_hash,
        "embedding_model": model_id,
        "chunk_tokens": chunk_size,
        "chunk_overlap": chunk_overlap,
        "n_chunks": len(chunks),
        "n_windows": n_windows,
        "characters": sum(c.length for c in manifest.chapters),  # with each chapter's offset: positions
        "chapters": [
            {
                "chapter_id": c.chapter_id,
                "order": c.order,
                "title": c.title,
                "length": c.length,
                "n_chunks": per_chapter.get(c.chapter_id, 0),
                "offset": sum(p.length for p in manifest.chapters[: c.order]),
                **({"pages": [list(mark) for mark in c.pages]} if c.pages else {}),
            }
            for c in manifest.chapters
        ],
        **({"page_labels": list(manifest.page_labels)} if manifest.page_labels else {}),
    }


def staged_book(
    manifest: Manifest,
    chunks: tuple[Chunk, ...],
    lexical_index: IndexFile,
    vector_index: IndexFile,
    concept_map_file: IndexFile,
    encoder: Encoder,
    chunk_size: int,
    staging_dir: str,
    book_metadata: dict,
    chunk_overlap: float = 0.1,
) -> StagedBook:
    """The complete staged book directory; ``book.json`` is written last."""
    descriptor = _descriptor(
        manifest, chunks, vector_index.count, encoder.model_id, chunk_size, chunk_overlap, book_metadata
    )
    path = Path(staging_dir) / "book.json"
    path.write_text(json.dumps(descriptor, indent=1, ensure_ascii=False), encoding="utf-8")
    return StagedBook(
        book_id=manifest.book_id,
        directory=str(staging_dir),
        title=str(book_metadata["title"]),
        n_chapters=len(manifest.chapters),
        n_chunks=len(chunks),
        n_windows=vector_index.count,
    )


def concept_map_file(concept_map: ConceptMap, staging_dir: str) -> IndexFile:
    """The book's concept map as deterministic JSON (``concept_map.json``) in the staging directory."""
    path = Path(staging_dir) / "concept_map.json"
    path.write_bytes(concept_map.to_json())
    return IndexFile(
        path=str(path), count=len(concept_map.entities) + len(concept_map.themes) + len(concept_map.events)
    )
