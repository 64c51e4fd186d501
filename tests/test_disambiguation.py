"""Disambiguation: the four LLM conditions, whole-word checks, the cache rules and the index path."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import diskcache
import pytest

from folio.dataflows.config import load_config
from folio.dataflows.kiwix_query import kiwix_answer
from folio.nodes.backends.llm import OpenAIChatClient
from folio.nodes.backends.zim import ZimBackend
from folio.nodes.core.kiwix_types import KiwixBook, KiwixCatalog
from folio.nodes.kiwix.disambiguation import (
    CACHE_KEY_PREFIX,
    _contains_whole_word,
    _index_candidates,
    _llm_applies,
    _valid_phrases,
    disambiguation_candidates__none,
    disambiguation_candidates__openai,
)
from tests.conftest import ZIMS
from tests.servers import Reply, ScriptedLLMServer

WIKI = "wikipedia_en_100_mini_2022-10"
TONE = "tonedear.com_en_2024-09"


@pytest.fixture(scope="module")
def backend() -> Iterator[ZimBackend]:
    with ZimBackend([ZIMS / f"{WIKI}.zim", ZIMS / f"{TONE}.zim"]) as zim:
        yield zim


@pytest.fixture
def store(tmp_path: Path) -> Iterator[diskcache.Cache]:
    with diskcache.Cache(str(tmp_path / "cache")) as cache:
        yield cache


def book(name: str, wikipedia: bool) -> KiwixBook:
    return KiwixBook(name, name, "eng", "", 1, wikipedia, name)


BOOKS = (book(WIKI, True), book(TONE, False))


def disambiguate(
    backend: ZimBackend,
    server: ScriptedLLMServer,
    store: diskcache.Cache,
    query: str,
    terms: str,
    selected: tuple[str, ...] = (WIKI,),
    ttl: float = 3600,
    timeout: float = 2.0,
) -> tuple[Any, ...]:
    llm = OpenAIChatClient(server.url, "scripted-model", "NO_SUCH_KEY_ENV", timeout, 0)
    try:
        return disambiguation_candidates__openai(
            backend, llm, store, KiwixCatalog(BOOKS), selected, terms, query, True, ttl
        )
    finally:
        llm.close()


def disambiguation_requests(server: ScriptedLLMServer) -> list[dict[str, Any]]:
    return [r for r in server.requests if "ambiguous word" in r["messages"][0]["content"]]


# --- pure helpers ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "word", "expected"),
    [
        ("C (programming language)", "C", True),
        ("Objective-C", "C", True),
        ("Cat", "C", False),
        ("ABC notation", "C", False),
        ("Mercury (planet)", "mercury", True),
        ("Mercurial", "mercury", False),
        ("Group (mathematics)", "GROUP", True),
        ("Groupie", "group", False),
        ("anything", "", False),
    ],
)
def test_whole_word_check(text: str, word: str, expected: bool) -> None:
    assert _contains_whole_word(text, word) is expected


def test_llm_applies_only_when_every_query_condition_holds() -> None:
    wiki, other = BOOKS
    assert _llm_applies("What is a group?", wiki, "group")
    assert not _llm_applies("Why is a group useful?", wiki, "group useful")  # not definitional
    assert not _llm_applies("Group?", wiki, "group")  # not definitional
    assert not _llm_applies("What is a group?", other, "group")  # not a Wikipedia
    assert not _llm_applies("What is a group?", None, "group")
    assert not _llm_applies(
        "What is raspberry pi gpio permission errors in python",
        wiki,
        "raspberry pi gpio permission errors python",
    )


def test_valid_phrases_keep_only_whole_word_candidates() -> None:
    answer = {"candidates": ["Group (mathematics)", "Grouping", "Group theory", "Group (mathematics)"]}
    assert _valid_phrases(answer, "group") == ("Group (mathematics)", "Group theory")
    with pytest.raises(ValueError):
        _valid_phrases({"answer": []}, "group")


# --- the LLM path with a scripted server ---------------------------------------------------------------


def test_llm_phrases_are_searched_and_pooled_by_url(backend: ZimBackend, store: diskcache.Cache) -> None:
    with ScriptedLLMServer([{"candidates": ["Group (mathematics)", "Grouping", "group theory"]}]) as server:
        found = disambiguate(backend, server, store, "What is a group?", "group")
        assert len(disambiguation_requests(server)) == 1
    paths = [c.path for c in found]
    assert "A/Group_(mathematics)" in paths
    assert len({c.url for c in found}) == len(found)
    assert {c.origin for c in found} == {"disambiguation"}
    assert store.get(f"{CACHE_KEY_PREFIX}group") == ["Group (mathematics)", "group theory"]


@pytest.mark.parametrize(
    ("query", "terms", "selected"),
    [
        ("Why do groups matter?", "groups matter", (WIKI,)),  # not definitional, not one word
        ("Group?", "group", (WIKI,)),  # not definitional
        ("What is a scale?", "scale", (TONE,)),  # the selected book is not a Wikipedia
        ("What is a group theory?", "group theory", (WIKI,)),  # two words
    ],
)
def test_no_llm_call_unless_all_four_conditions_hold(
    backend: ZimBackend, store: diskcache.Cache, query: str, terms: str, selected: tuple[str, ...]
) -> None:
    with ScriptedLLMServer([{"candidates": ["x"]}]) as server:
        disambiguate(backend, server, store, query, terms, selected)
        assert server.requests == []


def test_no_llm_configured_means_no_llm_call(tmp_path: Path) -> None:
    with ScriptedLLMServer([{"candidates": ["Group (mathematics)"]}]) as server:
        cfg = load_config(overrides={"llm": "none", "llm_base_url": server.url})
        kiwix_answer(
            "What is a group?", zim_paths=[ZIMS / f"{WIKI}.zim"], config=cfg, cache_dir=str(tmp_path)
        )
        assert server.requests == []


@pytest.mark.parametrize(
    "failure",
    [Reply.fail(500), Reply.malformed(), Reply.slow(2.0, {"candidates": ["Group (mathematics)"]})],
    ids=["http-error", "malformed-json", "timeout"],
)
def test_failed_call_is_not_cached_and_the_original_word_is_the_only_candidate(
    backend: ZimBackend, store: diskcache.Cache, failure: Reply
) -> None:
    with ScriptedLLMServer([failure, {"candidates": ["Group (mathematics)"]}]) as server:
        first = disambiguate(backend, server, store, "What is a group?", "group", timeout=0.5)
        assert f"{CACHE_KEY_PREFIX}group" not in store
        # the word itself searched in the primary book, not the index's title suggestions
        assert [c.path for c in first] == [c.path for c in backend.search(WIKI, "group", 10)]
        suggested = [c.path for c in _index_candidates(backend, (WIKI,), "group")]
        assert [c.path for c in first] != suggested
        disambiguate(backend, server, store, "What is a group?", "group", timeout=0.5)
        assert len(disambiguation_requests(server)) == 2
        assert store.get(f"{CACHE_KEY_PREFIX}group") == ["Group (mathematics)"]


def test_all_invalid_real_answer_is_cached_as_empty(backend: ZimBackend, store: diskcache.Cache) -> None:
    with ScriptedLLMServer([{"candidates": ["Grouping", "Groupie"]}]) as server:
        assert disambiguate(backend, server, store, "What is a group?", "group") == ()
        assert disambiguate(backend, server, store, "What is a group?", "group") == ()
        assert len(server.requests) == 1
    assert store.get(f"{CACHE_KEY_PREFIX}group") == []


def test_cache_entry_expires_after_the_ttl(backend: ZimBackend, store: diskcache.Cache) -> None:
    answer = {"candidates": ["Group (mathematics)", "group theory"]}
    with ScriptedLLMServer([answer, answer]) as server:
        disambiguate(backend, server, store, "What is a group?", "group", ttl=0.5)
        disambiguate(backend, server, store, "What is a group?", "group", ttl=0.5)
        assert len(server.requests) == 1
        time.sleep(0.7)
        disambiguate(backend, server, store, "What is a group?", "group", ttl=0.5)
        assert len(server.requests) == 2


# --- the index path (no LLM) ---------------------------------------------------------------------------


def test_index_candidates_contain_the_word_as_a_whole_word(backend: ZimBackend) -> None:
    found = disambiguation_candidates__none(backend, (WIKI,), "kit", True)
    titles = [c.title for c in found]
    assert "Kit (association football)" in titles
    assert all(_contains_whole_word(t, "kit") for t in titles)


def test_index_disambiguation_is_off_when_disabled_or_for_several_words(backend: ZimBackend) -> None:
    assert disambiguation_candidates__none(backend, (WIKI,), "kit", False) == ()
    assert disambiguation_candidates__none(backend, (WIKI,), "football kit", True) == ()


def test_one_word_question_ranks_the_disambiguated_article_first(tmp_path: Path) -> None:
    result = kiwix_answer("What is a kit?", zim_paths=[ZIMS / f"{WIKI}.zim"], cache_dir=str(tmp_path))
    assert result.candidates[0].candidate.path == "A/Kit_(association_football)"


def test_llm_disambiguation_through_the_driver(tmp_path: Path) -> None:
    script = [{"books": [WIKI]}, {"candidates": ["Group (mathematics)", "Group theory"]}]
    with ScriptedLLMServer(script) as server:
        cfg = load_config(
            overrides={
                "llm": "openai",
                "llm_base_url": server.url,
                "llm_max_retries": 0,
                "kiwix_max_books": 1,
            }
        )
        result = kiwix_answer(
            "What is a group?",
            zim_paths=[ZIMS / f"{WIKI}.zim", ZIMS / f"{TONE}.zim"],
            config=cfg,
            cache_dir=str(tmp_path),
        )
        assert len(disambiguation_requests(server)) == 1
    assert result.selected_books == (WIKI,)
    assert result.candidates[0].candidate.path == "A/Group_(mathematics)"


def test_without_a_library_cache_folder_the_phrases_are_kept_in_memory_not_under_home(
    tmp_path, monkeypatch
) -> None:
    from folio.nodes.kiwix.disambiguation import disambiguation_cache__openai

    monkeypatch.setenv("HOME", str(tmp_path))
    store = disambiguation_cache__openai(None)
    store.set("k", ["a"], expire=60)
    assert store.get("k") == ["a"] and store.get("other", default=5) == 5
    store.set("gone", ["b"], expire=1e-9)
    time.sleep(0.01)
    assert store.get("gone") is None
    assert list(tmp_path.iterdir()) == []
    on_disk = disambiguation_cache__openai(str(tmp_path / "lib" / "cache"))
    assert isinstance(on_disk, diskcache.Cache) and (tmp_path / "lib" / "cache" / "disambiguation").is_dir()
    on_disk.close()
