"""The guards of ``folio serve``: who may talk to it, what it may read, and one error shape.

- **Who** (``host_problem``, ``origin_problem``): every request's ``Host`` header must name the address
  the server listens on or ``localhost`` / ``127.0.0.1`` / ``[::1]`` (any port), else 421; a
  state-changing request (POST, PUT, PATCH, DELETE) that carries an ``Origin`` must come from such a
  host too, else 403. A web page the user visits cannot then reach the API through DNS rebinding (its
  requests carry the page's own host name). A server bound to every address (``0.0.0.0``, ``::``)
  cannot know the names it is reached by: it needs a token anyway (``dataflows.server.bind_token``),
  and the Host check is left to the token there.
- **What** (``ingest_path_problem``): ``POST /api/ingest`` reads only under the folders the person who
  started the server named (``folio serve --books DIR...``; none: ingest over HTTP is off). A path must
  be absolute, and its real path (every symlink followed) must lie inside one of them; the path handed
  to the ingest is that real path, so the file read is the file checked.
- **One error shape** (``install_error_shape``): every 4xx/5xx, Starlette's and FastAPI's own included
  (unknown route 404, wrong method 405, malformed body 400/422, a body nested too deeply to parse), is
  ``{"error": "<one line>"}``.

Config: none (the server passes its bind address and ``--books`` folders). Limitations: a symlink
swapped between the check and the ingest (a race by someone who can already write the allowed folder)
is followed; Host names are compared as given (no DNS lookups); ``/mcp`` keeps the SDK's own checks
besides these.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from folio.nodes.core.types import FolioError

LOCAL_NAMES = ("localhost", "127.0.0.1", "::1")
WILDCARD_BINDS = ("0.0.0.0", "::", "")
STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
MAX_ERROR_CHARS = 500


def one_line(text: object, limit: int = MAX_ERROR_CHARS) -> str:
    """``text`` on one line (whitespace runs collapsed), cut to ``limit`` characters."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def error_response(status: int, message: object) -> JSONResponse:
    """The one error shape: ``{"error": "<one line>"}`` with ``status``."""
    return JSONResponse({"error": one_line(message) or f"HTTP {status}"}, status_code=status)


# --- who may talk to the server ------------------------------------------------------------------------
def allowed_hosts(bind: str) -> frozenset[str] | None:
    """The host names a request may name for a server bound to ``bind`` (lower case, IPv6 without
    brackets), or None for a wildcard bind (every name: the token guards it)."""
    if bind.strip("[]") in WILDCARD_BINDS:
        return None
    return frozenset({bind.strip("[]").lower(), *LOCAL_NAMES})


def _host_name(authority: str) -> str | None:
    """The host of ``name[:port]`` or ``[v6][:port]`` (lower case, no brackets), None when malformed."""
    authority = authority.strip().lower()
    if authority.startswith("["):
        end = authority.find("]")
        rest = authority[end + 1 :]
        if end < 0 or (rest and not (rest.startswith(":") and rest[1:].isdigit())):
            return None
        return authority[1:end]
    name, _, port = authority.partition(":")
    if port and not port.isdigit():
        return None
    return name or None


def host_problem(host_header: str | None, allowed: frozenset[str] | None) -> str | None:
    """Why a request's ``Host`` header is refused (one line), or None when it may pass."""
    if allowed is None:
        return None
    name = _host_name(host_header or "")
    if name is None or name not in allowed:
        served = ", ".join(sorted(allowed))
        return f"Host {host_header!r} is not this server: use one of {served}"
    return None


def origin_problem(method: str, origin: str | None, allowed: frozenset[str] | None) -> str | None:
    """Why a state-changing request's ``Origin`` is refused (one line), or None when it may pass (no
    Origin: not a browser page; a read: the Host check is enough)."""
    if allowed is None or origin is None or method.upper() not in STATE_CHANGING:
        return None
    try:
        name = (urlsplit(origin).hostname or "").lower()
    except ValueError:
        name = ""
    if origin.lower().startswith(("http://", "https://")) and name in allowed:
        return None
    return f"Origin {origin!r} may not change this library: only pages served from this machine may"


# --- what the server may read --------------------------------------------------------------------------
def real_folders(folders: Iterable[str | os.PathLike[str]]) -> tuple[Path, ...]:
    """The allowed folders as real absolute paths; a one-line ``FolioError`` for one that is not a
    folder (checked when the server starts)."""
    out = []
    for folder in folders:
        real = Path(os.path.realpath(Path(folder).expanduser()))
        if not real.is_dir():
            raise FolioError(str(folder), "--books needs a folder that exists")
        out.append(real)
    return tuple(out)


def ingest_path_problem(path: str, roots: Sequence[Path]) -> str | None:
    """Why the server may not read ``path`` (one line), or None when it may."""
    if not roots:
        return "ingest over HTTP is off: start the server with --books DIR to allow a folder"
    if not os.path.isabs(path):
        return f"{path}: give an absolute path inside an allowed folder"
    real = Path(os.path.realpath(path))
    if not any(real == root or real.is_relative_to(root) for root in roots):
        where = real if str(real) != path else path
        return f"{path}: not inside a folder this server may read ({where})"
    return None


class Refused(Exception):
    """A request the guards refuse (403), with its one-line reason."""


def allowed_ingest_paths(paths: Sequence[object], roots: Sequence[Path]) -> list[object]:
    """The real paths of ``paths`` when every one lies inside ``roots``; else ``Refused`` with the first
    refusal (a path that is not a non-empty string is passed on: the service refuses it)."""
    out: list[object] = []
    for path in paths:
        if not isinstance(path, str) or not path.strip():
            out.append(path)
            continue
        problem = ingest_path_problem(path, roots)
        if problem is not None:
            raise Refused(problem)
        out.append(os.path.realpath(path))
    return out


# --- one error shape ---------------------------------------------------------------------------------------
def validation_message(exc: RequestValidationError) -> str:
    """A request validation error as one line: where, then what."""
    errors = exc.errors()
    first = errors[0] if errors else {}
    where = ".".join(str(p) for p in first.get("loc", ()) if p != "body") or "request"
    if first.get("type") == "json_invalid":
        return f"the body is not valid JSON ({first.get('ctx', {}).get('error', 'parse error')})"
    return f"{where}: {first.get('msg', 'invalid request')}"


def install_error_shape(app: FastAPI, status_for: Any) -> None:
    """Make every error of ``app`` one ``{"error": ...}`` line: ``FolioError`` (``status_for`` picks its
    status), validation errors (422), Starlette's own (404, 405, 400 body parse errors) and
    ``Refused`` from the guards (403)."""

    async def folio_error(_request: Request, exc: Exception) -> Any:
        return error_response(status_for(exc), str(exc))

    async def invalid(_request: Request, exc: Exception) -> Any:
        assert isinstance(exc, RequestValidationError)  # registered for that class alone (below)
        return error_response(422, validation_message(exc))

    async def starlette_error(request: Request, exc: Exception) -> Any:
        status = getattr(exc, "status_code", 500)
        detail = getattr(exc, "detail", None) or "error"
        if status == 404 and detail == "Not Found":
            detail = f"no such route: {request.method} {request.url.path}"
        elif status == 405:
            detail = f"{request.method} is not allowed on {request.url.path}"
        response = error_response(status, detail)
        for name, value in (getattr(exc, "headers", None) or {}).items():
            response.headers[name] = value
        return response

    async def refused(_request: Request, exc: Exception) -> Any:
        return error_response(403, str(exc))

    app.add_exception_handler(FolioError, folio_error)
    app.add_exception_handler(RequestValidationError, invalid)
    app.add_exception_handler(StarletteHTTPException, starlette_error)
    app.add_exception_handler(Refused, refused)
