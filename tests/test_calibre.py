"""Calibre libraries (dataflows/calibre.py) on the two real libraries of ../shared/data/formats/calibre:
metadata read read-only, one format per book, one line per book that cannot be read, the fault cases."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

import pytest

from folio.dataflows.api import book_sources, ingestible_suffixes
from folio.dataflows.calibre import DEFAULT_FORMATS, chosen_format, read_only_uri
from tests.conftest import DATA_DIR, REPO_DIR, run_folio
from tests.fault_corpus import CASES, Shared, corpus_root, run_case

CALIBRE = DATA_DIR / "formats" / "calibre"
WEB_TEST = CALIBRE / "calibre-web-test-library"
QUICK_START = CALIBRE / "quick-start-guide-library"


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def by_title(sources):
    return {s.metadata.get("title"): s for s in sources}


def test_the_web_test_library_gives_every_book_its_calibre_metadata() -> None:
    books = by_title(book_sources([WEB_TEST]))
    assert len(books) == 11  # every row of the books table
    buuko = books["Buuko"].metadata
    assert buuko["authors"] == ["John Döe"]
    assert (buuko["series"], buuko["series_index"]) == ("Djüngel", 3.0)
    assert buuko["tags"] == ["Gênot"]
    assert buuko["identifiers"] == {"mobi-asin": "a0827eb5-c60d-43bc-9564-f57dd6a4e808"}
    assert buuko["pubdate"] == "2017-01-20"
    assert books["Der Buchtitel"].metadata["authors"] == [
        "Frodo Beutlin",
        "Norbert Halagal",
        "Liu Yang",
        "Hector Gonçalves",
    ]  # Calibre's order, not alphabetical
    assert books["book8"].metadata["language"] == "nob"
    assert books["book8"].metadata["pubdate"] is None  # Calibre's 0101-01-01 means "no date"
    testbook = books["testbook"]
    assert testbook.path == WEB_TEST / "John Doe/testbook (5)/testbook - John Doe.epub"
    assert testbook.problem == ""


def test_a_comic_and_unreadable_formats_are_one_line_each_and_a_missing_file_is_named() -> None:
    books = by_title(book_sources([WEB_TEST, QUICK_START]))
    comic = books["comicdemo"]
    assert comic.path is None and "comic" in comic.problem and "CBR" in comic.problem
    assert "comicdemo" in str(comic.error())
    flutter = books["Flutter Complete Reference"]
    assert flutter.path is None
    assert "Flutter Complete Reference - Unknown.pdf is missing on disk" in flutter.problem
    for source in books.values():
        assert (source.path is None) == bool(source.problem)
        if source.path is not None:
            assert source.path.suffix in ingestible_suffixes()
        assert "\n" not in str(source.error() if source.problem else "")


def test_the_format_is_chosen_by_preference_among_the_formats_ingest_reads() -> None:
    folder = WEB_TEST / "John Doe/Buuko (7)"
    formats = [("PDF", "Buuko - John Doe"), ("MOBI", "Buuko - John Doe")]
    assert (
        chosen_format(folder, formats, DEFAULT_FORMATS, {".mobi", ".pdf"})[0]
        == folder / "Buuko - John Doe.mobi"
    )
    assert (
        chosen_format(folder, formats, ["pdf", "mobi"], {".mobi", ".pdf"})[0]
        == folder / "Buuko - John Doe.pdf"
    )
    assert chosen_format(folder, formats, DEFAULT_FORMATS, {".pdf"})[0] == folder / "Buuko - John Doe.pdf"
    path, problem = chosen_format(folder, formats, DEFAULT_FORMATS, {".epub", ".txt"})
    assert path is None and problem == "no format Folio reads (MOBI, PDF)"


def test_reading_a_calibre_library_never_writes_its_database(tmp_path: Path) -> None:
    copy = tmp_path / "library"
    shutil.copytree(QUICK_START, copy, copy_function=shutil.copyfile)
    for path in [copy, *copy.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    before = {p.name: sha256(p) for p in copy.rglob("*") if p.is_file()}
    book_sources([copy])
    assert {p.name: sha256(p) for p in copy.rglob("*") if p.is_file()} == before
    assert sorted(p.name for p in copy.iterdir()) == ["John Schember", "Unknown", "metadata.db"]  # no journal
    assert read_only_uri(copy / "metadata.db").endswith("?mode=ro")


def test_a_folder_of_metadata_opf_files_without_a_database_works(tmp_path: Path) -> None:
    copy = tmp_path / "no-database"
    shutil.copytree(QUICK_START, copy, ignore=shutil.ignore_patterns("metadata.db"))
    books = by_title(book_sources([copy]))
    guide = books["Quick Start Guide"]
    assert guide.path is not None and guide.path.name == "Quick Start Guide - John Schember.epub"
    assert guide.metadata["authors"] == ["John Schember"] and guide.metadata["language"] == "eng"
    assert "without a book file" in books["Flutter Complete Reference"].problem


CALIBRE_FAULTS = [c for c in CASES if c.group == "calibre"]


@pytest.fixture(scope="module")
def shared() -> Shared:
    with corpus_root() as root:
        yield Shared(root)


@pytest.mark.parametrize("fault", CALIBRE_FAULTS, ids=[c.name for c in CALIBRE_FAULTS])
def test_a_bad_calibre_database_is_one_line_and_changes_nothing(fault, shared: Shared) -> None:
    result = run_case(fault, shared)
    assert result.passed, f"{result.key}: {result.problems} (exit {result.returncode}) {result.stderr}"


# --- ingesting both real libraries (loads the model) -----------------------------------------------------
@pytest.fixture(scope="module")
def calibre_library(tmp_path_factory) -> tuple[Path, str, dict[str, str]]:
    before = {str(p): sha256(p / "metadata.db") for p in (WEB_TEST, QUICK_START)}
    lib = tmp_path_factory.mktemp("calibre-library")
    out = run_folio("ingest", str(WEB_TEST), str(QUICK_START), "--quiet", "--library", str(lib))
    return lib, out.stderr, before


def test_both_libraries_ingest_every_readable_book_under_its_calibre_title_and_authors(
    calibre_library,
) -> None:
    lib, stderr, before = calibre_library
    rows = json.loads(run_folio("books", "--json", "--library", str(lib)).stdout)
    got = {r["title"]: r for r in rows}
    readable = [s for s in book_sources([WEB_TEST, QUICK_START]) if s.path is not None]
    lines = stderr.strip().splitlines()
    for source in readable:  # ingested under its Calibre title and authors, or named in one line
        if source.metadata["title"] in got:
            row = got[source.metadata["title"]]
            assert row["authors"] == source.metadata["authors"]
            assert row["source_file"] == str(source.path.resolve())
        else:
            assert sum(str(source.path) in line for line in lines) == 1, stderr
    assert {"testbook", "book6", "book7", "book8", "Quick Start Guide"} <= set(got)  # the EPUBs
    assert got["book6"]["series"] == "Loko" and got["book7"]["tags"] == ["Gênot"]
    assert got["testbook"]["author"] == "John Döe" and got["testbook"]["pubdate"] == "2017-01-19"
    assert sum("comicdemo" in line for line in lines) == 1
    assert sum("Flutter Complete Reference" in line and "missing on disk" in line for line in lines) == 1
    assert all(line.startswith("folio: ") for line in lines) and "Traceback" not in stderr
    assert {p: sha256(Path(p) / "metadata.db") for p in before} == before  # byte-identical
    import duckdb

    con = duckdb.connect(str(lib / "catalog.duckdb"), read_only=True)
    try:
        catalog = {
            r[0]: r[1:] for r in con.execute("SELECT title, authors, series, tags FROM books").fetchall()
        }
    finally:
        con.close()
    assert catalog["book6"] == ('["Sigurd Lindgren"]', "Loko", "[]")
    assert catalog["book7"] == ('["Peter Parker"]', None, '["Gênot"]')


CALIBRE_ROW = re.compile(r"^\| `calibre/([^`/]+)/` \| calibre \| (.+?) \|$")


@pytest.mark.parametrize("doc", ["README.md", "docs/formats.md"])
def test_the_tables_say_how_many_books_of_each_library_are_ingested_and_which_are_named(
    calibre_library, doc: str
) -> None:
    lib, stderr, _ = calibre_library
    rows = json.loads(run_folio("books", "--json", "--library", str(lib)).stdout)
    lines = stderr.strip().splitlines()
    text = (REPO_DIR / doc).read_text(encoding="utf-8")
    table = dict(m.groups() for line in text.splitlines() if (m := CALIBRE_ROW.match(line)))
    assert sorted(table) == sorted(p.name for p in CALIBRE.iterdir())
    for name, outcome in table.items():
        folder = CALIBRE / name
        sources = book_sources([folder])
        ingested = [r for r in rows if r["source_file"].startswith(str(folder.resolve()) + "/")]
        ingested_titles = {r["title"] for r in ingested}
        named = [s.metadata["title"] for s in sources if s.metadata["title"] not in ingested_titles]
        for title in named:  # each named once, by its title or its file
            source = next(s for s in sources if s.metadata["title"] == title)
            mentions = [ln for ln in lines if title in ln or (source.path and str(source.path) in ln)]
            assert len(mentions) == 1, (title, lines)
        expected = f"{len(sources)} books, {len(ingested)} ingested; one line each: {', '.join(named)}"
        assert outcome == expected, name


def test_syncing_the_ingested_calibre_library_twice_the_second_run_changes_nothing(calibre_library) -> None:
    lib = str(calibre_library[0])
    first = run_folio("sync", str(WEB_TEST), "--library", lib)  # the CP1252 TXT is tried once more
    assert "updated 0, removed 0" in first.stdout, first.stdout + first.stderr
    second = run_folio("sync", str(WEB_TEST), "--library", lib)
    assert second.stdout.strip().startswith("sync: nothing changed: added 0, updated 0, removed 0"), (
        second.stdout
    )
    listed = json.loads(run_folio("books", "--library", lib, "--json").stdout)
    synced = [b for b in listed if b["source_file"].startswith(str(WEB_TEST) + "/")]
    assert len(synced) >= 4 and f"unchanged {len(synced)}" in second.stdout  # every book Folio read there
    assert sum("comicdemo" in line for line in second.stderr.splitlines()) == 1
    assert sha256(WEB_TEST / "metadata.db") == calibre_library[2][str(WEB_TEST)]


def calibre_titles(rows: list[dict], wanted) -> list[str]:
    """The titles of ingested ``rows`` whose Calibre metadata (read here from the database, not through
    the filters) satisfies ``wanted``: the same whichever formats Folio reads."""
    meta = {s.metadata["title"]: s.metadata for s in book_sources([WEB_TEST, QUICK_START])}
    return sorted(r["title"] for r in rows if wanted(meta[r["title"]]))


def test_filters_by_author_tag_series_and_language_on_the_cli(calibre_library) -> None:
    lib = str(calibre_library[0])

    def rows(*args: str) -> list[dict]:
        out = run_folio("books", "--json", "--library", lib, *args)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    def titles(*args: str) -> list[str]:
        return sorted(r["title"] for r in rows(*args))

    every = rows()
    title_of = {r["book_id"]: r["title"] for r in every}
    parker = calibre_titles(every, lambda m: "Peter Parker" in m["authors"])
    genot = calibre_titles(every, lambda m: "Gênot" in m["tags"])
    assert "book7" in parker and "book7" in genot and len(parker) < len(every)
    assert titles("--author", "peter parker") == parker
    assert titles("--author", "doe") == calibre_titles(every, lambda m: "John Döe" in m["authors"])  # accents
    assert "testbook" in titles("--author", "doe")
    assert titles("--tag", "genot") == genot
    assert titles("--series", "loko") == ["book6"]
    assert titles("--language", "nb") == calibre_titles(every, lambda m: m["language"] == "nob")
    assert "book8" in titles("--language", "nb")  # Calibre's "nob"
    assert titles("--format", "epub", "--author", "schember") == ["Quick Start Guide"]
    none = run_folio("books", "--library", lib, "--author", "nobody at all")
    assert none.returncode == 1 and none.stderr.count("\n") == 1 and "no book" in none.stderr

    def hit_titles(*args: str) -> set[str]:
        out = run_folio("search", "Blindtext", "--json", "--mode", "lexical", "--library", lib, *args)
        assert out.returncode == 0, out.stderr
        return {title_of[h["book_id"]] for h in json.loads(out.stdout)}

    assert len(hit_titles()) > 1  # the dummy text is in several books
    assert "book7" in hit_titles("--author", "parker") and hit_titles("--author", "parker") <= set(parker)
    assert "book7" in hit_titles("--tag", "Gênot") and hit_titles("--tag", "Gênot") <= set(genot)
    for author in ("parker", "baskerville"):
        out = run_folio("ask", "What is the Blindtext for?", "--json", "--library", lib, "--author", author)
        cited = {title_of[c["book_id"]] for c in json.loads(out.stdout)["citations"]}
        allowed = calibre_titles(every, lambda m, a=author: any(a in name.lower() for name in m["authors"]))
        assert cited and cited <= set(allowed), out.stdout[-500:] + out.stderr


def test_filters_by_author_and_tag_on_the_http_api_and_the_mcp_tools(calibre_library) -> None:
    import anyio
    import httpx
    from mcp import Client

    from folio.dataflows.mcp_server import server
    from folio.dataflows.server import create_app
    from folio.dataflows.service import Service
    from tests.servers import ServedApp

    service = Service(calibre_library[0], config={"search_mode": "lexical"})
    every = service.books()
    title_of = {r["book_id"]: r["title"] for r in every}
    parker = calibre_titles(every, lambda m: "Peter Parker" in m["authors"])
    genot = calibre_titles(every, lambda m: "Gênot" in m["tags"])
    with ServedApp(create_app(service)) as running, httpx.Client(base_url=running.url, timeout=120) as http:
        assert (
            sorted(b["title"] for b in http.get("/api/books", params={"author": "parker"}).json()) == parker
        )
        assert sorted(b["title"] for b in http.get("/api/books", params={"tag": "genot"}).json()) == genot
        assert len(http.get("/api/books").json()) == len(every) > len(parker)
        hits = http.get("/api/search", params={"q": "Blindtext", "author": "Peter Parker"}).json()
        assert hits and {title_of[h["book_id"]] for h in hits} <= set(parker)
        nothing = http.get("/api/books", params={"author": "nobody at all"})
        assert nothing.status_code in (400, 404) and "no book" in nothing.json()["error"]
        question = "What is the Blindtext for?"
        answer = http.post("/api/ask", json={"question": question, "filters": {"tag": "Gênot"}}).json()
        cited = {title_of[c["book_id"]] for c in answer["citations"]}
        assert cited and cited <= set(genot)

    async def tools() -> tuple[list, list]:
        async with Client(server(service), mode="legacy") as client:
            by_tag = await client.call_tool("books_list", {"tag": "Gênot"})
            by_author = await client.call_tool("books_list", {"author": "schember"})
            asked = await client.call_tool(
                "ask", {"question": "What is the Blindtext for?", "author": "parker"}
            )
            return (
                json.loads(by_tag.content[0].text)["books"],
                json.loads(by_author.content[0].text)["books"],
                json.loads(asked.content[0].text),
            )

    by_tag, by_author, asked = anyio.run(tools)
    assert sorted(b["title"] for b in by_tag) == genot
    assert [b["title"] for b in by_author] == ["Quick Start Guide"]
    cited = {title_of[c["book_id"]] for c in asked["citations"]}
    assert cited and cited <= set(parker)
    service.close()
