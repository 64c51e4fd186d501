"""Staging: the book's descriptor (``book.json``) written last, marking the staged directory complete.

``book.json`` holds what the catalog needs (metadata, chapters without text, counts, the embedding
model and chunk settings; the translator and edition when the file names them, for the always-on
context: ``nodes/backends/editions.py``); the commit stores it in the library index, from which the
DuckDB catalog can always be rebuilt.

Config keys: none. Limitations: the commit into the library is done by ``dataflows.library``.
"""

from __future__ import annotations

import json
from pathlib import Path

from folio.nodes.backends.editions import edition_info
from folio.nodes.backends.encoder import Encoder
from folio.nodes.types import Chunk, ConceptMap, IndexFile, Manifest, StagedBook

FORMAT_VERSION = 1


def _descriptor(
    manifest: Manifest,
    chunks: tuple[Chunk, ...],
    n_windows: int,
    model_id: str,
    chunk_size: int,
    chunk_overlap: float,
) -> dict[str, object]:
    per_chapter: dict[str, int] = {}
    for chunk in chunks:
        per_chapter[chunk.chapter_id] = per_chapter.get(chunk.chapter_id, 0) + 1
    return {
        "format_version": FORMAT_VERSION,
        "book_id": manifest.book_id,
        "title": manifest.title,
        "author": manifest.author,
        "language": manifest.language,
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
    chunk_overlap: float = 0.1,
) -> StagedBook:
    """The complete staged book directory; ``book.json`` is written last."""
    descriptor = _descriptor(
        manifest, chunks, vector_index.count, encoder.model_id, chunk_size, chunk_overlap
    )
    path = Path(staging_dir) / "book.json"
    path.write_text(json.dumps(descriptor, indent=1, ensure_ascii=False), encoding="utf-8")
    return StagedBook(
        book_id=manifest.book_id,
        directory=str(staging_dir),
        title=manifest.title,
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
