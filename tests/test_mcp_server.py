"""The MCP server (``dataflows.mcp_server``) through the official SDK's real clients: the stdio client
spawning ``folio mcp`` on the ingested Alice library with a small Kiwix ZIM, and the streamable-HTTP client
against ``folio serve``'s app on a real uvicorn at ``/mcp``. Every tool is called and its content checked
against the library itself; failing calls are tool errors of one line, and the server keeps answering.

The process-level tests share one server each (module fixtures): one ``folio mcp`` process, one uvicorn.
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, Tool

from folio.dataflows.library import Library
from folio.dataflows.mcp_server import (
    argument_error,
    error_value,
    one_line,
    server,
    tool_result,
    tool_specs,
    with_conversation,
)
from folio.dataflows.service import Service
from folio.nodes.backends.book_tools import BookTools
from tests.conftest import REPO_DIR, ZIMS
from tests.servers import free_port

ZIM = ZIMS / "wikipedia_en_ray_charles_mini_2020-03.zim"
RAY = "wikipedia_en_ray_charles_mini_2020-03"
FOLIO = Path(sys.executable).with_name("folio")  # the venv's `folio` script
ENV = {"HAMILTON_TELEMETRY_ENABLED": "false", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
BOOK_TOOLS = [d["function"]["name"] for d in BookTools.definitions()]
OTHER_TOOLS = ["books_list", "ask"]
KIWIX_TOOLS = ["kiwix_search", "kiwix_article_get"]


def _value(result: CallToolResult) -> Any:
    """The JSON a successful call returned (its text), after checking it matches the structured content."""
    assert not result.is_error, result.content
    value = json.loads(result.content[0].text)
    assert result.structured_content == (value if isinstance(value, dict) else {"result": value})
    return value


def _error(result: CallToolResult) -> str:
    """The one line of a tool error."""
    assert result.is_error, result.content
    assert len(result.content) == 1
    text = result.content[0].text
    assert text and "\n" not in text and "Traceback" not in text
    return text


def _schemas(tools: list[Tool]) -> dict[str, tuple[str | None, dict[str, Any]]]:
    return {t.name: (t.description, t.input_schema) for t in tools}


def _agent_schemas() -> dict[str, tuple[str | None, dict[str, Any]]]:
    return {
        d["function"]["name"]: (d["function"]["description"], with_conversation(d["function"]["parameters"]))
        for d in BookTools.definitions()
    }


def assert_agent_parameters_described(listed: dict[str, tuple[str | None, dict[str, Any]]]) -> None:
    """Each book tool takes the agent mode's parameters (``k`` added to text_search), with the same
    types and required ones; the tool and each parameter carry a model's description with an example."""
    for name, (agent_description, agent) in _agent_schemas().items():
        description, schema = listed[name]
        assert description and len(description) > len(agent_description or "") and "Example" in description
        assert schema["required"] == agent["required"] and schema["additionalProperties"] is False
        extra = {"k"} if name == "text_search" else set()
        assert set(schema["properties"]) == set(agent["properties"]) | extra
        for key, value in schema["properties"].items():
            assert value.pop("description")
            expected = agent["properties"].get(key, {"type": "integer", "minimum": 1, "maximum": 20})
            assert value == {k: v for k, v in expected.items() if k != "description"}


# --- pure helpers ------------------------------------------------------------------------------------
def test_arguments_are_checked_against_the_schema_and_strings_must_hold_text() -> None:
    schema = dict(next(s.input_schema for s in tool_specs() if s.name == "semantic_search"))
    assert argument_error(schema, {"query": "a cat", "k": 3, "scope": ["ch-1"]}) is None
    assert argument_error(schema, {}) == "'query' is a required property"
    assert argument_error(schema, {"query": "cat", "k": 21}) == "k: 21 is greater than the maximum of 20"
    assert argument_error(schema, {"query": "cat", "k": "3"}) == "k: '3' is not of type 'integer'"
    assert "'mode' was unexpected" in (argument_error(schema, {"query": "cat", "mode": "x"}) or "")
    assert argument_error(schema, {"query": "  "}) == "query: must be a non-empty string"
    assert "too long" in (argument_error(schema, {"query": "x" * 3_000}) or "")


def test_errors_are_one_line_and_only_an_error_object_is_an_error() -> None:
    assert one_line("a\n  b\tc") == "a b c"
    assert one_line("x" * 600, 10) == "x" * 9 + "…"
    assert error_value({"error": "no such chunk"}) == "no such chunk"
    assert error_value({"error": "x", "hits": []}) is None and error_value([{"error": "x"}]) is None
    assert tool_result([1, 2]).structured_content == {"result": [1, 2]}
    assert tool_result({"a": "é"}).content[0].text == '{"a": "é"}'


# --- in process (no model) ---------------------------------------------------------------------------
class ColdService(Service):
    """A service that loads nothing up front (these tests call no tool that needs the encoder)."""

    def warm(self) -> None:
        pass


def _listed(service: Service) -> list[str]:
    async def names() -> list[str]:
        async with Client(server(service)) as client:
            return [t.name for t in (await client.list_tools()).tools]

    return anyio.run(names)


def test_kiwix_tools_are_listed_only_with_a_kiwix_source(tmp_path: Path) -> None:
    assert _listed(ColdService(tmp_path)) == BOOK_TOOLS + OTHER_TOOLS
    assert _listed(ColdService(tmp_path, zim_paths=[ZIM])) == BOOK_TOOLS + KIWIX_TOOLS + OTHER_TOOLS


class GatedService(ColdService):
    """``ask`` blocks its worker thread until the test opens the gate."""

    def __init__(self, library: Path) -> None:
        super().__init__(library)
        self.entered = threading.Event()
        self.gate = threading.Event()

    def ask(self, question: object) -> dict[str, Any]:
        self.entered.set()
        self.gate.wait(10)
        return {"answer": f"late answer to {question}"}


def test_a_slow_call_runs_off_the_event_loop_and_holds_up_no_other(tmp_path: Path) -> None:
    service = GatedService(tmp_path)
    finished: list[str] = []

    async def scenario() -> None:
        async with Client(server(service), mode="legacy") as client, anyio.create_task_group() as group:

            async def slow() -> None:
                result = await client.call_tool("ask", {"question": "why?"})
                assert _value(result) == {"answer": "late answer to why?"}
                finished.append("ask")

            group.start_soon(slow)
            assert await anyio.to_thread.run_sync(service.entered.wait, 10)
            assert _value(await client.call_tool("books_list", {})) == {"books": [], "kiwix_books": []}
            finished.append("books_list")
            service.gate.set()

    anyio.run(scenario)
    assert finished == ["books_list", "ask"]


# --- stdio: `folio mcp` spawned by the SDK's stdio client -------------------------------------------
@dataclass
class Transcript:
    """What one `folio mcp` session answered, for the tests below to read."""

    tools: list[Tool] = field(default_factory=list)
    results: dict[str, CallToolResult] = field(default_factory=dict)
    failures: list[tuple[str, CallToolResult, CallToolResult]] = field(default_factory=list)
    stream_errors: list[Exception] = field(default_factory=list)
    stderr: str = ""


FAILING_CALLS: list[tuple[str, dict[str, Any], str]] = [
    ("chunk_get", {"location_id": "{book}/ch-nope.000"}, "no chunk 'ch-nope.000'"),
    ("text_search", {"query": ""}, "text_search: query: must be a non-empty string"),
    (
        "semantic_search",
        {"query": "cat", "k": 50},
        "semantic_search: k: 50 is greater than the maximum of 20",
    ),
    ("chapter_summary_get", {}, "chapter_summary_get: 'chapter_id' is a required property"),
    ("kiwix_article_get", {"book": RAY, "path": "A/No_such_article"}, "no such article"),
    ("book_synopsis_get", {"book_id": "no-such-book"}, "no such book"),
    ("no_such_tool", {}, "unknown tool 'no_such_tool'"),
]


async def _stdio_session(command: str, args: list[str], errlog: Any) -> Transcript:
    out = Transcript()

    async def on_message(message: object) -> None:
        if isinstance(message, Exception):  # a line on stdout that is not a JSON-RPC message
            out.stream_errors.append(message)

    params = StdioServerParameters(command=command, args=args, env=ENV)
    async with Client(stdio_client(params, errlog=errlog), message_handler=on_message) as client:
        out.tools = (await client.list_tools()).tools

        async def call(name: str, arguments: dict[str, Any]) -> Any:
            out.results[name] = await client.call_tool(name, arguments)
            return None if out.results[name].is_error else json.loads(out.results[name].content[0].text)

        books = await call("books_list", {})
        book = books["books"][0]["book_id"] if books else "?"
        hits = await call("text_search", {"query": "Curiouser and curiouser"}) or [{}]
        await call("chunk_get", {"location_id": hits[0].get("location_id", "?")})
        await call("chapter_summary_get", {"chapter_id": hits[0].get("chapter_id", "?")})
        await call("semantic_search", {"query": "the baby turned into a pig", "k": 3})
        await call("book_concept_map_lookup", {"query": "White Rabbit"})
        await call("book_synopsis_get", {"book_id": book})
        found = await call("kiwix_search", {"query": "Why did Ray Charles lose his sight?"})
        top = (found or {}).get("candidates", [{}])[0]
        await call("kiwix_article_get", {"book": top.get("book", "?"), "path": top.get("path", "?")})
        await call("ask", {"question": "Who stole the tarts?"})
        for name, arguments, _ in FAILING_CALLS:
            arguments = {k: v.format(book=book) if isinstance(v, str) else v for k, v in arguments.items()}
            failed = await client.call_tool(name, arguments)
            following = await client.call_tool("text_search", {"query": "Cheshire"})
            out.failures.append((name, failed, following))
    return out


@pytest.fixture(scope="module")
def stdio_transcript(alice_library: Path, tmp_path_factory: pytest.TempPathFactory) -> Transcript:
    """One `folio mcp --library ALICE --zim RAY` session that calls every tool, then failing ones."""
    stderr = tmp_path_factory.mktemp("mcp-stdio") / "stderr.txt"
    args = ["mcp", "--library", str(alice_library), "--zim", str(ZIM)]
    with stderr.open("w") as errlog:
        transcript = anyio.run(_stdio_session, str(FOLIO), args, errlog)
    transcript.stderr = stderr.read_text()
    return transcript


def test_stdio_lists_every_tool_with_the_agent_mode_schemas(stdio_transcript: Transcript) -> None:
    tools = _schemas(stdio_transcript.tools)
    assert list(tools) == BOOK_TOOLS + KIWIX_TOOLS + OTHER_TOOLS
    assert_agent_parameters_described(tools)
    assert tools["ask"][1]["required"] == ["question"]
    assert tools["kiwix_article_get"][1]["required"] == ["book", "path"]


def test_stdio_stdout_carries_only_the_protocol(stdio_transcript: Transcript) -> None:
    assert stdio_transcript.stream_errors == []
    assert "Traceback" not in stdio_transcript.stderr
    assert "Loading weights" not in stdio_transcript.stderr  # no third-party progress bar at all


def test_stdio_text_search_finds_the_chapter_and_chunk_get_returns_its_stored_text(
    stdio_transcript: Transcript, alice_library: Path
) -> None:
    hits = _value(stdio_transcript.results["text_search"])
    assert hits[0]["chapter_title"] == "The Pool Of Tears"
    assert "**Curiouser** and **curiouser**" in hits[0]["passage"]
    chunk = _value(stdio_transcript.results["chunk_get"])
    assert chunk["location_id"] == hits[0]["location_id"]
    stored = Library(alice_library).store(chunk["book_id"]).chunk(chunk["location_id"].rpartition("/")[2])
    assert chunk["text"] == stored.text and (chunk["start"], chunk["end"]) == (stored.start, stored.end)


def test_stdio_summaries_and_lookups_come_from_the_book(
    stdio_transcript: Transcript, alice_library: Path
) -> None:
    results = stdio_transcript.results
    summary = _value(results["chapter_summary_get"])
    store = Library(alice_library).stores()[0]
    chapter = " ".join(store.chapter_text(summary["chapter_id"]).split())
    assert summary["summary"] and summary["summary"][:60] in chapter
    top = _value(results["semantic_search"])
    assert len(top) == 3 and top[0]["chapter_title"] == "Pig And Pepper"
    (concepts,) = _value(results["book_concept_map_lookup"])
    assert concepts["book_id"] == store.book_id
    assert concepts["chapter_ids"] and set(concepts["chapter_ids"]) <= set(store.titles)
    synopsis = _value(results["book_synopsis_get"])["synopsis"]
    assert synopsis.startswith("Alice's Adventures in Wonderland by Lewis Carroll.")


def test_stdio_books_list_names_the_books_and_the_kiwix_books(
    stdio_transcript: Transcript, alice_library: Path
) -> None:
    listed = _value(stdio_transcript.results["books_list"])
    assert listed["books"] == Library(alice_library).books()
    assert [b["name"] for b in listed["kiwix_books"]] == [RAY]


def test_stdio_kiwix_search_and_article_get_read_the_zim(stdio_transcript: Transcript) -> None:
    found = _value(stdio_transcript.results["kiwix_search"])
    assert found["primary_book"] == RAY and "glaucoma" in found["context"]
    article = _value(stdio_transcript.results["kiwix_article_get"])
    assert (article["book"], article["title"]) == (RAY, "Ray Charles") and "glaucoma" in article["text"]


def test_stdio_ask_answers_with_citations(stdio_transcript: Transcript) -> None:
    answer = _value(stdio_transcript.results["ask"])
    assert answer["route"] == "BOOK" and "Knave of Hearts" in answer["answer"]
    assert answer["citations"] and answer["citations"][0]["chapter_title"] == "Who Stole The Tarts?"


def test_stdio_failing_calls_are_one_line_tool_errors_and_the_next_call_works(
    stdio_transcript: Transcript,
) -> None:
    assert [name for name, _, _ in stdio_transcript.failures] == [name for name, _, _ in FAILING_CALLS]
    for (name, failed, following), (_, _, expected) in zip(
        stdio_transcript.failures, FAILING_CALLS, strict=True
    ):
        assert expected in _error(failed), name
        assert _value(following)[0]["passage"], name


@pytest.mark.slow
def test_stdio_output_from_prints_and_fd_1_goes_to_stderr(tmp_path: Path) -> None:
    """A warm-up that prints and writes to fd 1 (as native code may) leaves the protocol intact."""
    code = (
        "import os, sys\n"
        "from folio.dataflows import service\n"
        "def noisy(self):\n"
        "    print('noise from print')\n"
        "    os.write(1, b'noise on fd 1\\n')\n"
        "service.Service.warm = noisy\n"
        "from folio.dataflows.cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    stderr = tmp_path / "stderr.txt"
    with stderr.open("w") as errlog:
        transcript = anyio.run(
            _noisy_session, sys.executable, ["-c", code, "mcp", "--library", str(tmp_path / "lib")], errlog
        )
    assert transcript.stream_errors == []
    assert _value(transcript.results["books_list"]) == {"books": [], "kiwix_books": []}
    assert _error(transcript.results["kiwix_search"]).startswith("kiwix_search: kiwix: no Kiwix source")
    assert _value(transcript.results["books_list_again"]) == {"books": [], "kiwix_books": []}
    logged = stderr.read_text()
    assert "noise from print" in logged and "noise on fd 1" in logged


async def _noisy_session(command: str, args: list[str], errlog: Any) -> Transcript:
    out = Transcript()

    async def on_message(message: object) -> None:
        if isinstance(message, Exception):
            out.stream_errors.append(message)

    params = StdioServerParameters(command=command, args=args, env={**ENV, "PYTHONPATH": str(REPO_DIR)})
    async with Client(stdio_client(params, errlog=errlog), message_handler=on_message) as client:
        out.results["books_list"] = await client.call_tool("books_list", {})
        out.results["kiwix_search"] = await client.call_tool("kiwix_search", {"query": "Ray Charles"})
        out.results["books_list_again"] = await client.call_tool("books_list", {})
    return out


# --- streamable HTTP: `folio serve`'s app on a real uvicorn ------------------------------------------
@contextlib.contextmanager
def _uvicorn(app: Any) -> Iterator[str]:
    """``app`` on a real uvicorn at 127.0.0.1 in a thread of this process; yields its base URL."""
    import uvicorn

    port = free_port()
    served = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=served.run, name="uvicorn-mcp-test", daemon=True)
    thread.start()
    deadline = time.monotonic() + 120
    while not served.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        served.should_exit = True
        thread.join(timeout=30)


@pytest.fixture(scope="module")
def served_url(alice_library: Path) -> Iterator[str]:
    """``folio serve``'s app (``create_app``) over the Alice library, no Kiwix source, on uvicorn."""
    from folio.dataflows.server import create_app

    service = Service(alice_library)
    with _uvicorn(create_app(service)) as url:
        yield url


async def _http_session(url: str, mode: str) -> tuple[list[Tool], list[CallToolResult]]:
    async with Client(url, mode=mode) as client:
        tools = (await client.list_tools()).tools
        calls = [
            await client.call_tool("text_search", {"query": "We're all mad here"}),
            await client.call_tool("kiwix_search", {"query": "Ray Charles"}),
            await client.call_tool("chunk_get", {"location_id": "no-such-book/ch-1.000"}),
            await client.call_tool("books_list", {}),
        ]
    return tools, calls


@pytest.mark.parametrize(("path", "mode"), [("/mcp", "auto"), ("/mcp/", "legacy")])
def test_http_client_lists_and_calls_the_tools_at_mcp(served_url: str, path: str, mode: str) -> None:
    tools, (search, kiwix, missing, books) = anyio.run(_http_session, served_url + path, mode)
    listed = _schemas(tools)
    assert list(listed) == BOOK_TOOLS + OTHER_TOOLS  # no Kiwix source, no Kiwix tools
    assert_agent_parameters_described(listed)
    assert [hit["chapter_title"] for hit in _value(search)] == ["Pig And Pepper"]
    assert "no Kiwix source: serve with --zim" in _error(kiwix)
    assert _error(missing) == "chunk_get: no-such-book/ch-1.000: no such location in the books in play"
    assert [b["title"] for b in _value(books)["books"]] == ["Alice's Adventures in Wonderland"]


def test_http_endpoint_refuses_a_foreign_host_header(served_url: str) -> None:
    """DNS-rebinding protection: a page on another host name that resolves here gets nothing."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"}
    ok = httpx.post(f"{served_url}/mcp/", json=body, headers=headers, timeout=30)
    assert ok.status_code == 200 and "text_search" in ok.text
    foreign = httpx.post(
        f"{served_url}/mcp/", json=body, headers={**headers, "Host": "evil.example"}, timeout=30
    )
    assert foreign.status_code == 421


def test_http_endpoint_takes_the_token_of_folio_serve(alice_library: Path) -> None:
    from folio.dataflows.server import create_app

    async def tools_with_token(url: str) -> list[str]:
        async with (
            httpx2.AsyncClient(headers={"Authorization": "Bearer s3cret"}, timeout=60) as http,
            Client(streamable_http_client(url, http_client=http)) as client,
        ):
            return [t.name for t in (await client.list_tools()).tools]

    with _uvicorn(create_app(Service(alice_library), token="s3cret")) as url:
        assert anyio.run(tools_with_token, f"{url}/mcp") == BOOK_TOOLS + OTHER_TOOLS
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        refused = httpx.post(f"{url}/mcp/", json=body, headers={"Accept": "application/json"}, timeout=30)
        assert refused.status_code == 401 and "token" in refused.json()["error"]
