"""Issue 32, point 18: with an LLM configured, the ingest DAG normalises the concept map by it (entity types
from a fixed set, aliases it says are one entity merged, theme labels) in one bounded call per book; a
failed call or an unusable reply leaves the deterministic map, with a note
(``nodes/core/concept_normalising.py``, ``concept_map__openai`` in ``nodes/ingest/concepts.py``).

The book is the abridged Alice (``/work/shared/data``), ingested through ``folio.dataflows.api.ingest``; the
LLM is a scripted OpenAI-compatible server (``tests/servers.py``).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from folio.dataflows.api import ingest
from folio.dataflows.config import load_config
from folio.dataflows.library import Library
from folio.dataflows.registry import execute
from folio.nodes.core.concept_normalising import (
    Normalisation,
    normalised_concept_map,
    parsed_normalisation,
)
from folio.nodes.core.types import ConceptMap, Entity, Event, FolioError, Theme
from tests.servers import Reply, ScriptedLLMServer

ALICE = "books/epub/carroll_alice-in-wonderland_abridged-pg19033.epub"


def _stored_map(library: Path) -> ConceptMap:
    lib = Library(library)
    (descriptor,) = lib.descriptors()
    raw = lib.index.concept_map(descriptor["book_id"])
    assert raw is not None
    return ConceptMap.from_json(raw)


def _llm(url: str) -> dict[str, object]:
    return {"llm": "openai", "concept_map_llm": "openai", "llm_base_url": url, "llm_max_retries": 0}


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> ConceptMap:
    """The abridged Alice's concept map without an LLM (the deterministic map)."""
    library = tmp_path_factory.mktemp("alice-plain")
    assert ingest([data_dir / ALICE], library=library, config={"llm": "none"}).ok
    return _stored_map(library)


def _short(cmap: ConceptMap) -> dict[str, str]:
    """The ids the LLM is shown, by entity name ("E1" is the most salient entity)."""
    return {e.name: f"E{i}" for i, e in enumerate(cmap.entities, 1)}


def test_with_an_llm_the_ingested_map_has_its_types_merges_and_labels(
    tmp_path: Path, data_dir: Path, plain: ConceptMap
) -> None:
    short = _short(plain)
    assert {"Alice", "Knave", "Hearts", "Dinah"} <= set(short)  # the deterministic map keeps them apart
    reply = {
        "entities": [
            {"id": short["Alice"], "type": "person", "same_as": None},
            {"id": short["Knave"], "type": "person", "same_as": None},
            {"id": short["Hearts"], "type": "person", "same_as": short["Knave"]},  # "the Knave of Hearts"
            {"id": short["Dinah"], "type": "cat"},  # a type outside the set: dropped
            {"id": "E999", "type": "person"},  # an id it was not shown: dropped
        ],
        "themes": [
            {"id": "T1", "label": "The White Rabbit and the Queen's court"},
            {"id": "T2", "label": ""},  # empty: the keyword label stays
        ],
    }
    with ScriptedLLMServer([reply]) as server:
        assert ingest([data_dir / ALICE], library=tmp_path / "lib", config=_llm(server.url)).ok
        prompt = server.requests[0]["messages"][-1]["content"]
    assert len(server.requests) == 1  # one bounded call for the book
    assert f"{short['Alice']}: Alice" in prompt and "Themes:" in prompt
    cmap = _stored_map(tmp_path / "lib")
    by_name = {e.name: e for e in cmap.entities}
    before = {e.name: e for e in plain.entities}
    assert by_name["Alice"].entity_type == "person" and by_name["Dinah"].entity_type == ""
    knave = by_name["Knave"]
    assert "Hearts" not in by_name and "Hearts" in knave.aliases
    assert knave.mentions == before["Knave"].mentions + before["Hearts"].mentions
    assert set(before["Hearts"].chapter_ids) <= set(knave.chapter_ids)
    assert len(cmap.entities) == len(plain.entities) - 1
    assert cmap.themes[0].label == "The White Rabbit and the Queen's court"
    assert cmap.themes[1].label == plain.themes[1].label
    ids = {e.entity_id for e in cmap.entities}
    assert all(set(ev.participants) <= ids and len(set(ev.participants)) == 2 for ev in cmap.events)
    assert not any("Hearts" in ev.label for ev in cmap.events)
    (note,) = cmap.notes
    assert "1 alias merge(s)" in note and "3 unusable reply row(s) dropped" in note


def _concept_map_with(config: dict[str, object], data_dir: Path, plain: ConceptMap) -> ConceptMap:
    """``concept_map`` of the ingest DAG for ``config``, its deterministic map given (no re-ingest)."""
    out = execute(
        "ingest",
        {**load_config(), **config},
        ["concept_map"],
        inputs={"source_path": str(data_dir / ALICE)},
        overrides={"deterministic_concept_map": plain},
    )
    return out["concept_map"]


@pytest.mark.parametrize(
    ("script", "why"),
    [
        ([Reply.fail(500)], "HTTP 500"),
        (["I would rather not.", "Still no JSON."], "invalid JSON answer"),
        ([{"entities": [{"id": "X7", "type": "person"}], "themes": []}], "named no listed entity"),
    ],
)
def test_a_failed_call_or_unusable_reply_keeps_the_deterministic_map_with_a_note(
    script: list[object], why: str, data_dir: Path, plain: ConceptMap
) -> None:
    with ScriptedLLMServer(script) as server:
        cmap = _concept_map_with(_llm(server.url), data_dir, plain)
    (note,) = cmap.notes
    assert why in note and "the deterministic map is kept" in note
    assert dataclasses.replace(cmap, notes=()) == plain


def test_without_an_llm_the_map_is_the_deterministic_one(data_dir: Path, plain: ConceptMap) -> None:
    assert _concept_map_with({"llm": "none"}, data_dir, plain) is plain
    assert not plain.notes and all(e.entity_type == "" for e in plain.entities)


def test_an_llm_for_answers_alone_leaves_the_ingest_without_llm_calls(
    data_dir: Path, plain: ConceptMap
) -> None:
    # the LLM pass is its own switch: llm: openai for answers builds the deterministic map, no client used
    config = {"llm": "openai", "llm_base_url": "http://127.0.0.1:9", "llm_max_retries": 0}
    assert _concept_map_with(config, data_dir, plain) is plain


def test_the_llm_pass_without_an_llm_is_a_one_line_error() -> None:
    with pytest.raises(FolioError, match="concept_map_llm: openai needs an LLM"):
        load_config(overrides={"concept_map_llm": "openai"}, environ={})


def _entity(name: str, mentions: int, chapters: tuple[str, ...]) -> Entity:
    return Entity(f"ent-{name}", name, (name,), mentions, chapters, (), ())


def test_merges_join_chains_into_the_most_mentioned_entity_and_repoint_events() -> None:
    cat, cheshire, alice = (
        _entity("Cat", 4, ("c2",)),
        _entity("Cheshire Cat", 9, ("c1",)),
        _entity("Alice", 50, ()),
    )
    events = (
        Event("evt-1", "Encounter: Alice + Cat", ("ent-Alice", "ent-Cat"), 2, ("c2",), (), ()),
        Event(
            "evt-2", "Encounter: Alice + Cheshire Cat", ("ent-Alice", "ent-Cheshire Cat"), 3, ("c1",), (), ()
        ),
        Event("evt-3", "Encounter: Cheshire Cat + Cat", ("ent-Cheshire Cat", "ent-Cat"), 5, ("c1",), (), ()),
    )
    theme = Theme("thm-1", "cat / grin / tree", ("cat", "grin"), 3, 0.5, ("c1",), ())
    cmap = ConceptMap("b", (alice, cheshire, cat), (theme,), events)
    answer = {
        "entities": [{"id": "E3", "type": "object", "same_as": "E2"}, {"id": "E2", "type": "other"}],
        "themes": [{"id": "T1", "label": "The grinning cat"}],
    }
    out = normalised_concept_map(cmap, parsed_normalisation(answer, cmap))
    assert [e.name for e in out.entities] == ["Alice", "Cheshire Cat"]
    merged = out.entities[1]
    assert merged.aliases == ("Cheshire Cat", "Cat") and merged.mentions == 13
    assert merged.chapter_ids == ("c1", "c2") and merged.entity_type == "other"
    (event,) = out.events  # the pair that became one entity is gone, the two Alice pairs are one
    assert event.participants == ("ent-Alice", "ent-Cheshire Cat") and event.weight == 5
    assert event.label == "Encounter: Alice + Cheshire Cat"
    assert out.themes[0].label == "The grinning cat"
    cycle = Normalisation({}, {"ent-Cat": "ent-Cheshire Cat", "ent-Cheshire Cat": "ent-Cat"}, {}, 0)
    assert [e.name for e in normalised_concept_map(cmap, cycle).entities] == ["Alice", "Cheshire Cat"]
