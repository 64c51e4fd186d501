"""``folio mcp``: Folio's tools for MCP clients (Claude Desktop, IDE agents, the MCP SDK's clients), built
on the official ``mcp`` Python SDK (v2, its low-level ``Server``), over stdio and streamable HTTP.

    folio mcp --library ~/folio [--zim wiki.zim ...]      # stdio: an MCP client spawns this command
    folio serve --library ~/folio                          # also serves the tools at http://127.0.0.1:8765/mcp/

    server(service)     # the SDK server object (tools/list, tools/call) over one warm ``Service``
    run_stdio(service)  # serve it over stdin/stdout until the client closes stdin
    http_app(service)   # a Starlette app serving it over streamable HTTP at its root (mounted at /mcp)

Tools (JSON in; out, JSON text and the same value as ``structuredContent``, a list as ``{"result": [...]}``):

- the six book tools of the agent mode (``BookTools``): ``book_concept_map_lookup``,
  ``chapter_summary_get``, ``text_search``, ``semantic_search``, ``chunk_get``, ``book_synopsis_get``, with
  the agent's parameters, each described for a model (what it returns, when to prefer it, an example:
  ``MODEL_NOTES``), plus ``k`` on ``text_search``. Both searches answer rows whose ``passage`` is the
  part of the chunk that matches the query with the matched words in ``**bold**`` (``marked_passage``)
  and whose ``location_id`` is what ``chunk_get`` takes, located like ``ask``'s citations (``book_title``,
  ``page`` or ``percent``: ``located_hit``); ``book_synopsis_get`` without ``book_id`` in a
  library of several books is a tool error listing them (never a book picked for the model). Each tool
  takes an optional ``conversation`` id. Each call has a budget of one tool call and a fresh session
  cache, or, with a conversation id, that conversation's cache (shared with ``ask`` in it: a repeated
  call is served from it); chapter summaries and synopses are read from
  the library's summary store when any process made them (``nodes.backends.summary_store``), else made
  and stored (with ``llm: openai``: at most 5 LLM calls of their own, ``nodes.backends.summaries``);
- ``kiwix_search(query)`` and ``kiwix_article_get(book, path)``: listed only when the service has a Kiwix
  source (``--zim`` or ``--kiwix-url``); a client that calls one anyway gets a tool error naming the fix;
- ``books_list(author?, series?, tag?, language?, format?)``: the library's books (``folio books --json``,
  filtered as ``dataflows.filtering`` says) and the Kiwix books served;
- ``ask(question, conversation?, author?, series?, tag?, language?, format?)``: the whole answer with its
  citations (``folio ask --json``) from the books the filters match.

A failing call (a bad or missing argument, an empty string, an unknown book, chapter or chunk, a tool's
``{"error": ...}`` result, a ``FolioError``, even a bug) is an MCP tool error (``isError``) whose text is
one line; the server keeps serving. Arguments are checked against the advertised schema (``jsonschema``,
which the SDK depends on) and every string must be non-empty and at most ``MAX_QUESTION_CHARS`` long. The
blocking work runs on worker threads (``anyio.to_thread``), so a slow ``ask`` does not hold up other calls.

stdio: stdout is the protocol. fd 1 points at stderr while it serves (the protocol goes to a private
copy of the descriptor; ``dataflows.mcp_stdio``, which also screens every frame so each request with an
id gets a reply), and ``sys.stdout`` is redirected to stderr too, so a ``print`` or the
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

from folio.dataflows.mcp_stdio import ScreenedFrames, screened_stdio
from folio.dataflows.service import MAX_QUESTION_CHARS, Service, checked_text, version
from folio.nodes.backends.book_tools import BookTools
from folio.nodes.backends.html_text import best_passage
from folio.nodes.core.text import content_words, plural_stem, word_spans
from folio.nodes.core.types import FolioError, Hit
from folio.nodes.readers.common import located_hit

SERVER_NAME = "folio"
PASSAGE_CHARS = 400  # a search row's passage: at most this many characters around the matched words
MAX_K = 20  # the most rows one search returns
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


FILTER_PROPERTIES = {
    "author": {"type": "string", "description": "only books with an author whose name holds these words"},
    "series": {"type": "string", "description": "only books of a series whose name holds these words"},
    "tag": {"type": "string", "description": "only books with this tag"},
    "language": {"type": "string", "description": "only books in this language (en, eng, de...)"},
    "format": {"type": "string", "description": "only books ingested from this format (epub, txt...)"},
}  # dataflows.filtering


def _filters(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """``{"filters": {...}}`` when a call gives any filter, else nothing (keyword arguments)."""
    given = {k: v for k, v in arguments.items() if k in FILTER_PROPERTIES}
    return {"filters": given} if given else {}


def object_schema(properties: Mapping[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    """An input schema in the book tools' style: an object of these properties, nothing else."""
    return {
        "type": "object",
        "properties": dict(properties),
        "required": list(required),
        "additionalProperties": False,
    }


CONVERSATION = {
    "type": "string",
    "description": "Optional conversation id: the calls of one conversation share one cache, so a "
    "repeated lookup or search is served from it.",
}


def with_conversation(schema: Mapping[str, Any]) -> dict[str, Any]:
    """``schema`` with the optional ``conversation`` property added."""
    return {**schema, "properties": {**schema["properties"], "conversation": CONVERSATION}}


def _ask(service: Service, args: Mapping[str, Any]) -> Any:
    given = {"conversation": args["conversation"]} if "conversation" in args else {}
    return service.ask(args["question"], **given, **_filters(args))


# What a model reads: per tool, its description and each parameter's (an example in each).
MODEL_NOTES: dict[str, tuple[str, dict[str, str]]] = {
    "book_concept_map_lookup": (
        "Look up people, places, themes and events in the books' concept maps. Returns, per book, the "
        "matching entities, themes and events and the chapter_ids where they matter. Prefer it first "
        "for a named character or a theme, to find which chapters to read or to scope a search. "
        'Example: {"query": "Irene Adler"}.',
        {"query": 'a name, theme or event, in a few words; example: "the Queen of Hearts"'},
    ),
    "chapter_summary_get": (
        "A summary of one chapter (a few central sentences, or an LLM summary when one is configured). "
        "Returns {chapter_id, summary}. Prefer it to see what happens in a chapter before reading its "
        'chunks. chapter_ids come from searches and book_concept_map_lookup. Example: {"chapter_id": '
        '"ch-003"}.',
        {"chapter_id": 'a chapter id from a search row or a concept lookup; example: "ch-003"'},
    ),
    "search": (
        "Search the books by words and meaning together (the ranking of `folio search`, the one ask uses). "
        "Returns up to k rows, best first: location_id, book_id, chapter_id, chapter_title, score and "
        "passage, the matching part of the chunk with the query's words in **bold**. The best first search "
        "for most questions; text_search for exact names and quotes, semantic_search for paraphrases. "
        'Example: {"query": "why did the Red-Headed League dissolve", "k": 5}.',
        {
            "query": 'the question or the words to find; example: "who stole the tarts"',
            "scope": 'chapter ids to search in; leave out (or []) to search every book; example: ["ch-001"]',
            "k": f"how many rows to return, 1 to {MAX_K} (default 10); example: 5",
        },
    ),
    "text_search": (
        "Search the books for the exact words (BM25). Returns up to k rows, best first: location_id, "
        'book_id, book_title, chapter_id, chapter_title, page (a PDF\'s printed page, else "") or percent '
        "(where the passage lies in the book), score and passage, the matching part of the chunk with the "
        "matched words in **bold**. Prefer it for names, quotes and concrete facts; use semantic_search "
        'when the wording is unknown. Read a whole chunk with chunk_get(location_id). Example: {"query": '
        '"Irene Adler photograph", "k": 5}.',
        {
            "query": 'the words to find, as they would appear in the book; example: "Irene Adler photograph"',
            "scope": 'chapter ids to search in; leave out (or []) to search every book; example: ["ch-001"]',
            "k": f"how many rows to return, 1 to {MAX_K} (default 10); example: 5",
        },
    ),
    "semantic_search": (
        "Search the books by meaning (sentence embeddings), for questions whose words may not be in the "
        "text. Returns up to k rows like text_search (location_id, chapter, score, passage with any "
        "query words in **bold**). Prefer it for abstract or paraphrased questions; prefer text_search "
        'for names and quotes. Example: {"query": "a girl grows very tall after eating a cake", "k": 5}.',
        {
            "query": 'what the passage is about, in plain words; example: "a king asks a detective for help"',
            "scope": 'chapter ids to search in; leave out (or []) to search every book; example: ["ch-001"]',
            "k": f"how many rows to return, 1 to {MAX_K} (default 10); example: 5",
        },
    ),
    "chunk_get": (
        "The full text of one chunk (a passage of a few hundred words) with its book, chapter and "
        "character offsets. Use it to read around a search row before answering or quoting. Example: "
        '{"location_id": "doyle-the-adventures-of-sherlock-holmes-1a2b3c/ch-001.004"}.',
        {"location_id": "the location_id of a search row (BOOK_ID/CHUNK_ID)"},
    ),
    "book_synopsis_get": (
        "A synopsis of a whole book: title and author, main characters, themes, chapter titles and what "
        "happens. Returns {synopsis}. Prefer it for questions about a whole book. Needs book_id when the "
        'library holds several books (books_list names them). Example: {"book_id": "carroll-alice-..."}.',
        {"book_id": "a book_id from books_list (may be left out when the library holds one book)"},
    ),
}


def model_schema(name: str, parameters: Mapping[str, Any]) -> dict[str, Any]:
    """The agent's input schema of book tool ``name`` with each parameter described for a model
    (``MODEL_NOTES``), and ``k`` on both searches."""
    notes = MODEL_NOTES[name][1]
    properties = {key: dict(value) for key, value in parameters["properties"].items()}
    if name == "text_search":
        properties["k"] = {"type": "integer", "minimum": 1, "maximum": MAX_K}
    for key, value in properties.items():
        value["description"] = notes[key]
    return object_schema(properties, tuple(parameters.get("required", ())))


def marked_passage(text: str, query: str, max_chars: int = PASSAGE_CHARS) -> str:
    """The part of ``text`` (at most ``max_chars``) holding the most of the query's words, each of them
    in ``**bold**`` (plurals match: "photographs" for "photograph"); the text's start when none occurs."""
    terms = content_words(query)
    stems = {plural_stem(t) for t in terms}
    _start, passage = best_passage(text, terms, max_chars)
    out, last = [], 0
    for word, start, end in word_spans(passage):
        if plural_stem(word) in stems:
            out += [passage[last:start], f"**{passage[start:end]}**"]
            last = end
    return "".join([*out, passage[last:]])


def search_row(hit: Hit, query: str) -> dict[str, Any]:
    """One search result for a model: where it is (``location_id`` for chunk_get; the book's title and
    the page or percent when ``hit`` is located) and its passage."""
    return {
        "location_id": f"{hit.book_id}/{hit.chunk_id}",
        "book_id": hit.book_id,
        "book_title": hit.book_title,
        "chapter_id": hit.chapter_id,
        "chapter_title": hit.chapter_title,
        "page": hit.page,
        "percent": hit.percent,
        "score": round(hit.score, 4),
        "passage": marked_passage(hit.text, query),
    }


def _search(kind: str) -> Runner:
    def run(service: Service, arguments: Mapping[str, Any]) -> Any:
        limit = 2 if kind == "search" else 1  # a call's own budget; search: its lexical and semantic lookups
        tools = service.book_tools(limit, conversation=arguments.get("conversation"))
        query = str(arguments["query"])
        scope, k = arguments.get("scope"), arguments.get("k")
        if kind == "search":
            hits = tools.search(query, scope, k).hits
        else:
            hits = (tools.text_search if kind == "text" else tools.semantic_search)(query, scope, k)
        books = {d["book_id"]: d for d in service.library.descriptors()}
        return [
            search_row(located_hit(h, books[h.book_id]) if h.book_id in books else h, query) for h in hits
        ]

    return run


def chosen_book(books: list[dict[str, Any]], book_id: str | None) -> str:
    """The book a book tool works on: ``book_id`` as given, the library's only book when none is
    given, else a ``FolioError`` that lists the books to choose from (none is picked for the model)."""
    if book_id:
        return book_id
    if len(books) == 1:
        return str(books[0]["book_id"])
    if not books:
        raise FolioError("book_id", "the library has no books")
    listed = "; ".join(f"{b['book_id']} ({b['title']})" for b in books)
    raise FolioError("book_id", f"give the book_id of one of the library's {len(books)} books: {listed}")


def _synopsis(service: Service, arguments: Mapping[str, Any]) -> Any:
    book_id = chosen_book(service.books(), arguments.get("book_id"))
    tools = service.book_tools(conversation=arguments.get("conversation"))
    return json.loads(tools.call("book_synopsis_get", {"book_id": book_id}))


def _book_tool(name: str) -> Runner:
    if name in ("search", "text_search", "semantic_search"):
        return _search(name.split("_")[0])
    if name == "book_synopsis_get":
        return _synopsis

    def run(service: Service, arguments: Mapping[str, Any]) -> Any:
        rest = {k: v for k, v in arguments.items() if k != "conversation"}
        return json.loads(service.book_tools(conversation=arguments.get("conversation")).call(name, rest))

    return run


def _described(schema: dict[str, Any], notes: Mapping[str, str]) -> dict[str, Any]:
    """``schema`` with a model's description on each property."""
    properties = {key: dict(value) for key, value in schema["properties"].items()}
    for key, value in properties.items():
        value["description"] = notes.get(key, value.get("description", ""))
    return {**schema, "properties": properties}


def tool_specs() -> tuple[ToolSpec, ...]:
    """Every tool this server can serve, in the order it lists them."""
    functions = [d["function"] for d in BookTools.definitions()]
    book = [
        ToolSpec(
            f["name"],
            MODEL_NOTES[f["name"]][0],
            with_conversation(model_schema(f["name"], f["parameters"])),
            _book_tool(f["name"]),
        )
        for f in functions
    ]
    string = {"type": "string"}
    return (
        *book,
        ToolSpec(
            "kiwix_search",
            "Search the offline Kiwix archives (Wikipedia, Wikibooks…) for the articles and passages that "
            "answer a question. Returns the answer passage with its sources, and ranked candidate articles "
            "(book, path, title) to read with kiwix_article_get. Prefer it for general knowledge that is "
            'not in the user\'s books. Example: {"query": "Why did Ray Charles lose his sight?"}.',
            _described(
                object_schema({"query": dict(string)}, ("query",)),
                {"query": 'the question, in plain words; example: "What is a noble gas?"'},
            ),
            lambda service, args: service.kiwix_search(args["query"]),
            kiwix=True,
        ),
        ToolSpec(
            "kiwix_article_get",
            "The clean text of one Kiwix article, by sections, by the book and path of a kiwix_search "
            "candidate (redirects followed). Use it to read an article before answering from it. "
            'Example: {"book": "wikipedia_en_ray_charles_mini_2020-03", "path": "A/Ray_Charles"}.',
            _described(
                object_schema({"book": dict(string), "path": dict(string)}, ("book", "path")),
                {
                    "book": "the candidate's book (the archive's name); example: "
                    '"wikipedia_en_ray_charles_mini_2020-03"',
                    "path": 'the candidate\'s article path; example: "A/Ray_Charles"',
                },
            ),
            lambda service, args: service.kiwix_article(args["book"], args["path"]),
            kiwix=True,
        ),
        ToolSpec(
            "books_list",
            "The books in the library (book_id, title, authors, series, tags, language, format, chapters, "
            "chunks), only those the filters given match, and the Kiwix archives searched (name, title, "
            "language, article count). Call it first to know what can be searched and which book_id to "
            'give book_synopsis_get. Example: {} (no filter), or {"author": "Doyle"}.',
            object_schema(FILTER_PROPERTIES),
            lambda service, args: {
                "books": service.books(**_filters(args)),
                "kiwix_books": service.kiwix_books(),
            },
        ),
        ToolSpec(
            "ask",
            "Answer a question from the books (only those the filters given match; and the Kiwix archives "
            "when served) in one call, with citations: the answer text, each citation's book, chapter and "
            "character offsets (or article URL), the route taken and the tool calls made. Prefer it for a "
            "quick cited answer; use the other tools to research step by step. Example: "
            '{"question": "Who stole the tarts?"}.',
            with_conversation(
                _described(
                    object_schema({"question": dict(string), **FILTER_PROPERTIES}, ("question",)),
                    {"question": 'the question, in plain words; example: "Who stole the tarts?"'},
                )
            ),
            _ask,
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
    async with screened_stdio() as (read_stream, write_stream):  # every request answered (mcp_stdio)
        # fd 1 points at stderr (the protocol uses a private copy); Python-level writes to
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
    app = server(service).streamable_http_app(
        streamable_http_path="/",
        stateless_http=True,
        json_response=True,
        transport_security=security,
        host=host,
    )
    app.add_middleware(ScreenedFrames)  # every request answered (dataflows.mcp_stdio)
    return app
