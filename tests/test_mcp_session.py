"""Issue 31: the MCP tools as an LLM client sees them, through the official ``mcp`` client, over stdio
(``folio mcp`` spawned) and over streamable HTTP (``folio serve``'s ``/mcp``), on a library of two books
(the Sherlock Holmes stories and the abridged Alice):

- every tool and every parameter is described for a model (what it returns, when to prefer it, an example);
- ``k`` on both searches; a row's ``passage`` is the matched part with the matched words in bold, and its
  ``location_id`` is what ``chunk_get`` reads (the top hit for "Irene Adler photograph" shows "the Irene
  Adler photograph", not the chunk's first paragraph about Mr. Hosmer Angel);
- the chapter summary of "A Scandal in Bohemia" repeats no sentence;
- ``book_synopsis_get`` without ``book_id`` asks for one, listing the books, instead of picking one.

The pure helpers (``marked_passage``, ``chosen_book``, ``central_sentences``) have direct tests first.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from folio.dataflows.api import ingest
from folio.dataflows.mcp_server import chosen_book, marked_passage, tool_specs
from folio.dataflows.server import create_app
from folio.dataflows.service import Service
from folio.nodes.backends.summaries import central_sentences, extractive_summary
from folio.nodes.core.text import sentences
from folio.nodes.core.types import FolioError
from tests.conftest import ALICE_EPUB
from tests.servers import ServedApp

FOLIO = Path(sys.executable).with_name("folio")
ENV = {"HAMILTON_TELEMETRY_ENABLED": "false", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
SCANDAL = "A Scandal in Bohemia"


# --- pure helpers ------------------------------------------------------------------------------------------
def test_the_passage_is_where_the_words_matched_and_marks_them() -> None:
    text = (
        "Mr. Hosmer Angel wrote letters from the office. " * 8
        + "The King wanted the photograph back, for Irene Adler had kept it. "
        + "Nothing else of note happened that day. " * 8
    )
    passage = marked_passage(text, "Irene Adler photograph", max_chars=120)
    assert "**photograph**" in passage and "**Irene** **Adler**" in passage
    assert "Hosmer" not in passage
    assert marked_passage("No word of it here at all.", "whale") == "No word of it here at all."
    assert "**photographs**" in marked_passage("Two photographs lay there.", "photograph")


def test_a_book_is_asked_for_when_there_are_several() -> None:
    books = [{"book_id": "alice-1", "title": "Alice"}, {"book_id": "holmes-2", "title": "Holmes"}]
    with pytest.raises(FolioError) as raised:
        chosen_book(books, None)
    assert (
        str(raised.value)
        == "book_id: give the book_id of one of the library's 2 books: alice-1 (Alice); holmes-2 (Holmes)"
    )
    assert chosen_book(books[:1], None) == "alice-1"
    assert chosen_book(books, "holmes-2") == "holmes-2"


def test_overlapping_chunks_give_a_summary_without_a_repeated_sentence() -> None:
    text = " ".join(f"Sentence number {i} tells of the king, the photograph and the lady." for i in range(40))
    overlapping = [text[i : i + 900] for i in range(0, len(text) - 300, 600)]  # chunks share 300 characters
    summary = extractive_summary(overlapping)
    said = [" ".join(summary[s:e].split()) for s, e in sentences(summary)]
    assert len(said) == len(set(said)) >= 2
    repeated = "The lady kept the photograph of the king safe. " * 3
    assert central_sentences(repeated + "A second sentence about the king and the lady here.", 3) == [
        "The lady kept the photograph of the king safe.",
        "A second sentence about the king and the lady here.",
    ]


def test_every_tool_and_parameter_is_described_with_an_example() -> None:
    for spec in tool_specs():
        assert len(spec.description) >= 120 and "Example" in spec.description, spec.name
        for name, prop in spec.input_schema["properties"].items():
            assert len(prop.get("description", "")) >= 20, (spec.name, name)
    searches = {s.name: s.input_schema for s in tool_specs() if s.name.endswith("_search")}
    assert all("k" in searches[name]["properties"] for name in ("text_search", "semantic_search"))


# --- a session through the official client -----------------------------------------------------------------
@pytest.fixture(scope="module")
def two_books(sherlock_library: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    library = tmp_path_factory.mktemp("mcp-two-books") / "library"
    shutil.copytree(sherlock_library, library)
    report = ingest([ALICE_EPUB], library=library)
    assert report.ok
    return library


async def _session(client: Client) -> dict[str, Any]:
    """One session an LLM would run: list, search, read, summarise, ask for a synopsis."""
    out: dict[str, Any] = {"tools": (await client.list_tools()).tools}

    async def call(name: str, arguments: dict[str, Any]) -> Any:
        result = await client.call_tool(name, arguments)
        text = result.content[0].text
        return ("error", text) if result.is_error else json.loads(text)

    out["books"] = (await call("books_list", {}))["books"]
    out["text"] = await call("text_search", {"query": "Irene Adler photograph", "k": 3})
    out["semantic"] = await call("semantic_search", {"query": "a king asks a detective for help", "k": 2})
    out["chunk"] = await call("chunk_get", {"location_id": out["text"][0]["location_id"]})
    holmes = next(b["book_id"] for b in out["books"] if "Sherlock" in b["title"])
    concepts = await call("book_concept_map_lookup", {"query": "Irene Adler"})
    out["concepts"] = concepts
    scandal = [h for h in out["text"] if h["chapter_title"] == SCANDAL]
    out["summary"] = await call(
        "chapter_summary_get", {"chapter_id": scandal[0]["chapter_id"] if scandal else "?"}
    )
    out["no_book"] = await call("book_synopsis_get", {})
    out["synopsis"] = await call("book_synopsis_get", {"book_id": holmes})
    return out


async def _stdio(library: Path) -> dict[str, Any]:
    params = StdioServerParameters(command=str(FOLIO), args=["mcp", "--library", str(library)], env=ENV)
    async with Client(stdio_client(params)) as client:
        return await _session(client)


async def _http(url: str) -> dict[str, Any]:
    async with Client(url + "/mcp/") as client:
        return await _session(client)


@pytest.fixture(scope="module", params=["stdio", "streamable-http"])
def session(request: pytest.FixtureRequest, two_books: Path) -> Iterator[dict[str, Any]]:
    if request.param == "stdio":
        yield anyio.run(_stdio, two_books)
        return
    service = Service(two_books)
    with ServedApp(create_app(service)) as running:
        yield anyio.run(_http, running.url)
    service.close()


def test_the_tools_listed_to_the_client_are_described(session) -> None:
    for tool in session["tools"]:
        assert "Example" in (tool.description or ""), tool.name
        for name, prop in tool.input_schema["properties"].items():
            assert prop.get("description"), (tool.name, name)


def test_search_rows_show_the_matched_passage_and_chunk_get_reads_them(session) -> None:
    rows = session["text"]
    assert len(rows) == 3
    top = rows[0]
    assert SCANDAL in [row["chapter_title"] for row in rows]
    # the top hit (A Case of Identity, whose chunk starts with Mr. Hosmer Angel's letters) shows the words
    assert "**Irene** **Adler** **photograph**" in top["passage"]
    assert "Hosmer" not in top["passage"]
    chunk = session["chunk"]
    assert chunk["location_id"] == top["location_id"]
    plain = re.sub(r"\*\*(\w+)\*\*", r"\1", top["passage"]).strip("…").strip()
    text = " ".join(chunk["text"].split())
    assert plain[:60] in text and not text.startswith(plain[:60])
    assert len(session["semantic"]) == 2


def test_the_scandal_in_bohemia_summary_repeats_no_sentence(session) -> None:
    summary = session["summary"]["summary"]
    said = [" ".join(summary[s:e].split()) for s, e in sentences(summary)]
    assert len(said) >= 2 and len(said) == len(set(said)), said


def test_a_synopsis_without_a_book_asks_for_one_listing_the_books(session) -> None:
    kind, reason = session["no_book"]
    assert kind == "error"
    for book in session["books"]:
        assert book["book_id"] in reason and book["title"] in reason
    assert "Sherlock" in session["synopsis"]["synopsis"]


# --- the real-model tier's LLM driving the tools through MCP ----------------------------------------------
async def _llm_through_mcp(llm: Any, library: Path, question: str) -> dict[str, Any]:
    """The tiny model of the real tier researches ``question`` through ``folio mcp`` (stdio): it is
    offered two of the MCP tools (as listed: descriptions and schemas) as OpenAI tools, named text_search
    and then chunk_get (SmolLM2 answers ``auto``
    with an empty message), every call it makes goes to the MCP server, and it answers from the results."""
    import httpx

    params = StdioServerParameters(command=str(FOLIO), args=["mcp", "--library", str(library)], env=ENV)
    out: dict[str, Any] = {"calls": []}
    async with Client(stdio_client(params)) as client:
        listed = (await client.list_tools()).tools
        tools = [
            {
                "type": "function",
                "function": {"name": t.name, "description": t.description, "parameters": t.input_schema},
            }
            for t in listed
            if t.name in ("text_search", "chunk_get")  # a short prompt: 2 loaded cores read it token by token
        ]
        messages: list[dict[str, Any]] = [
            {
                "role": "system",
                "content": "Answer from the book. Use the tools to search it and read passages.",
            },
            {"role": "user", "content": question},
        ]
        async with httpx.AsyncClient(timeout=600) as http:
            for name in ("text_search", "chunk_get", None):
                payload: dict[str, Any] = {
                    "model": llm.model,
                    "messages": messages,
                    "max_tokens": 120,
                    "temperature": 0,  # as Folio's own client: the same replies run after run
                }
                if name is not None:
                    payload |= {
                        "tools": tools,
                        "tool_choice": {"type": "function", "function": {"name": name}},
                    }
                reply = (await http.post(f"{llm.url}/chat/completions", json=payload)).json()
                assert "choices" in reply, reply
                message = reply["choices"][0]["message"]
                said = {"role": "assistant", "content": message.get("content") or ""}  # the template reads it
                messages.append(
                    said | ({"tool_calls": message["tool_calls"]} if message.get("tool_calls") else {})
                )
                for call in message.get("tool_calls") or []:
                    # strict=False: a raw newline inside a string (SmolLM2 writes them) is read, as
                    # hosts read it, instead of failing the client
                    arguments = json.loads(call["function"]["arguments"] or "{}", strict=False)
                    result = await client.call_tool(call["function"]["name"], arguments)
                    out["calls"].append((call["function"]["name"], arguments, result))
                    messages.append(
                        {"role": "tool", "tool_call_id": call["id"], "content": result.content[0].text}
                    )
        out["answer"] = messages[-1].get("content") or ""
    return out


@pytest.mark.real_llm
@pytest.mark.slow
def test_the_real_model_researches_through_mcp_tool_calls(real_llm: Any, alice_library: Path) -> None:
    ran = anyio.run(_llm_through_mcp, real_llm, alice_library, "Who is the Cheshire Cat?")
    names = [name for name, _, _ in ran["calls"]]
    assert names[:1] == ["text_search"] and "chunk_get" in names, names
    search = ran["calls"][0][2]
    text = search.content[0].text
    if search.is_error:  # the model's arguments did not fit (an empty query): a one-line tool error
        assert "\n" not in text and text.startswith("text_search: ")
    else:
        rows = json.loads(text)
        assert all({"location_id", "passage"} <= set(row) for row in rows)
    for _, _, result in ran["calls"]:
        assert result.content and "Traceback" not in result.content[0].text
    print(f"real model through MCP: {[(n, a) for n, a, _ in ran['calls']]} -> {ran['answer'][:200]!r}")
