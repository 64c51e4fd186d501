"""ZimBackend (python-libzim) on the five real ZIM archives, plus broken and missing files."""

from __future__ import annotations

import shutil
import types
from collections.abc import Iterator
from pathlib import Path

import pytest
from libzim.reader import Archive
from libzim.suggestion import SuggestionSearcher

from folio.nodes.backends import KiwixBackend
from folio.nodes.backends.html_text import EXCERPT_CHARS
from folio.nodes.backends.zim import ZimBackend, book_name, title_prefix_paths
from folio.nodes.core.kiwix_types import Candidate
from folio.nodes.core.types import FolioError
from tests.conftest import DATA_DIR

ZIM_DIR = DATA_DIR / "zim"
WP100 = "wikipedia_en_100_mini_2022-10"
RC_MINI = "wikipedia_en_ray_charles_mini_2020-03"
RC_NOVID = "wikipedia_en_ray_charles_novid_2018-10"
TONEDEAR = "tonedear.com_en_2024-09"
WIKIBOOKS = "wikibooks_en_example_2021-04"
ALL_BOOKS = (TONEDEAR, WIKIBOOKS, WP100, RC_MINI, RC_NOVID)


def zim_path(book: str) -> Path:
    return ZIM_DIR / f"{book}.zim"


@pytest.fixture(scope="module")
def backend() -> Iterator[ZimBackend]:
    if not ZIM_DIR.is_dir():
        pytest.fail(f"real ZIM archives not found at {ZIM_DIR}")
    zims = ZimBackend([zim_path(b) for b in ALL_BOOKS])
    yield zims
    zims.close()


def assert_clean(candidates: tuple[Candidate, ...], book: str, origin: str) -> None:
    """Invariants of every candidate list: clean text, zim:// URLs, no duplicates."""
    assert len({c.path for c in candidates}) == len(candidates)
    for c in candidates:
        assert c.book == book
        assert c.origin == origin
        assert c.url == f"zim://{book}/{c.path}"
        for text in (c.title, c.excerpt):
            assert "<" not in text and ">" not in text, text
            assert "&amp;" not in text and "&lt;" not in text and "&apos;" not in text, text
            assert "  " not in text and "\n" not in text, text
        assert c.title
        assert 0 < len(c.excerpt) <= EXCERPT_CHARS


def test_backend_satisfies_the_kiwix_backend_protocol(backend: ZimBackend) -> None:
    assert isinstance(backend, KiwixBackend)


def test_books_lists_every_archive_with_its_metadata(backend: ZimBackend) -> None:
    books = {b.name: b for b in backend.books()}
    assert tuple(books) == ALL_BOOKS
    assert backend.errors == {}
    assert {name for name, b in books.items() if b.is_wikipedia} == {WP100, RC_MINI, RC_NOVID}
    assert books[WP100].title == "Wikipedia 100"
    assert books[WP100].article_count == 101
    assert books[WIKIBOOKS].article_count == 0
    assert books[TONEDEAR].description == "Ear Training for Musicians"
    assert books[RC_MINI].language == "eng"
    assert books[WIKIBOOKS].language == "en"
    assert books[RC_NOVID].location == str(zim_path(RC_NOVID))


def test_book_name_is_the_file_name_without_zim() -> None:
    assert book_name("/a/b/tonedear.com_en_2024-09.zim") == "tonedear.com_en_2024-09"
    assert book_name("plain") == "plain"


def test_search_solar_eclipse_moon_finds_the_solar_eclipse_article(backend: ZimBackend) -> None:
    found = backend.search(WP100, "solar eclipse moon")
    assert found[0].path == "A/Solar_eclipse"
    assert found[0].title == "Solar eclipse"
    assert found[0].excerpt.startswith(
        "A solar eclipse occurs when the Moon passes between Earth and the Sun"
    )
    assert_clean(found, WP100, "search")


def test_search_georgia_on_my_mind_in_the_ray_charles_mini_archive(backend: ZimBackend) -> None:
    found = backend.search(RC_MINI, "Georgia on My Mind")
    assert found[0].path == "A/Georgia_on_My_Mind"
    assert "Hoagy Carmichael" in found[0].excerpt
    assert len(found) >= 3
    assert_clean(found, RC_MINI, "search")


def test_search_perfect_pitch_in_the_new_namespace_tonedear_archive(backend: ZimBackend) -> None:
    found = backend.search(TONEDEAR, "perfect pitch")
    assert found[0].path == "tonedear.com/ear-training/absolute-perfect-pitch-test"
    assert found[0].title == "Perfect Pitch Ear Training Test"
    assert all(c.path.startswith("tonedear.com/") for c in found)
    assert_clean(found, TONEDEAR, "search")


def test_search_works_in_an_archive_with_zero_article_count(backend: ZimBackend) -> None:
    found = backend.search(WIKIBOOKS, "FreedomBox offline")
    assert [c.path for c in found] == [
        "FreedomBox for Communities_Offline Wikipedia - Wikibooks, open books for an open world.html"
    ]
    assert found[0].excerpt.startswith("Offline availability of Wikipedia pages")
    assert_clean(found, WIKIBOOKS, "search")


def test_titles_written_with_html_are_cleaned(backend: ZimBackend) -> None:
    raw = Archive(zim_path(RC_NOVID)).get_entry_by_path("A/Ray_(film).html").title
    assert raw == "<i>Ray</i> (film)"  # the archive's quirk this test is about
    found = backend.search(RC_NOVID, "Ray film Jamie Foxx")
    titles = {c.path: c.title for c in found}
    assert titles["A/Ray_(film).html"] == "Ray (film)"
    assert_clean(found, RC_NOVID, "search")


def test_search_respects_the_limit_and_ignores_blank_queries(backend: ZimBackend) -> None:
    assert len(backend.search(RC_NOVID, "Georgia", limit=3)) == 3
    assert len(backend.search(RC_NOVID, "Georgia", limit=30)) == 30
    assert backend.search(RC_NOVID, "   ") == ()
    assert backend.search(RC_NOVID, "Georgia", limit=0) == ()


def test_suggest_resolves_redirects_and_removes_duplicates(backend: ZimBackend) -> None:
    archive = Archive(zim_path(WP100))
    raw = list(SuggestionSearcher(archive).suggest("solar").getResults(0, 40))
    assert sum(archive.get_entry_by_path(p).is_redirect for p in raw) >= 2  # redirects to collapse
    found = backend.suggest(WP100, "solar")
    assert [c.path for c in found].count("A/Solar_eclipse") == 1
    assert not any(archive.get_entry_by_path(c.path).is_redirect for c in found)
    assert_clean(found, WP100, "suggest")


def test_suggest_king_includes_king_arthur(backend: ZimBackend) -> None:
    assert "A/King_Arthur" in [c.path for c in backend.suggest(WP100, "King")]


def test_suggest_works_without_a_title_index(backend: ZimBackend) -> None:
    assert not Archive(zim_path(RC_NOVID)).has_title_index
    found = backend.suggest(RC_NOVID, "Georg")
    assert found[0].path == "A/Georgia_on_My_Mind.html"
    assert_clean(found, RC_NOVID, "suggest")


def test_title_prefix_scan_finds_titles_in_an_archive_without_title_index() -> None:
    archive = Archive(zim_path(RC_NOVID))
    paths = title_prefix_paths(archive, "georg", 10)
    assert "A/Georgia_on_My_Mind.html" in paths
    assert all(archive.get_entry_by_path(p).title.lower().startswith("georg") for p in paths)
    assert title_prefix_paths(archive, "zzzz-no-such-title", 10) == []


def test_suggest_falls_back_to_the_title_scan_when_libzim_suggests_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    zims = ZimBackend([zim_path(RC_NOVID)])

    class NoSuggestions:
        def __init__(self, archive: Archive) -> None:
            pass

        def suggest(self, term: str) -> types.SimpleNamespace:
            return types.SimpleNamespace(getResults=lambda start, count: [])

    fake = types.SimpleNamespace(
        reader=zims._libzim.reader,
        search=zims._libzim.search,
        suggestion=types.SimpleNamespace(SuggestionSearcher=NoSuggestions),
    )
    monkeypatch.setattr(zims, "_libzim", fake)
    found = zims.suggest(RC_NOVID, "Georg")
    assert [c.path for c in found] == ["A/Georgia_on_My_Mind.html"]


def test_article_follows_a_redirect_to_its_target(backend: ZimBackend) -> None:
    assert Archive(zim_path(WP100)).get_entry_by_path("A/Solar_Eclipse").is_redirect
    article = backend.article(WP100, "A/Solar_Eclipse")
    assert article.path == "A/Solar_eclipse"
    assert article.title == "Solar eclipse"
    assert article.url == f"zim://{WP100}/A/Solar_eclipse"
    assert "Moon" in article.text
    assert "<" not in article.text


def test_article_of_a_missing_path_is_a_folio_error(backend: ZimBackend) -> None:
    with pytest.raises(FolioError, match="no such article") as info:
        backend.article(WP100, "A/No_such_article_here")
    assert WP100 in info.value.source


def test_article_of_a_stylesheet_is_refused(backend: ZimBackend) -> None:
    with pytest.raises(FolioError, match="not an HTML article"):
        backend.article(WP100, "-/style.css")


def test_unknown_book_is_a_folio_error_naming_it(backend: ZimBackend) -> None:
    with pytest.raises(FolioError, match="no such book") as info:
        backend.search("no_such_book", "x")
    assert info.value.source == "no_such_book"


def test_broken_and_missing_files_fail_per_book_while_the_others_open(tmp_path: Path) -> None:
    truncated = tmp_path / "truncated.zim"
    truncated.write_bytes(zim_path(RC_MINI).read_bytes()[:100_000])
    not_zim = tmp_path / "notes.zim"
    not_zim.write_text("this is a text file, not a ZIM archive\n" * 10)
    missing = tmp_path / "missing.zim"
    good = tmp_path / f"{TONEDEAR}.zim"
    shutil.copyfile(zim_path(TONEDEAR), good)

    zims = ZimBackend([truncated, not_zim, missing, good, tmp_path])
    assert [b.name for b in zims.books()] == [TONEDEAR]
    assert set(zims.errors) == {"truncated", "notes", "missing", tmp_path.name}
    assert zims.errors["truncated"].source == str(truncated)
    assert "not a readable ZIM archive" in zims.errors["truncated"].reason
    assert "not a readable ZIM archive" in zims.errors["notes"].reason
    assert zims.errors["missing"].reason == "ZIM file not found"
    assert "directory" in zims.errors[tmp_path.name].reason
    with pytest.raises(FolioError) as info:
        zims.search("truncated", "anything")
    assert info.value is zims.errors["truncated"]
    assert zims.search(TONEDEAR, "perfect pitch")[0].path.endswith("absolute-perfect-pitch-test")


def test_two_files_with_the_same_book_name_keep_the_first(tmp_path: Path) -> None:
    other = tmp_path / f"{TONEDEAR}.zim"
    shutil.copyfile(zim_path(TONEDEAR), other)
    zims = ZimBackend([zim_path(TONEDEAR), other])
    assert [b.location for b in zims.books()] == [str(zim_path(TONEDEAR))]
    assert "duplicate book name" in zims.errors[TONEDEAR].reason


# --- a ZIM that opens but has a corrupt cluster ---------------------------------------------------


def _damaged_zim(directory: Path, name: str, where: str, source: str = WP100) -> Path:
    """A copy of the ``source`` ZIM (the Wikipedia 100 one) with 64 bytes flipped inside its first
    compressed cluster: ``where="middle"`` (its metadata still reads, part of its articles do not) or
    ``"start"`` (nothing compressed reads, the metadata included). Offsets come from the ZIM header."""
    import struct

    data = bytearray((ZIM_DIR / f"{source}.zim").read_bytes())
    count, pointers = struct.unpack_from("<I", data, 28)[0], struct.unpack_from("<Q", data, 48)[0]
    offsets = [struct.unpack_from("<Q", data, pointers + 8 * i)[0] for i in range(count)] + [len(data)]
    compressed = [i for i in range(count) if data[offsets[i]] & 0x0F in (4, 5)]  # lzma (xz), zstd
    assert compressed, "the archive has compressed clusters"
    targets = compressed if where == "start" else compressed[:1]
    for i in targets:
        begin = offsets[i] + 40 if where == "start" else (offsets[i] + offsets[i + 1]) // 2
        for j in range(begin, begin + 64):
            data[j] ^= 0xFF
    path = directory / f"{name}.zim"
    path.write_bytes(bytes(data))
    return path


def _unreadable_article(path: Path) -> str:
    archive = Archive(path)
    for i in range(archive.entry_count):
        entry = archive._get_entry_by_id(i)
        if entry.is_redirect or not entry.get_item().mimetype.startswith("text/html"):
            continue
        try:
            bytes(entry.get_item().content)
        except RuntimeError:
            return entry.path
    raise AssertionError("no unreadable article: the damage missed")


def test_a_corrupt_cluster_fails_that_article_with_a_folio_error_and_the_rest_still_answer(
    tmp_path: Path,
) -> None:
    damaged = _damaged_zim(tmp_path, "damaged", "middle")
    backend = ZimBackend([damaged, ZIM_DIR / f"{RC_MINI}.zim"])
    assert [b.name for b in backend.books()] == ["damaged", RC_MINI]
    bad = _unreadable_article(damaged)
    with pytest.raises(FolioError) as info:
        backend.article("damaged", bad)
    assert str(info.value) == f"zim://damaged/{bad}: damaged ZIM archive (Data corruption detected)"
    readable = [c.path for c in backend.suggest("damaged", "a", limit=100)]
    assert readable and bad not in readable  # the damaged article is skipped, readable ones still come
    assert backend.search(RC_MINI, "Georgia on My Mind", limit=3)


def test_a_corrupt_cluster_under_the_metadata_fails_that_archive_at_open(tmp_path: Path) -> None:
    damaged = _damaged_zim(tmp_path, "damaged", "start")
    backend = ZimBackend([damaged, ZIM_DIR / f"{RC_MINI}.zim"])
    assert [b.name for b in backend.books()] == [RC_MINI]
    assert str(backend.errors["damaged"]) == f"{damaged}: damaged ZIM archive (Data corruption detected)"


def test_folio_kiwix_answers_from_the_good_archive_beside_a_damaged_one(tmp_path: Path) -> None:
    from tests.conftest import run_folio

    damaged = _damaged_zim(tmp_path, "damaged", "start")
    out = run_folio("kiwix", "Who was Ray Charles?", "--zim", str(damaged), str(ZIM_DIR / f"{RC_MINI}.zim"))
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr
    assert "damaged: damaged ZIM archive (Data corruption detected)" in out.stdout
    assert f"zim://{RC_MINI}/A/Ray_Charles" in out.stdout


def test_a_fifo_named_zim_is_refused_without_blocking(tmp_path: Path) -> None:
    import os
    import time

    fifo = tmp_path / "pipe.zim"
    os.mkfifo(fifo)  # libzim would block on opening it
    started = time.monotonic()
    backend = ZimBackend([fifo, ZIM_DIR / f"{RC_MINI}.zim"])
    assert [b.name for b in backend.books()] == [RC_MINI]
    assert str(backend.errors["pipe"]) == f"{fifo}: not a regular file: only ZIM files are read"
    assert time.monotonic() - started < 5
