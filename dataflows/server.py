"""``folio serve``: one warm process serving a local HTTP API, the MCP tools and a web page.

    folio serve --library ~/folio [--zim wiki.zim ...] [--host 127.0.0.1] [--port 8765] [--token T]

Routes (JSON in and out; the shapes are the CLI's ``--json`` shapes, declared as Pydantic models in
``dataflows.api_models``; the routes are FastAPI routers in ``dataflows.routes``; the OpenAPI pages
``/docs`` (Swagger UI) and ``/redoc`` load their scripts from this server, ``/docs-assets``, from the
``fastapi-offline`` package):

- ``GET /api/health`` · ``GET /api/version``
- ``POST /api/ask`` ``{"question": "...", "conversation": "ID", "filters": {"author": "..."}}`` → the
  answer with its citations (the optional conversation id shares one session cache across its asks:
  ``dataflows.service``; the filters choose the books; a book citation's ``page`` or ``percent`` locates
  it; ``GET /api/books/{book}/pages/{page}.png?q=QUOTE`` renders a PDF page with the quote marked)
- ``GET /api/search?q=...&mode=hybrid&k=10&book=ID&chapter=ID`` → hits
- ``GET /api/books`` · ``GET /api/books/{book}`` (its row and chapters) · ``DELETE /api/books/{book}``
  (a remove job; an exact id or a unique prefix of 4 characters or more; ``?dry_run=true``: what would
  go) ·
  ``GET /api/books/{book}/chapters/{chapter_id}`` · ``GET /api/books/{book}/chunks/{chunk_id}``
- book filters (``dataflows.filtering``): ``author``, ``series``, ``tag``, ``language``, ``format`` as query
  parameters of ``/api/books`` and ``/api/search``, and as the ``filters`` object of ``/api/ask``
- ``GET /api/concepts?q=...&book=ID&k=10``
- ``GET /api/kiwix/books`` · ``GET /api/kiwix/search?q=...`` · ``GET /api/kiwix/article?book=B&path=P``
- ``POST /api/ingest`` ``{"paths": ["/abs/book.epub", "/abs/folder/"]}`` (files under the folders of
  ``--books DIR...``, else 403; no ``--books``: ingest over HTTP is off) → a job (202) ·
  ``GET /api/jobs`` · ``GET /api/jobs/{id}`` · ``GET /api/jobs/{id}/events`` (server-sent events until
  it ends)
- ``/mcp``: the MCP tools over streamable HTTP (``dataflows.mcp_server``) · ``/``: the web page

Errors are ``{"error": "<one line>"}`` naming the JSON field or query parameter at fault (never a CLI
flag; a body that is not JSON says so), with 400 (bad request), 401 (token), 403 (a path outside the
allowed folders, a foreign Origin), 404 (no such book, chapter, chunk, job, article or route), 405,
413 (body too large), 421 (a Host that is not this server), 422 (malformed body) or 500 (a bug: logged
in one line, never a traceback); ``dataflows.http_guard`` holds these checks. A loopback bind needs
no token; any other address requires one (``--token`` or ``$FOLIO_TOKEN``), checked on every request
as ``Authorization: Bearer T``, ``X-Folio-Token: T`` or
``?token=T`` (the page's link).

Limitations: no TLS (put a reverse proxy in front for anything beyond the machine); one library per
process; requests are answered on a thread pool (``THREADS``), so CPU-bound asks share the GIL.
"""

from __future__ import annotations

import contextlib
import functools
import hmac
import ipaddress
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from importlib import resources
from typing import Any
from urllib.parse import urlencode

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from folio.dataflows.http_guard import (
    allowed_hosts,
    error_response,
    host_problem,
    install_error_shape,
    origin_problem,
    real_folders,
)
from folio.dataflows.routes import ROUTERS
from folio.dataflows.service import Service, version
from folio.nodes.core.types import FolioError

DOCS_ASSETS = "/docs-assets"  # where the Swagger UI and ReDoc scripts are served from (no CDN)
MAX_BODY_BYTES = 64 * 1024  # the largest request body accepted
THREADS = 16  # worker threads for the blocking operations
DEFAULT_PORT = 8765

log = logging.getLogger("folio.serve")


def needs_token(host: str) -> bool:
    """A bind address reachable from other machines needs a token (loopback and "localhost" do not)."""
    if host == "localhost":
        return False
    try:
        return not ipaddress.ip_address(host).is_loopback
    except ValueError:
        return True  # a host name: it may resolve to anything


def bind_token(host: str, token: str | None) -> str | None:
    """The token to require (``token``, else ``$FOLIO_TOKEN``, else None); a one-line error when the
    bind address needs one and there is none."""
    token = token or os.environ.get("FOLIO_TOKEN") or None
    if needs_token(host) and not token:
        raise FolioError(
            f"--host {host}", "serving beyond this machine needs a token: --token T or $FOLIO_TOKEN"
        )
    return token


def check_port(host: str, port: int) -> None:
    """A one-line error, before anything loads, when ``host:port`` cannot be bound (in use, no rights)."""
    import socket

    try:
        with socket.create_server((host, port)):
            pass
    except OSError as exc:
        reason = os.strerror(exc.errno) if exc.errno else str(exc)
        raise FolioError(f"--port {port}", f"cannot listen on {host}:{port}: {reason}") from None


def status_for(error: FolioError) -> int:
    """The HTTP status of a one-line Folio error: 404 for what does not exist, else 400."""
    return 404 if error.reason.startswith("no such") else 400


def http_message(error: FolioError) -> str:
    """A Folio error in HTTP words: a CLI flag it names (``--mode``) becomes the parameter (``mode``)."""
    flag = error.source
    if not flag.startswith("-") or flag.startswith("---") or " " in flag.strip():
        return str(error)
    return f"{flag.lstrip('-').replace('-', '_')}: {error.reason}"


def validation_message(errors: Sequence[Mapping[str, Any]]) -> str:
    """FastAPI's first validation error as one line a person understands: a body that is not JSON says
    so (with where it breaks); otherwise the JSON field or query parameter at fault and why."""
    first = errors[0] if errors else {}
    if first.get("type") == "json_invalid":
        reason = str((first.get("ctx") or {}).get("error", "")).strip()
        return "the request body is not valid JSON" + (f" ({reason})" if reason else "")
    loc = [str(p) for p in first.get("loc", ())]
    kind = {"body": "JSON field", "query": "query parameter", "path": "path part"}.get(loc[0] if loc else "")
    where = ".".join(loc[1:]) if kind else ".".join(loc)
    message = str(first.get("msg", "invalid request"))
    return f"{where}: {message}" + (f" ({kind})" if kind and where else "") if where else message


def _error(status: int, message: str) -> JSONResponse:
    return error_response(status, message)


def _page() -> str:
    return resources.files("folio.dataflows").joinpath("web/index.html").read_text(encoding="utf-8")


def _guard(
    token: str | None, hosts: frozenset[str] | None
) -> Callable[[Request, Callable[[Request], Awaitable[Any]]], Awaitable[Any]]:
    """The middleware every request passes: its Host and Origin, the token, the body's size; a bug
    below it is one line in the log and a 500, never a traceback."""

    async def guard(request: Request, call_next: Callable[[Request], Awaitable[Any]]) -> Any:
        if (why := host_problem(request.headers.get("host"), hosts)) is not None:
            return _error(421, why)
        if (why := origin_problem(request.method, request.headers.get("origin"), hosts)) is not None:
            return _error(403, why)
        if token is not None and not request.url.path.startswith(DOCS_ASSETS + "/"):  # public files
            given = request.headers.get("x-folio-token") or request.query_params.get("token") or ""
            auth = request.headers.get("authorization", "")
            if auth.lower().startswith("bearer "):
                given = auth[7:].strip()
            if not hmac.compare_digest(given.encode(), token.encode()):
                return _error(401, "a valid token is required (Authorization: Bearer TOKEN)")
        length = request.headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > MAX_BODY_BYTES):
            return _error(413, f"request body too large (the limit is {MAX_BODY_BYTES:,} bytes)")
        if length is None and request.headers.get("transfer-encoding", "").lower() == "chunked":
            return _error(411, "send a Content-Length with the body")
        try:
            return await call_next(request)
        except Exception as exc:  # a bug: one line in the log and to the client, never a traceback
            log.error("folio serve: %s %s: %s: %s", request.method, request.url.path, type(exc).__name__, exc)
            return _error(500, f"internal error: {type(exc).__name__}: {exc}")

    return guard


def create_app(
    service: Service,
    token: str | None = None,
    host: str = "127.0.0.1",
    books: Sequence[str | os.PathLike[str]] = (),
) -> FastAPI:
    """The FastAPI application over ``service``; ``token``, when set, is required on every request;
    ``host`` is the bind address (requests must name it or a loopback name: ``dataflows.http_guard``);
    ``books``: the folders ``POST /api/ingest`` may read (none: ingest over HTTP is off)."""
    mcp_app = _mcp_app(service, host)
    hosts = allowed_hosts(host)
    roots = real_folders(books)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        import anyio.to_thread

        anyio.to_thread.current_default_thread_limiter().total_tokens = THREADS
        await run_in_threadpool(service.warm)
        if mcp_app is None:
            yield
        else:
            async with mcp_app.router.lifespan_context(mcp_app):
                yield

    app = FastAPI(
        title="Folio",
        version=version(),
        description="Offline question answering over your books and Kiwix archives, with citations.",
        lifespan=lifespan,
        docs_url=None,  # served by _offline_docs, from this machine
        redoc_url=None,
    )

    app.state.service = service
    app.state.ingest_roots = roots
    app.middleware("http")(_guard(token, hosts))
    install_error_shape(app, status_for)  # every 4xx/5xx is {"error": one line}

    @app.exception_handler(FolioError)
    async def folio_error(_request: Request, exc: FolioError) -> Any:
        return _error(status_for(exc), http_message(exc))

    @app.exception_handler(RequestValidationError)
    async def invalid(_request: Request, exc: RequestValidationError) -> Any:
        return _error(422, validation_message(exc.errors()))

    _offline_docs(app)

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def page() -> str:
        return _page()

    for router in ROUTERS:
        app.include_router(router)
    if mcp_app is not None:
        app.mount("/mcp", mcp_app)
    return app


DOCS_ASSET_TYPES = {"js": "text/javascript", "css": "text/css", "png": "image/png"}
_CDN_LOGO = b"https://cdn.redoc.ly/redoc/logo-mini.svg"  # ReDoc's footer logo, the one URL it fetches


@functools.cache
def docs_asset_bytes(name: str) -> bytes | None:
    """One file of the ``fastapi-offline`` package's Swagger UI and ReDoc assets (None when there is no
    such file), ReDoc's one CDN reference pointed at the local icon."""
    static = resources.files("fastapi_offline") / "static"
    if name not in {p.name for p in static.iterdir()} or name.rpartition(".")[2] not in DOCS_ASSET_TYPES:
        return None
    data = (static / name).read_bytes()
    return data.replace(_CDN_LOGO, f"{DOCS_ASSETS}/favicon.png".encode())


def _offline_docs(app: FastAPI) -> None:
    """``/docs`` (Swagger UI) and ``/redoc`` with their scripts, styles and icon served from
    ``DOCS_ASSETS`` (the files of the ``fastapi-offline`` package): no request leaves the machine."""
    from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
    from fastapi.responses import Response

    @app.get(DOCS_ASSETS + "/{name}", include_in_schema=False)
    async def docs_asset(name: str) -> Response:
        found = docs_asset_bytes(name)
        if found is None:
            return _error(404, f"{name}: no such file")
        return Response(found, media_type=DOCS_ASSET_TYPES[name.rpartition(".")[2]])

    def spec_url(request: Request) -> str:  # the page's ?token= goes on to the schema it loads
        given = request.query_params.get("token")
        return str(app.openapi_url) + (f"?{urlencode({'token': given})}" if given else "")

    @app.get("/docs", include_in_schema=False)
    async def swagger_page(request: Request) -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=spec_url(request),
            title=f"{app.title} API",
            swagger_js_url=f"{DOCS_ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{DOCS_ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{DOCS_ASSETS}/favicon.png",
            swagger_ui_parameters={"validatorUrl": None},  # no badge fetched from validator.swagger.io
        )

    @app.get("/redoc", include_in_schema=False)
    async def redoc_page(request: Request) -> HTMLResponse:
        return get_redoc_html(
            openapi_url=spec_url(request),
            title=f"{app.title} API",
            redoc_js_url=f"{DOCS_ASSETS}/redoc.standalone.js",
            redoc_favicon_url=f"{DOCS_ASSETS}/favicon.png",
            with_google_fonts=False,
        )


def _mcp_app(service: Service, host: str) -> Any:
    """The MCP tools as a streamable-HTTP ASGI app (None when the MCP server module is absent)."""
    try:
        from folio.dataflows.mcp_server import http_app
    except ImportError:  # pragma: no cover - the module ships with Folio
        return None
    return http_app(service, host)


def serve(
    service: Service,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    token: str | None = None,
    log_level: str = "warning",
    books: Sequence[str | os.PathLike[str]] = (),
) -> None:
    """Serve ``service`` on ``host:port`` until interrupted (uvicorn, one process); ``books``: the
    folders ``POST /api/ingest`` may read."""
    import uvicorn

    app = create_app(service, bind_token(host, token), host, books)
    print(f"folio: serving {service.library.path} on http://{host}:{port}/ (Ctrl-C stops)", flush=True)
    uvicorn.run(app, host=host, port=port, log_level=log_level, access_log=False)
