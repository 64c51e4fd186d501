"""``folio mcp``: Folio's tools for MCP clients (Claude Desktop, IDE agents, the MCP SDK's clients), built
on the official ``mcp`` Python SDK (v2, its low-level ``Server``), over stdio and streamable HTTP.

    folio mcp --library ~/folio [--zim wiki.zim ...]      # stdio: an MCP client spawns this command
    folio serve --library ~/folio                          # also serves the tools at http://127.0.0.1:8765/mcp/

    server(service)     # the SDK server object (tools/list, tools/call) over one warm ``Service``
    run_stdio(service)  # serve it over stdin/stdout until the client closes stdin
    http_app(service)   # a Starlette app serving it over streamable HTTP at its root (mounted at /mcp)

Tools (JSON in; out, JSON text and the same value as ``structuredContent``, a list as ``{"result": [...]}``):

- the six book tools of the agent mode, with exactly its input schemas (``BookTools.definitions()``) and
  its JSON results (``BookTools.call``): ``book_concept_map_lookup``, ``chapter_summary_get``,
  ``text_search``, ``semantic_search``, ``chunk_get``, ``book_synopsis_get``. Each call has a budget of one
  tool call and a fresh session cache; chapter summaries and synopses are read from the library's
  summary store when any process made them (``nodes.backends.summary_store``), else made and stored
  (with ``llm: openai``: at most 5 LLM calls of their own, ``nodes.backends.summaries``);
- ``kiwix_search(query)`` and ``kiwix_article_get(book, path)``: listed only when the service has a Kiwix
  source (``--zim`` or ``--kiwix-url``); a client that calls one anyway gets a tool error naming the fix;
- ``books_list()``: the library's books (``folio books --json``) and the Kiwix books served;
- ``ask(question)``: the whole answer with its citations (``folio ask --json``).

A failing call (a bad or missing argument, an empty string, an unknown book, chapter or chunk, a tool's
``{"error": ...}`` result, a ``FolioError``, even a bug) is an MCP tool error (``isError``) whose text is
one line; the server keeps serving. Arguments are checked against the advertised schema (``jsonschema``,
which the SDK depends on) and every string must be non-empty and at most ``MAX_QUESTION_CHARS`` long. The
blocking work runs on worker threads (``anyio.to_thread``), so a slow ``ask`` does not hold up other calls.

stdio: stdout is the protocol. The SDK points fd 1 at stderr while it serves (the protocol goes to a
private copy of the descriptor), and ``sys.stdout`` is redirected to stderr too, so a ``print`` or the
encoder's "Loading weights" bar can never corrupt a frame. The service warms up (library index, encoder,
drivers, Kiwix archives) on a worker thread as the server starts: ``initialize`` and ``tools/list`` answer
at once, tool calls wait for the warm-up.

HTTP: stateless streamable HTTP with JSON responses (no ``Mcp-Session-Id``, no server-to-client stream):
every tool call is self-contained, so sessions would only add state to keep and expire (and a restarted
server would answer old session ids with 404). The SDK's session manager must run for the app's lifetime:
``http_app``'s Starlette lifespan runs it, and a parent that mounts the app enters that lifespan in its own
(``dataflows.server`` does). A loopback bind keeps the SDK's DNS-rebinding protection (Host and Origin
must be 127.0.0.1, localhost or [::1]); another ``host`` turns it off, and the parent's token guards the
endpoint instead.

Limitations: no MCP resources, prompts or progress notifications; no output schemas (results are JSON
text and untyped structured content); ingest and remove are not tools (use ``folio ingest`` or the HTTP
API); mounted at ``/mcp``, the SDK endpoint answers at ``/mcp/`` and ``/mcp`` redirects there (307, which
the SDK's clients follow).
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.to_thread
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import (
    CallToolRequestParams,
    CallToolResult,
    ListToolsResult,
    PaginatedRequestParams,
    TextContent,
    Tool,
)
from starlette.applications import Starlette

from folio.dataflows.service import MAX_QUESTION_CHARS, Service, checked_text, version
from folio.nodes.backends.tools import BookTools
from folio.nodes.types import FolioError

SERVER_NAME = "folio"
MAX_REASON_CHARS = 500  # a tool error's one line is cut to this length
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
INSTRUCTIONS = (
    "Folio answers questions from the user's own ebooks (and offline Kiwix archives such as Wikipedia) "
    "with citations. Use `ask` for a whole answer, or the book tools to research step by step: "
    "book_concept_map_lookup or text_search/semantic_search to find passages, chunk_get to read one by its "
    "location_id, chapter_summary_get and book_synopsis_get for overviews. books_list names the books."
)

log = logging.getLogger("folio.mcp")

Runner = Callable[[Service, Mapping[str, Any]], Any]


@dataclass(frozen=True)
class ToolSpec:
    """One MCP tool: its name, description, input schema, whether it needs a Kiwix source, and the
    blocking function that runs it (``run(service, arguments) -> JSON value``)."""

    name: str
    description: str
    input_schema: dict[str, Any]
    run: Runner
    kiwix: bool = False

    def tool(self) -> Tool:
        return Tool(name=self.name, description=self.description, input_schema=self.input_schema)


def object_schema(properties: Mapping[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    """An input schema in the book tools' style: an object of these properties, nothing else."""
    return {
        "type": "object",
        "properties": dict(properties),
        "required": list(required),
        "additionalProperties": False,
    }


def _book_tool(name: str) -> Runner:
    def run(service: Service, arguments: Mapping[str, Any]) -> Any:
        limit = 2 if name == "search" else 1  # a call's own budget; search: its lexical and semantic lookups
        return json.loads(service.book_tools(limit).call(name, arguments))

    return run


def tool_specs() -> tuple[ToolSpec, ...]:
    """Every tool this server can serve, in the order it lists them."""
    functions = [d["function"] for d in BookTools.definitions()]
    book = [ToolSpec(f["name"], f["description"], f["parameters"], _book_tool(f["name"])) for f in functions]
    string = {"type": "string"}
    return (
        *book,
        ToolSpec(
            "kiwix_search",
            "Search the offline Kiwix archives (Wikipedia, Wikibooks…) for the articles and passages that "
            "answer a question: the answer passage with its sources, and ranked candidate articles "
            "(book, path, title) for kiwix_article_get.",
            object_schema({"query": string}, ("query",)),
            lambda service, args: service.kiwix_search(args["query"]),
            kiwix=True,
        ),
        ToolSpec(
            "kiwix_article_get",
            "The clean text and sections of one Kiwix article, by the book name and article path that "
            "kiwix_search returns (redirects followed).",
            object_schema({"book": string, "path": string}, ("book", "path")),
            lambda service, args: service.kiwix_article(args["book"], args["path"]),
            kiwix=True,
        ),
        ToolSpec(
            "books_list",
            "The books in the library (book_id, title, author, chapters, chunks) and the Kiwix books "
            "searched (name, title, language, article count).",
            object_schema({}),
            lambda service, _args: {"books": service.books(), "kiwix_books": service.kiwix_books()},
        ),
        ToolSpec(
            "ask",
            "Answer a question from the books (and the Kiwix archives when served) with citations: the "
            "answer text, each citation's book, chapter and character offsets (or article URL), the route "
            "taken and the tool calls made.",
            object_schema({"question": string}, ("question",)),
            lambda service, args: service.ask(args["question"]),
        ),
    )


# --- pure helpers --------------------------------------------------------------------------------------
def one_line(text: str, limit: int = MAX_REASON_CHARS) -> str:
    """``text`` on one line (whitespace runs collapsed), cut to ``limit`` characters."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def argument_error(schema: Mapping[str, Any], arguments: Mapping[str, Any]) -> str | None:
    """Why ``arguments`` do not fit ``schema`` (the first problem, one line), or None when they do.
    Beyond the schema, every string given must be non-empty and at most ``MAX_QUESTION_CHARS`` long."""
    from jsonschema import Draft202012Validator

    errors = sorted(Draft202012Validator(schema).iter_errors(dict(arguments)), key=lambda e: list(e.path))
    if errors:
        first = errors[0]
        where = ".".join(str(p) for p in first.path)
        return one_line(f"{where}: {first.message}" if where else first.message)
    for name, value in arguments.items():
        if isinstance(value, str):
            try:
                checked_text(name, value, MAX_QUESTION_CHARS)
            except FolioError as exc:
                return str(exc)
    return None


def error_value(value: Any) -> str | None:
    """The reason of a tool's ``{"error": reason}`` result, or None for any other value."""
    if isinstance(value, dict) and set(value) == {"error"}:
        return str(value["error"])
    return None


def tool_result(value: Any) -> CallToolResult:
    """A successful result: the value as JSON text, and as structured content (an object)."""
    text = json.dumps(value, ensure_ascii=False)
    structured = value if isinstance(value, dict) else {"result": value}
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=structured)


def tool_error(reason: str) -> CallToolResult:
    """A tool error the model can read: ``isError`` with one line of text."""
    return CallToolResult(content=[TextContent(type="text", text=one_line(reason))], is_error=True)


# --- the server ----------------------------------------------------------------------------------------
@dataclass
class Warmup:
    """The service's warm-up, started when the server starts; tool calls wait until it has ended."""

    done: anyio.Event = field(default_factory=anyio.Event)

    async def run(self, service: Service) -> None:
        try:
            await anyio.to_thread.run_sync(service.warm, abandon_on_cancel=True)
        except Exception as exc:  # logged; each tool call then fails, or works, on its own
            reason = str(exc) if isinstance(exc, FolioError) else f"{type(exc).__name__}: {exc}"
            log.warning("folio mcp: warm-up failed: %s", one_line(reason))
        finally:
            self.done.set()


def server(service: Service) -> Server[Warmup]:
    """The MCP server over ``service``: its tools listed and called (see the module docstring)."""
    specs = {s.name: s for s in tool_specs()}

    @contextlib.asynccontextmanager
    async def lifespan(_server: Server[Warmup]) -> AsyncIterator[Warmup]:
        warmup = Warmup()
        async with anyio.create_task_group() as group:
            group.start_soon(warmup.run, service)
            try:
                yield warmup
            finally:
                group.cancel_scope.cancel()

    async def list_tools(
        _ctx: ServerRequestContext[Warmup], _params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        return ListToolsResult(
            tools=[s.tool() for s in specs.values() if service.kiwix_enabled or not s.kiwix]
        )

    async def call_tool(ctx: ServerRequestContext[Warmup], params: CallToolRequestParams) -> CallToolResult:
        spec = specs.get(params.name)
        if spec is None:
            served = ", ".join(s.name for s in specs.values() if service.kiwix_enabled or not s.kiwix)
            return tool_error(f"unknown tool {params.name!r}: the tools are {served}")
        arguments = dict(params.arguments or {})
        problem = argument_error(spec.input_schema, arguments)
        if problem is not None:
            return tool_error(f"{spec.name}: {problem}")
        await ctx.lifespan_context.done.wait()
        try:
            value = await anyio.to_thread.run_sync(spec.run, service, arguments)
        except FolioError as exc:
            return tool_error(f"{spec.name}: {exc}")
        except Exception as exc:  # a bug must not take the server down; its reason is the tool error
            log.error("folio mcp: %s failed: %s: %s", spec.name, type(exc).__name__, exc)
            return tool_error(f"{spec.name} failed: {type(exc).__name__}: {exc}")
        reason = error_value(value)
        return tool_error(f"{spec.name}: {reason}") if reason is not None else tool_result(value)

    return Server(
        SERVER_NAME,
        version=version(),
        title="Folio",
        description="Offline question answering over your books and Kiwix archives, with citations.",
        instructions=INSTRUCTIONS,
        lifespan=lifespan,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


# --- transports ----------------------------------------------------------------------------------------
def run_stdio(service: Service) -> None:
    """Serve the tools over stdin/stdout until the client closes stdin (nothing else reaches stdout)."""
    anyio.run(_serve_stdio, service)


async def _serve_stdio(service: Service) -> None:
    mcp = server(service)
    async with stdio_server() as (read_stream, write_stream):
        # The SDK has pointed fd 1 at stderr (the protocol uses a private copy); Python-level writes to
        # sys.stdout go to stderr as well, even where the SDK could not divert the descriptor.
        with contextlib.redirect_stdout(sys.stderr):
            print(f"folio: MCP over stdio for {service.library.path} (warming up)", file=sys.stderr)
            await mcp.run(read_stream, write_stream, mcp.create_initialization_options())


def http_app(service: Service, host: str = "127.0.0.1") -> Starlette:
    """The tools over stateless streamable HTTP at the app's root (mount it at ``/mcp``); its lifespan
    runs the SDK's session manager. ``host`` is the bind address: loopback keeps DNS-rebinding
    protection, any other address disables it (the parent's token guards the endpoint)."""
    if host in LOOPBACK_HOSTS:
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*", "127.0.0.1", "localhost", "[::1]"],
            allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
        )
    else:
        security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    return server(service).streamable_http_app(
        streamable_http_path="/",
        stateless_http=True,
        json_response=True,
        transport_security=security,
        host=host,
    )
