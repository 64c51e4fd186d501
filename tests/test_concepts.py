"""Concept map (nodes/ingest/concepts.py) and its lookup (nodes/core/concept_lookup.py).

Real-book tests read the ``concept_map.json`` that the ingest pipeline wrote into the session libraries
(``sherlock_library``, ``moby_library`` in conftest); no test embeds a book. The rebuild test recomputes
the map from the stored book (parsed manifest, stored chunks, stored window vectors) and compares bytes.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from folio.dataflows.config import load_config
from folio.dataflows.library import Library
from folio.nodes.backends.book_store import BookStore
from folio.nodes.core import concept_lookup, types
from folio.nodes.core.concept_building import stable_id as _stable_id
from folio.nodes.core.concept_building import theme_clusters as _theme_clusters
from folio.nodes.core.concept_building import top_terms as _top_terms
from folio.nodes.core.concept_lookup import format_matches
from folio.nodes.core.concept_names import entity_drafts as _entity_drafts
from folio.nodes.core.text import fold
from folio.nodes.core.types import (
    Chapter,
    Chunk,
    ConceptMap,
    ConceptMatch,
    ConceptMatches,
    Entity,
    Event,
    Evidence,
    FolioError,
    Manifest,
    Theme,
)
from folio.nodes.ingest import concepts
from folio.nodes.ingest.concepts import deterministic_concept_map as concept_map

CONFIG = load_config()
THRESHOLD = CONFIG["concept_theme_threshold"]
CENTROID_WEIGHT = CONFIG["concept_centroid_weight"]


# --- the stored books: what the ingest pipeline wrote ------------------------------------------------


@dataclass(frozen=True)
class StoredBook:
    """One ingested book: its store, descriptor and the concept map the pipeline wrote."""

    store: BookStore
    descriptor: dict
    raw_map: bytes
    cmap: ConceptMap

    def chapter_texts(self) -> dict[str, str]:
        ids = [c["chapter_id"] for c in self.descriptor["chapters"]]
        return {chapter_id: self.store.chapter_text(chapter_id) for chapter_id in ids}

    def chunks(self) -> tuple[Chunk, ...]:
        """The stored chunks, in reading order."""
        texts = self.chapter_texts()
        tokens = {row[0]: row[5] for row in self.store.index.chunk_rows(self.store.book_id)}
        out = []
        for ordinal, hit in enumerate(self.store.chunks_in()):
            assert texts[hit.chapter_id][hit.start : hit.end] == hit.text
            n_tokens = tokens[hit.chunk_id]
            out.append(Chunk(hit.chunk_id, hit.chapter_id, ordinal, hit.start, hit.end, n_tokens, hit.text))
        return tuple(out)

    def chunk_vectors(self, n_chunks: int) -> np.ndarray:
        """Chunk vectors rebuilt from the stored window vectors, as the pipeline computes them."""
        from folio.nodes.backends.encoder import unit_means

        owners, vectors = self.store.window_vectors()
        position = {h.chunk_id: i for i, h in enumerate(self.store.chunks_in())}
        return unit_means(vectors, np.array([position[c] for c in owners], dtype=np.int64), n_chunks)

    def chapter_id(self, title: str) -> str:
        return next(c["chapter_id"] for c in self.descriptor["chapters"] if c["title"] == title)


def _stored(library: Path) -> StoredBook:
    lib = Library(library)
    (descriptor,) = lib.descriptors()
    raw = lib.index.concept_map(descriptor["book_id"])
    assert raw is not None
    return StoredBook(lib.store(descriptor["book_id"]), descriptor, raw, ConceptMap.from_json(raw))


@pytest.fixture(scope="module")
def sherlock(sherlock_library) -> StoredBook:
    return _stored(sherlock_library)


@pytest.fixture(scope="module")
def moby(moby_library) -> StoredBook:
    return _stored(moby_library)


@pytest.fixture(scope="module")
def sherlock_map(sherlock) -> ConceptMap:
    return sherlock.cmap


@pytest.fixture(scope="module")
def moby_map(moby) -> ConceptMap:
    return moby.cmap


def _entities_with_alias(cmap: ConceptMap, *aliases: str) -> list[Entity]:
    return [e for e in cmap.entities if set(aliases) & set(e.aliases)]


# --- golden texts for the pure helpers -----------------------------------------------------------

GOLDEN_CHAPTERS = [
    "Chapter One\n\n"
    "The morning was grey. Mr. Sherlock Holmes sat by the fire. But Holmes said nothing to Mrs. Hudson, "
    "who brought the tea. The tea was cold, and Mrs. Hudson took it away.\n\n"
    "Then Mr. Holmes rose. Chapter and verse, said he to Dr. Watson, who laughed. Watson went out with "
    "Holmes, and the two walked down to the river with Mr. John Clay.",
    "But the case was dark. Sherlock Holmes and Watson met Mr. John Turner, and then John Clay again. "
    "The old man spoke of England and of New England, where Mr. Rucastle and Mrs. Rucastle lived.\n\n"
    "Mrs. Rucastle wept; Mr. Rucastle laughed at Mrs. Rucastle; Holmes waited, and Watson watched John. "
    "The White Whale, said Watson, was a tale for England; the White Whale was only a white whale "
    "to Mr. Rucastle, and Mrs. Hudson went home to England.\n\n"
    "John Clay and John Turner shook hands. Later John Turner and John Clay saw the White Whale near "
    "New England. John smiled. John ran.",
]


@pytest.fixture(scope="module")
def golden_drafts():
    return {d.name: d for d in _entity_drafts(GOLDEN_CHAPTERS)}


def test_sentence_initial_common_words_are_not_entities(golden_drafts) -> None:
    for word in ("The", "But", "Then", "Chapter", "Chapter One", "Chapter and"):
        assert not any(word in d.aliases for d in golden_drafts.values()), word


def test_holmes_aliases_merge_into_sherlock_holmes(golden_drafts) -> None:
    holmes = golden_drafts["Sherlock Holmes"]
    assert {"Sherlock Holmes", "Holmes", "Mr. Holmes", "Mr. Sherlock Holmes"} <= set(holmes.aliases)
    assert not any(
        "Holmes" in a for name, d in golden_drafts.items() if name != "Sherlock Holmes" for a in d.aliases
    )


def test_mrs_hudson_is_separate_from_holmes(golden_drafts) -> None:
    hudson = golden_drafts["Mrs. Hudson"]
    assert hudson.aliases == ("Mrs. Hudson",)
    assert len(hudson.mentions) == 3


def test_title_of_the_other_gender_stays_a_separate_entity(golden_drafts) -> None:
    assert golden_drafts["Mr. Rucastle"].aliases == ("Mr. Rucastle",)
    assert golden_drafts["Mrs. Rucastle"].aliases == ("Mrs. Rucastle",)


def test_ambiguous_first_name_is_not_merged(golden_drafts) -> None:
    # "John" could be John Clay or John Turner: it joins neither.
    assert golden_drafts["John"].aliases == ("John",)
    assert golden_drafts["John Clay"].aliases == ("John Clay", "Mr. John Clay")
    assert golden_drafts["John Turner"].aliases == ("John Turner", "Mr. John Turner")


def test_place_name_does_not_merge_into_a_longer_place(golden_drafts) -> None:
    assert "New England" not in golden_drafts["England"].aliases
    assert len(golden_drafts["England"].mentions) == 3


def test_capitalised_phrase_is_a_name_when_rarely_written_in_lower_case(golden_drafts) -> None:
    assert len(golden_drafts["White Whale"].mentions) == 3


def test_dr_watson_and_watson_are_one_entity(golden_drafts) -> None:
    assert set(golden_drafts["Watson"].aliases) == {"Watson", "Dr. Watson"}
    assert len(golden_drafts["Watson"].mentions) == 5


def test_stable_ids_are_hashes_of_content() -> None:
    assert _stable_id("ent", "ahab") == "ent-" + hashlib.sha1(b"ahab").hexdigest()[:12]
    assert _stable_id("ent", "ahab") != _stable_id("ent", "starbuck")
    assert _stable_id("ent", "ahab") != _stable_id("evt", "ahab")


def test_entity_id_depends_only_on_the_name() -> None:
    def entity_ids(text: str) -> dict[str, str]:
        book = Manifest("b", "t", "a", "en", "x.txt", "txt", "h", (Chapter("c1", 0, "One", text),))
        chunk = Chunk("c1.000", "c1", 0, 0, len(text), 100, text)
        cmap = concept_map(book, (chunk,), np.ones((1, 4), dtype=np.float32), THRESHOLD, CENTROID_WEIGHT)
        return {e.name: e.entity_id for e in cmap.entities}

    first = entity_ids("Then Ahab spoke to Starbuck. Ahab was angry and Starbuck was afraid of Ahab.")
    second = entity_ids("Later Ahab saw Flask. Flask ran, and Ahab laughed at Flask before Ahab slept.")
    assert first["Ahab"] == second["Ahab"] == _stable_id("ent", "ahab")


def test_bigram_keyphrase_replaces_the_unigram_it_contains() -> None:
    vocabulary = ["ahab", "sea", "whale", "white", "white whale"]
    weights = np.array([0.5, 0.4, 0.9, 0.8, 0.7])
    assert _top_terms(weights, vocabulary, 3) == ("white whale", "ahab", "sea")
    assert _top_terms(weights, vocabulary, 3, exclude=frozenset({"ahab"})) == ("white whale", "sea")


def test_theme_clusters_drop_singletons_and_respect_the_cap() -> None:
    rng = np.random.default_rng(7)
    centres = rng.normal(size=(6, 16))
    points = np.repeat(centres, 5, axis=0) + 0.05 * rng.normal(size=(30, 16))
    points /= np.linalg.norm(points, axis=1, keepdims=True)
    similarity = points @ points.T
    found = _theme_clusters(similarity, 0.3)
    assert sorted(len(c) for c in found) == [5] * 6
    assert all(len({i // 5 for i in cluster}) == 1 for cluster in found)
    capped = _theme_clusters(similarity, 1e-9, max_themes=4)
    assert len(capped) <= 4
    assert all(len(c) >= 2 for c in capped)


def test_mismatched_vectors_are_a_folio_error() -> None:
    text = "Ahab met Starbuck."
    book = Manifest("b", "t", "a", "en", "x.txt", "txt", "h", (Chapter("c1", 0, "One", text),))
    chunk = Chunk("c1.000", "c1", 0, 0, len(text), 5, text)
    with pytest.raises(FolioError, match="2 chunk vectors for 1 chunks"):
        concept_map(book, (chunk,), np.ones((2, 4), dtype=np.float32), THRESHOLD, CENTROID_WEIGHT)


# --- serialisation and lookup on a tiny hand-made map ---------------------------------------------


def _tiny_map() -> ConceptMap:
    ev = (Evidence("c1", "c1.000", 0, 10),)
    ahab = Entity("ent-a", "Ahab", ("Ahab", "Captain Ahab"), 9, ("c2", "c1"), ("leg",), ev)
    starbuck = Entity("ent-s", "Starbuck", ("Starbuck", "Mr. Starbuck"), 5, ("c1",), ("mate",), ev)
    whale = Entity("ent-w", "White Whale", ("White Whale",), 4, ("c3",), ("hump",), ev)
    theme = Theme("thm-1", "whale / sea", ("whale", "sea", "white whale"), 3, 0.51234, ("c3", "c4"), ev)
    event = Event("evt-1", "Encounter: Ahab + Starbuck", ("ent-a", "ent-s"), 3, ("c1",), ("deck",), ev)
    return ConceptMap("book", (ahab, starbuck, whale), (theme,), (event,))


def test_to_json_is_deterministic_and_round_trips() -> None:
    cmap = _tiny_map()
    data = cmap.to_json()
    assert data == _tiny_map().to_json()
    assert ConceptMap.from_json(data) == cmap
    assert data.index(b'"book_id"') < data.index(b'"entities"') < data.index(b'"events"')  # sorted keys


def test_from_json_rejects_bytes_that_are_not_a_concept_map() -> None:
    with pytest.raises(FolioError, match="not a valid concept map"):
        ConceptMap.from_json(b'{"book_id": "x"}')


def test_lookup_ranks_the_event_naming_both_participants_first() -> None:
    matches = concept_lookup.concept_map_lookup(_tiny_map(), "when does Ahab argue with Starbuck?")
    assert matches.events[0].item_id == "evt-1"
    assert matches.events[0].score > max(m.score for m in matches.entities)
    assert matches.chapter_ids[0] == "c1"


def test_lookup_exact_entity_beats_theme_keywords() -> None:
    matches = concept_lookup.concept_map_lookup(_tiny_map(), "the white whale")
    assert matches.entities[0].item_id == "ent-w"
    assert matches.entities[0].score == 1.0
    assert matches.themes[0].score < 1.0
    assert matches.chapter_ids[0] == "c3"


def test_lookup_of_unknown_words_matches_nothing() -> None:
    matches = concept_lookup.concept_map_lookup(_tiny_map(), "quantum chromodynamics")
    assert (matches.entities, matches.themes, matches.events, matches.chapter_ids) == ((), (), (), ())


def test_a_title_alone_matches_nothing() -> None:
    # "Captain" and "Mr." are in aliases ("Captain Ahab", "Mr. Starbuck") but never hit on their own.
    matches = concept_lookup.concept_map_lookup(_tiny_map(), "Captain Mr.")
    assert (matches.entities, matches.events, matches.chapter_ids) == ((), (), ())


def test_lookup_limit_caps_each_kind_and_the_chapters() -> None:
    matches = concept_lookup.concept_map_lookup(_tiny_map(), "Ahab Starbuck whale", limit=1)
    assert len(matches.entities) == 1 and len(matches.events) <= 1 and len(matches.chapter_ids) == 1


def test_lookup_is_a_helper_beside_the_values_and_not_a_node() -> None:
    from hamilton import driver
    from hamilton.graph_utils import find_functions

    assert concept_lookup.concept_map_lookup.__module__ == "folio.nodes.core.concept_lookup"
    assert not hasattr(types, "concept_map_lookup") and not hasattr(types.ConceptMap, "lookup")  # values only
    assert not hasattr(concepts, "concept_map_lookup")
    assert [name for name, _ in find_functions(concepts)] == [
        "concept_map__openai",
        "concept_map__plain",
        "deterministic_concept_map",
    ]
    dr = driver.Builder().with_modules(concepts).with_config(dict(CONFIG)).build()
    names = {v.name for v in dr.list_available_variables()}
    assert "concept_map" in names
    assert not names & {"concept_map_lookup", "query", "limit"}


def test_format_matches_lists_kind_score_label_and_chapter_titles() -> None:
    matches = concept_lookup.concept_map_lookup(_tiny_map(), "Ahab and Starbuck")
    text = format_matches(matches, {"c1": "The Quarter-Deck", "c2": "The Ship"})
    lines = text.splitlines()
    assert lines[0].split()[:2] == ["event", f"{matches.events[0].score:.3f}"]
    assert lines[0].endswith("Encounter: Ahab + Starbuck")
    assert lines[1].strip() == "chapters: The Quarter-Deck"
    assert "entity" in text and "Ahab" in text and "Starbuck" in text
    assert lines[-1] == "best chapters: The Quarter-Deck, The Ship"


def test_format_matches_falls_back_to_chapter_ids_and_shortens_long_lists() -> None:
    chapters = tuple(f"c{i}" for i in range(10))
    match = ConceptMatch("theme", "thm-1", "whale / sea", 0.8, chapters)
    text = format_matches(ConceptMatches("whale", (), (match,), (), chapters[:3]), max_chapters=4)
    assert text.splitlines() == [
        "theme   0.800  whale / sea",
        "        chapters: c0, c1, c2, c3 (+6 more)",
        "best chapters: c0, c1, c2",
    ]


def test_format_matches_says_when_nothing_matches() -> None:
    assert (
        format_matches(concept_lookup.concept_map_lookup(_tiny_map(), "quantum"))
        == "no entities, themes or events match 'quantum'"
    )


# --- The Adventures of Sherlock Holmes (the map the ingest pipeline wrote) --------------------------


def test_sherlock_holmes_is_one_entity_with_his_aliases(sherlock_map) -> None:
    found = _entities_with_alias(sherlock_map, "Holmes", "Sherlock Holmes", "Mr. Holmes")
    assert len(found) == 1
    assert found[0].name == "Sherlock Holmes"
    assert {"Sherlock Holmes", "Mr. Holmes", "Holmes"} <= set(found[0].aliases)
    assert sherlock_map.entities[0] == found[0]  # the most salient entity


def test_holmes_is_linked_to_every_story(sherlock, sherlock_map) -> None:
    (holmes,) = _entities_with_alias(sherlock_map, "Sherlock Holmes")
    assert set(holmes.chapter_ids) == {c["chapter_id"] for c in sherlock.descriptor["chapters"]}


def test_watson_is_one_entity(sherlock_map) -> None:
    found = _entities_with_alias(sherlock_map, "Watson", "Dr. Watson")
    assert len(found) == 1
    assert len(found[0].chapter_ids) >= 8


def test_irene_adler_is_one_entity_linked_first_to_a_scandal_in_bohemia(sherlock, sherlock_map) -> None:
    found = _entities_with_alias(sherlock_map, "Irene Adler", "Miss Irene Adler")
    assert len(found) == 1
    assert found[0].chapter_ids[0] == sherlock.chapter_id("A Scandal in Bohemia")


def test_story_characters_are_linked_to_their_story(sherlock, sherlock_map) -> None:
    for alias, story in [
        ("Jabez Wilson", "The Redheaded League"),
        ("James Windibank", "A Case of Identity"),
        ("Helen Stoner", "The Adventure of the Speckled Band"),
        ("Neville St. Clair", "The Man with the Twisted Lip"),
    ]:
        (entity,) = _entities_with_alias(sherlock_map, alias)
        assert entity.chapter_ids[0] == sherlock.chapter_id(story), alias


def test_mrs_hudson_is_not_holmes(sherlock_map) -> None:
    (hudson,) = _entities_with_alias(sherlock_map, "Mrs. Hudson")
    assert hudson.name == "Mrs. Hudson"
    assert not any("Holmes" in a for a in hudson.aliases)


def test_common_sentence_starters_are_not_sherlock_entities(sherlock_map) -> None:
    aliases = {a for e in sherlock_map.entities for a in e.aliases}
    assert not aliases & {"The", "But", "It", "Chapter", "When", "Then", "There", "Yes", "No", "Oh"}


def test_holmes_and_watson_meet_in_an_event(sherlock_map) -> None:
    (holmes,) = _entities_with_alias(sherlock_map, "Sherlock Holmes")
    (watson,) = _entities_with_alias(sherlock_map, "Watson")
    event = next(
        e for e in sherlock_map.events if set(e.participants) == {holmes.entity_id, watson.entity_id}
    )
    assert event.label == "Encounter: Sherlock Holmes + Watson"
    assert event.weight >= 10


def test_sherlock_lookup_of_irene_adler_routes_to_a_scandal_in_bohemia(sherlock, sherlock_map) -> None:
    matches = concept_lookup.concept_map_lookup(sherlock_map, "Who is Irene Adler?")
    assert matches.chapter_ids[0] == sherlock.chapter_id("A Scandal in Bohemia")


def test_sherlock_themes_split_the_stories(sherlock, sherlock_map) -> None:
    stories = len(sherlock.descriptor["chapters"])
    assert stories <= len(sherlock_map.themes) <= 4 * stories
    # most stories have a theme of their own: a theme whose chunks all lie in that story
    own = {t.chapter_ids[0] for t in sherlock_map.themes if len(t.chapter_ids) == 1}
    assert len(own) >= 0.75 * stories
    largest = max(t.size for t in sherlock_map.themes)
    assert largest <= 0.3 * sherlock.descriptor["n_chunks"]


def test_sherlock_rebuild_from_the_stored_book_is_byte_identical(sherlock) -> None:
    from folio.nodes.ingest.parsing import manifest, parsed_book

    book = manifest(parsed_book(sherlock.descriptor["source_file"]))
    assert book.book_id == sherlock.cmap.book_id
    chunks = sherlock.chunks()
    rebuilt = concept_map(book, chunks, sherlock.chunk_vectors(len(chunks)), THRESHOLD, CENTROID_WEIGHT)
    assert rebuilt.to_json() == sherlock.raw_map
    assert ConceptMap.from_json(sherlock.raw_map) == rebuilt


# --- Moby-Dick (the map the ingest pipeline wrote) --------------------------------------------------


@pytest.mark.slow
def test_moby_dick_has_its_main_characters(moby_map) -> None:
    names = {e.name for e in moby_map.entities}
    assert {"Ahab", "Starbuck", "Queequeg", "Ishmael", "Moby Dick"} <= names
    (ahab,) = _entities_with_alias(moby_map, "Ahab")
    assert "Captain Ahab" in ahab.aliases


@pytest.mark.slow
def test_moby_dick_sizes_are_within_the_targets(moby_map) -> None:
    assert 25 <= len(moby_map.themes) <= 100
    assert 50 <= len(moby_map.entities) <= 200
    assert 50 <= len(moby_map.events) <= 200


@pytest.mark.slow
def test_moby_dick_entities_are_linked_to_chapters_that_mention_them(moby, moby_map) -> None:
    text = moby.chapter_texts()
    for name in ("Ahab", "Starbuck", "Queequeg", "Moby Dick"):
        (entity,) = [e for e in moby_map.entities if e.name == name]
        assert all(name in text[c] for c in entity.chapter_ids), name


@pytest.mark.slow
def test_moby_dick_themes_have_labels_keywords_and_stable_ids(moby_map) -> None:
    assert len({t.theme_id for t in moby_map.themes}) == len(moby_map.themes)
    for theme in moby_map.themes:
        assert theme.theme_id.startswith("thm-")
        assert theme.label and theme.keywords and theme.size >= 2
        assert theme.label.split(" / ")[0] == theme.keywords[0]


@pytest.mark.slow
def test_lookup_of_white_whale_returns_chapters_that_mention_it(moby, moby_map) -> None:
    text = {c: t.lower() for c, t in moby.chapter_texts().items()}
    matches = concept_lookup.concept_map_lookup(moby_map, "white whale")  # the re-exported name
    assert matches.entities[0].label == "White Whale"
    assert len(matches.chapter_ids) == 10
    assert all("white whale" in text[c] for c in matches.chapter_ids[:5])
    assert sum("white whale" in text[c] for c in matches.chapter_ids) >= 8


@pytest.mark.slow
def test_lookup_takes_under_a_few_milliseconds(moby_map) -> None:
    concept_lookup.concept_map_lookup(moby_map, "warm-up builds the index")
    queries = ["white whale", "Ahab and Starbuck", "Queequeg harpoon", "the whiteness of the whale", "Pip"]
    start = time.perf_counter()
    for _ in range(200):
        for query in queries:
            concept_lookup.concept_map_lookup(moby_map, query)
    per_query_ms = (time.perf_counter() - start) * 1000 / (200 * len(queries))
    print(f"concept_map_lookup: {per_query_ms:.3f} ms per query (Moby-Dick map)")
    assert per_query_ms < 5.0


# --- both books: caps, evidence, ids ------------------------------------------------------------------


@pytest.fixture(scope="module", params=["sherlock", "moby"])
def stored_book(request) -> StoredBook:
    if request.param == "moby":
        request.applymarker(pytest.mark.slow)
    return request.getfixturevalue(request.param)


def test_caps_hold(stored_book) -> None:
    cmap = stored_book.cmap
    assert len(cmap.entities) <= 500 and len(cmap.themes) <= 200 and len(cmap.events) <= 500
    for item in (*cmap.entities, *cmap.themes, *cmap.events):
        assert 1 <= len(item.chapter_ids) <= 24
        assert len(set(item.chapter_ids)) == len(item.chapter_ids)
        assert 1 <= len(item.excerpts) <= 2


def test_excerpt_pointers_lie_inside_their_chunk(stored_book) -> None:
    by_id = {c.chunk_id: c for c in stored_book.chunks()}
    cmap = stored_book.cmap
    for item in (*cmap.entities, *cmap.themes, *cmap.events):
        for ev in item.excerpts:
            chunk = by_id[ev.chunk_id]
            assert chunk.chapter_id == ev.chapter_id
            assert chunk.start <= ev.start < ev.end <= chunk.end
            assert ev.end - ev.start <= 400


def test_entity_excerpts_show_the_entity(stored_book) -> None:
    text = stored_book.chapter_texts()
    for entity in stored_book.cmap.entities:
        ev = entity.excerpts[0]
        assert any(alias in text[ev.chapter_id][ev.start : ev.end] for alias in entity.aliases), entity.name


def test_event_excerpts_mostly_show_both_participants(stored_book) -> None:
    text = stored_book.chapter_texts()
    cmap = stored_book.cmap
    aliases = {e.entity_id: e.aliases for e in cmap.entities}
    shown = 0
    for event in cmap.events:
        ev = event.excerpts[0]
        excerpt = text[ev.chapter_id][ev.start : ev.end]
        shown += all(any(a in excerpt for a in aliases[p]) for p in event.participants)
    assert shown >= 0.75 * len(cmap.events)


def test_ids_are_unique_and_events_name_known_entities(stored_book) -> None:
    cmap = stored_book.cmap
    entity_ids = [e.entity_id for e in cmap.entities]
    assert len(set(entity_ids)) == len(entity_ids)
    assert all(e.entity_id == _stable_id("ent", fold(e.name)) for e in cmap.entities)
    assert len({v.event_id for v in cmap.events}) == len(cmap.events)
    assert all(set(v.participants) <= set(entity_ids) and len(v.participants) == 2 for v in cmap.events)


def test_stored_map_is_the_canonical_json_of_its_own_parse(stored_book) -> None:
    assert stored_book.cmap.to_json() == stored_book.raw_map
    assert stored_book.cmap.book_id == stored_book.descriptor["book_id"]
