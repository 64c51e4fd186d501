"""KiwixHttpBackend against a real kiwix-serve on the five ZIMs, agreement with libzim, and server
failures."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest

from folio.nodes.backends import KiwixBackend
from folio.nodes.backends.html_text import EXCERPT_CHARS
from folio.nodes.backends.kiwix_http import (
    KiwixHttpBackend,
    link_path,
    parse_catalog,
    parse_search_results,
    parse_suggestions,
)
from folio.nodes.backends.zim import ZimBackend
from folio.nodes.core.types import FolioError
from tests.conftest import DATA_DIR
from tests.servers import KiwixServe, SlowHTTPServer, dead_url, start_kiwix_serve

ZIM_DIR = DATA_DIR / "zim"
WP100 = "wikipedia_en_100_mini_2022-10"
RC_MINI = "wikipedia_en_ray_charles_mini_2020-03"
RC_NOVID = "wikipedia_en_ray_charles_novid_2018-10"
TONEDEAR = "tonedear.com_en_2024-09"
WIKIBOOKS = "wikibooks_en_example_2021-04"
ALL_BOOKS = (TONEDEAR, WIKIBOOKS, WP100, RC_MINI, RC_NOVID)

# (book, query): searches whose top result must be the same on both backends.
AGREEMENT_QUERIES = [
    (WP100, "solar eclipse moon"),
    (WP100, "king arthur"),
    (WP100, "noble gas"),
    (WP100, "declaration of independence"),
    (WP100, "civil rights"),
    (RC_MINI, "Georgia on My Mind"),
    (RC_MINI, "Genius"),
    (RC_MINI, "hit the road jack"),
    (RC_NOVID, "Georgia"),
    (RC_NOVID, "Quincy Jones"),
    (RC_NOVID, "Ray film Jamie Foxx"),
    (TONEDEAR, "perfect pitch"),
    (TONEDEAR, "chord"),
    (TONEDEAR, "melodic dictation"),
    (WIKIBOOKS, "FreedomBox offline"),
    (WIKIBOOKS, "wikipedia"),
]
SUGGEST_TERMS = [
    (WP100, "King"),
    (WP100, "solar"),
    (RC_MINI, "Georg"),
    (RC_NOVID, "Ray"),
    (TONEDEAR, "perfe"),
]


@pytest.fixture(scope="module")
def server() -> Iterator[KiwixServe]:
    if not ZIM_DIR.is_dir():
        pytest.fail(f"real ZIM archives not found at {ZIM_DIR}")
    kiwix = start_kiwix_serve([ZIM_DIR / f"{b}.zim" for b in ALL_BOOKS])
    yield kiwix
    kiwix.stop()


@pytest.fixture(scope="module")
def http(server: KiwixServe) -> Iterator[KiwixHttpBackend]:
    backend = KiwixHttpBackend(server.url, timeout=10.0)
    yield backend
    backend.close()


@pytest.fixture(scope="module")
def zims() -> Iterator[ZimBackend]:
    backend = ZimBackend([ZIM_DIR / f"{b}.zim" for b in ALL_BOOKS])
    yield backend
    backend.close()


def test_backend_satisfies_the_kiwix_backend_protocol(http: KiwixHttpBackend) -> None:
    assert isinstance(http, KiwixBackend)


def test_books_match_the_libzim_metadata_except_location(
    http: KiwixHttpBackend, zims: ZimBackend, server: KiwixServe
) -> None:
    served = {b.name: b for b in http.books()}
    assert sorted(served) == sorted(ALL_BOOKS)
    for local in zims.books():
        remote = served[local.name]
        assert (
            remote.title,
            remote.language,
            remote.description,
            remote.article_count,
            remote.is_wikipedia,
        ) == (
            local.title,
            local.language,
            local.description,
            local.article_count,
            local.is_wikipedia,
        )
        assert remote.location.startswith(server.url)
        assert httpx.get(remote.location, follow_redirects=True).status_code == 200


@pytest.mark.parametrize(("book", "query"), AGREEMENT_QUERIES)
def test_top_search_result_is_identical_on_both_backends(
    http: KiwixHttpBackend, zims: ZimBackend, book: str, query: str
) -> None:
    remote = http.search(book, query, limit=5)
    local = zims.search(book, query, limit=5)
    assert remote and local
    top_remote, top_local = remote[0], local[0]
    assert (top_remote.path, top_remote.title, top_remote.excerpt) == (
        top_local.path,
        top_local.title,
        top_local.excerpt,
    )
    # every article both backends return is described identically
    by_path = {c.path: c for c in local}
    for c in remote:
        if c.path in by_path:
            assert (c.title, c.excerpt) == (by_path[c.path].title, by_path[c.path].excerpt)


@pytest.mark.parametrize(("book", "term"), SUGGEST_TERMS)
def test_suggestions_are_identical_on_both_backends(
    http: KiwixHttpBackend, zims: ZimBackend, book: str, term: str
) -> None:
    remote = http.suggest(book, term, limit=10)
    local = zims.suggest(book, term, limit=10)
    assert remote
    assert [(c.path, c.title, c.excerpt) for c in remote] == [(c.path, c.title, c.excerpt) for c in local]
    assert all(c.origin == "suggest" for c in remote)


def test_search_candidates_are_clean_and_point_at_served_pages(http: KiwixHttpBackend) -> None:
    found = http.search(RC_NOVID, "Ray film Jamie Foxx", limit=10)
    assert "A/Ray_(film).html" in [c.path for c in found]
    assert len({c.path for c in found}) == len(found)
    for c in found:
        assert "<" not in c.title and "&" not in c.excerpt.replace(" & ", "")
        assert 0 < len(c.excerpt) <= EXCERPT_CHARS
        assert c.url.startswith(http.base_url)
    assert httpx.get(found[0].url).status_code == 200


def test_search_in_the_zero_article_count_archive_with_spaces_in_paths(http: KiwixHttpBackend) -> None:
    found = http.search(WIKIBOOKS, "FreedomBox offline")
    assert (
        found[0].path
        == "FreedomBox for Communities_Offline Wikipedia - Wikibooks, open books for an open world.html"
    )
    assert httpx.get(found[0].url).status_code == 200


def test_suggest_unescapes_html_escaped_paths(http: KiwixHttpBackend) -> None:
    found = http.suggest(RC_NOVID, "I'll")
    assert "A/I'll_Be_Good_to_You.html" in [c.path for c in found]
    assert "I'll Be Good to You" in [c.title for c in found]


def test_suggest_resolves_redirects_to_one_target(http: KiwixHttpBackend) -> None:
    assert [c.path for c in http.suggest(WP100, "solar")] == ["A/Solar_eclipse"]


def test_article_follows_a_redirect_like_libzim(http: KiwixHttpBackend, zims: ZimBackend) -> None:
    remote = http.article(WP100, "A/Solar_Eclipse")
    local = zims.article(WP100, "A/Solar_Eclipse")
    assert (remote.path, remote.title, remote.text) == (local.path, local.title, local.text)
    assert remote.url.endswith("/A/Solar_eclipse")


def test_article_of_a_missing_path_is_a_folio_error(http: KiwixHttpBackend) -> None:
    with pytest.raises(FolioError, match="no such article") as info:
        http.article(WP100, "A/No_such_article_here")
    assert info.value.source.startswith(http.base_url)


def test_unknown_book_is_a_folio_error_naming_it(http: KiwixHttpBackend) -> None:
    with pytest.raises(FolioError, match="no such book") as info:
        http.suggest("no_such_book", "x")
    assert info.value.source == "no_such_book"


def test_a_server_that_is_down_is_a_folio_error_per_call() -> None:
    url = dead_url()
    backend = KiwixHttpBackend(url, timeout=2.0)
    for call in (backend.books, lambda: backend.search(WP100, "moon")):
        with pytest.raises(FolioError, match="cannot connect") as info:
            call()
        assert info.value.source.startswith(url)


def test_a_slow_server_times_out_with_a_folio_error() -> None:
    with SlowHTTPServer(delay=2.0) as slow:
        backend = KiwixHttpBackend(slow.url, timeout=0.3)
        started = time.monotonic()
        with pytest.raises(FolioError, match="timeout") as info:
            backend.books()
        assert time.monotonic() - started < 1.5
        assert info.value.source.startswith(slow.url)
        assert slow.hits == 1


# --- pure helpers (golden cases from kiwix-serve 3.3.0 answers) -------------------------------------

CATALOG_3_3_0 = b"""<?xml version="1.0" encoding="UTF-8"?>
<feed xmlns="http://www.w3.org/2005/Atom" xmlns:dc="http://purl.org/dc/terms/">
  <link rel="self" href="/catalog/v2/entries?count=100&start=0" type="application/atom+xml"/>
  <entry>
    <title>Wikibooks</title><summary>testZim</summary><language>en</language><name></name>
    <articleCount>0</articleCount>
    <link type="text/html" href="/wikibooks_en_example_2021-04" />
    <author><name>test</name></author>
  </entry>
  <entry>
    <title>Ray Charles</title><summary>Wikipedia articles about Ray Charles</summary><language>eng</language>
    <name>wikipedia_en_ray_charles</name><articleCount>129</articleCount>
    <link type="text/html" href="/kiwix/content/wikipedia_en_ray_charles_mini_2020-03" />
    <author><name>Wikipedia</name></author>
  </entry>
</feed>"""


def test_parse_catalog_reads_names_from_html_links_despite_a_raw_ampersand() -> None:
    entries = parse_catalog(CATALOG_3_3_0, "http://127.0.0.1:9/kiwix")
    assert [e.book.name for e in entries] == [WIKIBOOKS, RC_MINI]
    assert [e.root for e in entries] == ["/wikibooks_en_example_2021-04", f"/kiwix/content/{RC_MINI}"]
    assert [e.book.is_wikipedia for e in entries] == [False, True]
    assert entries[1].book.location == f"http://127.0.0.1:9/kiwix/content/{RC_MINI}"
    assert entries[1].book.article_count == 129


@pytest.mark.parametrize(
    ("link", "root", "base_path", "path"),
    [
        (f"/{WP100}/A/Solar_eclipse", f"/{WP100}", "", "A/Solar_eclipse"),
        (f"/content/{WP100}/A/Solar_eclipse", f"/content/{WP100}", "", "A/Solar_eclipse"),
        (f"/raw/{WP100}/content/A/Solar_eclipse", f"/{WP100}", "", "A/Solar_eclipse"),
        (f"/kiwix/{WP100}/A/Solar_eclipse", f"/kiwix/{WP100}", "/kiwix", "A/Solar_eclipse"),
        (f"http://h:1/{WIKIBOOKS}/Free%20Box,%20x.html", f"/{WIKIBOOKS}", "", "Free Box, x.html"),
        (f"/{RC_MINI}/A/Genius_+_Soul_=_Jazz", f"/{RC_MINI}", "", "A/Genius_+_Soul_=_Jazz"),
        (f"/{TONEDEAR}/tonedear.com/", f"/{TONEDEAR}", "", "tonedear.com/"),
    ],
)
def test_link_path_maps_every_kiwix_url_form_to_the_entry_path(
    link: str, root: str, base_path: str, path: str
) -> None:
    book = root.rsplit("/", 1)[-1]
    assert link_path(link, book, root, base_path) == path


def test_link_path_outside_the_book_is_a_folio_error() -> None:
    with pytest.raises(FolioError):
        link_path("/other_book/A/x", WP100, f"/{WP100}")


def test_parse_suggestions_drops_the_pattern_entry_and_unescapes() -> None:
    answer = """[
      {"value" : "Genius &amp; Friends", "label" : "&lt;b&gt;Genius&lt;/b&gt;", "kind" : "path", \
"path" : "A/Genius_&amp;_Friends"},
      {"value" : "Genius ", "label" : "containing &apos;Genius&apos;...", "kind" : "pattern"}
    ]"""
    assert parse_suggestions(answer) == [("Genius & Friends", "A/Genius_&_Friends")]


def test_parse_suggestions_reads_invalid_json_with_a_pattern() -> None:
    answer = '[{"value" : "Back\\slash", "label" : "x", "kind" : "path" , "path" : "A/Back\\slash"}]'
    assert parse_suggestions(answer) == [("Back\\slash", "A/Back\\slash")]


def test_a_server_that_is_not_kiwix_serve_is_a_folio_error() -> None:
    with (
        SlowHTTPServer(delay=0.0, body="<html><body>hello</body></html>") as other,
        pytest.raises(FolioError, match="not an OPDS feed"),
    ):
        KiwixHttpBackend(other.url, timeout=2.0).books()


def test_parse_search_results_refuses_an_html_error_page() -> None:
    with pytest.raises(FolioError, match="not an RSS feed"):
        parse_search_results(b"<html><body><h1>Not Found</h1></body></html>", "http://x/search")


def test_a_trickling_server_times_out_within_the_overall_deadline() -> None:
    from tests.servers import TricklingHTTPServer

    with TricklingHTTPServer(interval=0.1, gives_up_after=20.0) as server:
        backend = KiwixHttpBackend(server.url, timeout=1.0)
        started = time.monotonic()
        with pytest.raises(FolioError, match=r"did not answer within 1\.0 s") as info:
            backend.books()
        assert time.monotonic() - started < 1.0 + 1.0
        assert "\n" not in str(info.value) and info.value.source.startswith(server.url)
