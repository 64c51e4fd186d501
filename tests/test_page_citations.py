"""Located citations over the wire: a real PDF (the 14-page tracemonkey paper of ../shared/data/formats)
ingested, then a question about its text asked and searched over HTTP (``/api/ask``, ``/api/search``)
and through the MCP tools (``ask``, ``text_search``). Each answer carries the book's title and the page
the quoted text is printed on (read independently from the PDF's own text layer), and no percent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import DATA_DIR

PAPER = DATA_DIR / "formats" / "pdf" / "tracemonkey-pldi-09.pdf"
QUESTION = "What does the JSFUNFUZZ fuzz tester generate?"
WORDS = "JSFUNFUZZ random JavaScript programs"
CONFIG = {"llm": "none", "search_mode": "lexical"}


def _page_texts() -> list[str]:
    import pypdfium2

    doc = pypdfium2.PdfDocument(str(PAPER))
    try:
        return [" ".join(doc[i].get_textpage().get_text_bounded().split()) for i in range(len(doc))]
    finally:
        doc.close()


def _pages_printing(text: str) -> set[int]:
    """The pages (numbered as the paper prints them: it has no labels, so 1..14) whose text layer holds
    the first run of five words of ``text`` that is found there as it is (a run with a word hyphenated at
    a line end is not)."""
    pages = [page.replace("\x02 ", "") for page in _page_texts()]
    words = text.split()
    for at in range(max(len(words) - 4, 1)):
        key = " ".join(words[at : at + 5])
        found = {i + 1 for i, page in enumerate(pages) if key in page}
        if found:
            return found
    return set()


def _span(page: str) -> set[int]:
    """The pages of a citation's page field ("10" or "9-10")."""
    first, _, last = page.partition("-")
    return set(range(int(first), int(last or first) + 1))


@pytest.fixture(scope="module")
def paper_library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from folio.dataflows.api import ingest

    path = tmp_path_factory.mktemp("paper-library")
    report = ingest([PAPER], library=path)
    assert report.ok, [str(e) for e in report.errors]
    return path


def _located(row: dict, text: str) -> None:
    assert row["book_title"] == "tracemonkey-pldi-09" and row["percent"] is None, row
    pages = _pages_printing(text)
    assert pages and _span(row["page"]) & pages, (row["page"], pages, text[:80])


def test_http_ask_and_search_carry_the_page_of_the_passage(paper_library: Path) -> None:
    import httpx

    from folio.dataflows.server import create_app
    from folio.dataflows.service import Service
    from tests.servers import ServedApp

    service = Service(paper_library, config=CONFIG)
    try:
        with (
            ServedApp(create_app(service)) as running,
            httpx.Client(base_url=running.url, timeout=120) as http,
        ):
            answer = http.post("/api/ask", json={"question": QUESTION}).json()
            cites = [c for c in answer["citations"] if "book_id" in c]
            assert cites, answer
            for cite in cites:
                _located(cite, cite["quote"])
            assert "10" in {c["page"] for c in cites}  # the fuzz tester is on page 10
            hits = http.get("/api/search", params={"q": WORDS, "k": 3}).json()
            assert hits and hits[0]["page"] == "10", hits[0]
            for hit in hits:
                _located(hit, hit["text"])
            image = http.get(f"/api/books/{cites[0]['book_id']}/pages/{cites[0]['page']}.png")
            assert image.status_code == 200 and image.content.startswith(b"\x89PNG")
    finally:
        service.close()


def test_mcp_ask_and_text_search_carry_the_page_of_the_passage(paper_library: Path) -> None:
    import anyio
    from mcp import Client

    from folio.dataflows.mcp_server import server
    from folio.dataflows.service import Service

    service = Service(paper_library, config=CONFIG)

    async def tools() -> tuple[dict, list]:
        async with Client(server(service), mode="legacy") as client:
            asked = await client.call_tool("ask", {"question": QUESTION})
            found = await client.call_tool("text_search", {"query": WORDS, "k": 3})
            return json.loads(asked.content[0].text), json.loads(found.content[0].text)

    try:
        answer, hits = anyio.run(tools)
    finally:
        service.close()
    cites = [c for c in answer["citations"] if "book_id" in c]
    assert cites, answer
    for cite in cites:
        _located(cite, cite["quote"])
    assert "10" in {c["page"] for c in cites}
    rows = hits["result"] if isinstance(hits, dict) else hits
    assert rows and rows[0]["page"] == "10", rows[0]
    for row in rows:
        _located(row, row["passage"].replace("**", ""))
