"""Concept map: a compact map of a book's entities, themes and events, linked to chapters.

The query side uses it to route a question to the right chapters: ``concept_map_lookup``
(``nodes.core.concept_lookup``, which also formats its matches). ``deterministic_concept_map`` builds
it without an LLM (``nodes.core.concept_names``: entities and alias merging;
``nodes.core.concept_building``: themes, events, evidence); ``concept_map`` is that map as it is
(``concept_map_llm: none``, the default) or, with ``concept_map_llm: openai`` (which needs ``llm:
openai``), normalised by the LLM in one bounded call (``nodes.core.concept_normalising``: entity types
from a fixed set, aliases it says are one entity merged, theme labels), falling back to the
deterministic map with a note in ``ConceptMap.notes`` when the call fails or its reply is unusable.

- Entities: capitalised names, honorifics split off, aliases merged ("Holmes", "Mr. Holmes" and "Mr.
  Sherlock Holmes" join "Sherlock Holmes"; "Cheshire Cat" … "the Cat" join, "England" beside "New
  England" stays apart). Kept by salience (mentions and chapter spread).
- Themes: agglomerative clustering (average linkage, distance threshold, no explicit k) of the book's
  chunks on ``w * cos(chunk vectors) + (1 - w) * cos(TF-IDF vectors)``; clusters of one chunk are
  dropped. Labelled by their top TF-IDF keyphrases, or by the LLM.
- Events: pairs of entities mentioned in the same paragraph (or window of short paragraphs), labelled
  "Encounter: A + B".
- Every item keeps at most 24 chapter ids (strongest evidence first), top terms and up to two excerpt
  pointers inside chunk spans. Ids are hashes of content, so the same book and config give a
  byte-identical ``ConceptMap.to_json()`` without an LLM.

Differences from the design (issue 32, ``docs/design-differences.md``): themes cluster chunks and each
names the chapters its chunks come from, rather than clustering whole chapters. Measured on 2026-11-26
(this module's defaults, MiniLM window-mean chunk vectors; themes / chapters / chunks): Moby-Dick 84 /
138 / 471, Sherlock Holmes 27 / 12 / 199, Grimm 30 / 53 / 178, full Alice 5 / 12 / 57, abridged Alice
2 / 10. Clustering the chapters themselves (chapter vectors and chapter TF-IDF, the same blend) gives at
most half as many themes as chapters: Sherlock and Alice at most 2 at any threshold from 0.2 to 0.52,
Grimm 4, Moby-Dick 17 at best (0.4), never the design's 25. Read by a person, the chunk themes name one
story or episode each (Sherlock: "st simon / lord st / wedding" → The Noble Bachelor; Moby-Dick:
"steelkilt / lakeman / radney" → The Town-Ho's Story; Grimm: "wolf / grandmother / red cap" → Little
Red Cap, The Wolf and the Seven Little Kids, Old Sultan) or a thread through many chapters (Moby-Dick's
"ahab / starbuck / captain", 15 chapters); each book's largest theme is a loose catch-all (Sherlock
35 of 199 chunks, full Alice 36 of 57). A short book gets fewer themes than a novel: Alice 5, the
abridged Alice 2.

Config keys: ``concept_theme_threshold`` (distance threshold, 1 - blended similarity; 0.52: at 0.53 the
largest cluster of each book grows into a catch-all of 20-25% of the chunks), ``concept_centroid_weight``
(``w`` above, default 0.7); ``concept_map_llm`` (variant: a switch of its own, so that answers with
and without an LLM share one ingest, and an ingest calls no LLM unless asked to) and the ``llm_*``
settings of the connection.
Limitations: English capitalisation heuristics only; no coreference ("the woman", "he"); without an LLM,
aliases that share no words ("the White Whale" and "Moby Dick") stay separate entities; events are
co-occurrences, not parsed actions.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hamilton.function_modifiers import config

from folio.nodes.backends.llm import LLMError
from folio.nodes.core.concept_building import built_concept_map
from folio.nodes.core.concept_normalising import (
    NORMALISE_MAX_TOKENS,
    NORMALISE_SCHEMA,
    kept_deterministic,
    normalisation_messages,
    normalised_concept_map,
    parsed_normalisation,
)
from folio.nodes.core.types import Chunk, ConceptMap, FolioError, Manifest


def deterministic_concept_map(
    manifest: Manifest,
    chunks: tuple[Chunk, ...],
    chunk_vectors: np.ndarray,
    concept_theme_threshold: float = 0.52,
    concept_centroid_weight: float = 0.7,
) -> ConceptMap:
    """The book's concept map without an LLM: entities, themes and events linked to chapters."""
    source = manifest.source_file or manifest.book_id
    vectors = np.asarray(chunk_vectors)
    if vectors.ndim != 2 or vectors.shape[0] != len(chunks):
        raise FolioError(
            source, f"{vectors.shape[0] if vectors.ndim else 0} chunk vectors for {len(chunks)} chunks"
        )
    known = {c.chapter_id for c in manifest.chapters}
    if any(c.chapter_id not in known for c in chunks):
        raise FolioError(source, "a chunk names a chapter that is not in the manifest")
    if not 0.0 <= float(concept_centroid_weight) <= 1.0:
        raise FolioError("concept_centroid_weight", f"{concept_centroid_weight} is not between 0 and 1")
    if not 0.0 < float(concept_theme_threshold) <= 2.0:
        raise FolioError("concept_theme_threshold", f"{concept_theme_threshold} is not in (0, 2]")
    return built_concept_map(
        manifest, chunks, vectors, float(concept_theme_threshold), float(concept_centroid_weight)
    )


@config.when_not(concept_map_llm="openai")
def concept_map__plain(deterministic_concept_map: ConceptMap) -> ConceptMap:
    """The book's concept map: the deterministic one (``concept_map_llm: none``, the default)."""
    return deterministic_concept_map


@config.when(concept_map_llm="openai")
def concept_map__openai(
    deterministic_concept_map: ConceptMap, manifest: Manifest, llm_client: Any
) -> ConceptMap:
    """The deterministic map normalised by the LLM (types, merged aliases, theme labels) in one call;
    the deterministic map with a note when the call fails or its reply is unusable."""
    cmap = deterministic_concept_map
    if not cmap.entities and not cmap.themes:
        return cmap
    try:
        answer = llm_client.chat_json(
            normalisation_messages(cmap, manifest.title), NORMALISE_SCHEMA, max_tokens=NORMALISE_MAX_TOKENS
        )
        return normalised_concept_map(cmap, parsed_normalisation(answer, cmap))
    except (LLMError, ValueError) as exc:
        return kept_deterministic(cmap, str(exc))
