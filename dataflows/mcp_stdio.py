"""MCP always answers: every JSON-RPC frame is screened before the SDK sees it, so each request with an
id gets a reply, over stdio and over streamable HTTP.

    async with screened_stdio() as (read_stream, write_stream): await server.run(read_stream, ...)
    sdk_app.add_middleware(ScreenedFrames)  # the same screening in front of the streamable-HTTP app

The SDK's stdio reader drops a frame it cannot validate (it logs it; the client waits forever), and its
writer cannot encode a lone surrogate. ``screen(line)`` decides each frame first:

- not UTF-8, or not JSON: a parse error reply (``-32700``, ``id: null``), as JSON-RPC 2.0 says;
- JSON but not one request object (an array, a string, no ``method``, a bad ``jsonrpc``): invalid
  request (``-32600``), with the frame's id when it has one;
- a request whose ``params`` is not an object, or whose strings hold a lone surrogate (invalid UTF-16:
  what a client sends after cutting an emoji in half), or that the SDK's message model refuses:
  invalid params (``-32602``) with its id;
- longer than ``MAX_FRAME_BYTES``: invalid request (``-32600``), with the id found at its start (the
  frame itself is skipped without being held whole in memory);
- anything else goes to the SDK unchanged (unknown methods get its own ``-32601``).

A notification (no id) that fails the screen is dropped, as the spec says (nothing to answer).

Over stdio, fd 0 and fd 1 point at the null device and at stderr while serving (a child process reads
EOF, a stray print misses the wire, as the SDK's own transport does) and the protocol uses private
duplicates; at the end of input the requests already passed on are answered before the server ends. Over
HTTP, ``ScreenedFrames`` reads a POST's body (bounded by ``MAX_FRAME_BYTES``), and answers a frame that
fails the screen itself, ``200`` with the JSON-RPC error (``400`` for a parse error, as the SDK does).

Config: none. Limitations: a batch (a JSON array, dropped from MCP in 2025-06-18) is answered with one
invalid-request error; the id of an oversized frame is found only in its first ``ID_PROBE_BYTES``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import AsyncIterator
from typing import Any

import anyio
import anyio.to_thread
import mcp_types as types
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage

MAX_FRAME_BYTES = 4 * 2**20  # the longest JSON-RPC frame read (a question is at most 2,000 characters)
ID_PROBE_BYTES = 4096  # where the id of an oversized frame is looked for
DRAIN_S = 600.0  # at the end of input, how long the requests in flight may still take to answer
_ID_AT_START = re.compile(rb'"id"\s*:\s*(-?\d{1,18}|"(?:[^"\\]|\\.){0,200}")')


def error_reply(request_id: Any, code: int, message: str) -> dict[str, Any]:
    """A JSON-RPC error object for ``request_id`` (None: the request could not be read)."""
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


def _has_lone_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(value, dict):
        return any(_has_lone_surrogate(k) or _has_lone_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_lone_surrogate(v) for v in value)
    return False


def _valid_id(value: Any) -> bool:
    return isinstance(value, str | int) and not isinstance(value, bool)


def screen(line: bytes) -> dict[str, Any] | None:
    """The error reply a frame gets instead of reaching the SDK, or None when it may go on. A frame
    without an id that fails gets ``{}`` (nothing to answer)."""
    try:
        frame = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        return error_reply(None, types.PARSE_ERROR, f"Parse error: {' '.join(str(exc).split())[:200]}")
    if not isinstance(frame, dict):
        kind = "a batch (array)" if isinstance(frame, list) else f"a JSON {type(frame).__name__}"
        return error_reply(None, types.INVALID_REQUEST, f"Invalid request: one JSON object, not {kind}")
    request_id = frame.get("id") if _valid_id(frame.get("id")) else None
    if frame.get("jsonrpc") != "2.0" or ("method" in frame and not isinstance(frame["method"], str)):
        return error_reply(request_id, types.INVALID_REQUEST, 'Invalid request: needs "jsonrpc": "2.0"')
    is_request = "method" in frame and "id" in frame
    if "id" in frame and not _valid_id(frame["id"]):
        return error_reply(None, types.INVALID_REQUEST, "Invalid request: the id must be a string or number")
    problem = None
    if "params" in frame and not isinstance(frame["params"], dict):
        problem = (types.INVALID_PARAMS, "Invalid params: params must be an object")
    elif _has_lone_surrogate(frame):
        problem = (types.INVALID_PARAMS, "Invalid params: a string holds a lone surrogate (invalid UTF-16)")
    else:
        try:
            types.jsonrpc_message_adapter.validate_python(frame, by_name=False)
        except Exception as exc:  # pydantic's ValidationError: the SDK would drop the frame
            first = " ".join(str(exc).split())[:200]
            problem = (types.INVALID_REQUEST, f"Invalid request: {first}")
    if problem is None:
        return None
    if not is_request:
        return {} if "method" in frame else None  # a notification: dropped; a response: the SDK's
    return error_reply(request_id, *problem)


def oversized_reply(start: bytes) -> dict[str, Any]:
    """The reply to a frame longer than ``MAX_FRAME_BYTES`` whose first bytes are ``start``."""
    found = _ID_AT_START.search(start[:ID_PROBE_BYTES])
    request_id: Any = None
    if found is not None:
        with contextlib.suppress(ValueError):
            request_id = json.loads(found.group(1))
    return error_reply(
        request_id, types.INVALID_REQUEST, f"Invalid request: longer than {MAX_FRAME_BYTES:,} bytes"
    )


# --- stdio ------------------------------------------------------------------------------------------------
def _key(request_id: Any) -> str:
    return json.dumps(request_id)


class _Wire:
    """The protocol's output: a private duplicate of fd 1 (fd 1 itself points at stderr meanwhile); it
    notes the id of each reply written, so the end of input can wait for the requests in flight."""

    def __init__(self, fd: int) -> None:
        self._file = os.fdopen(fd, "wb", closefd=True)
        self.pending: set[str] = set()

    async def write(self, text: str) -> None:
        with contextlib.suppress(ValueError, AttributeError):
            self.pending.discard(_key(json.loads(text).get("id")))
        data = text.encode("utf-8", "backslashreplace")
        await anyio.to_thread.run_sync(self._file.write, data)

    async def flush(self) -> None:
        await anyio.to_thread.run_sync(self._file.flush)

    async def drained(self, seconds: float) -> None:
        """Wait (at most ``seconds``) until every request passed on has been answered."""
        with anyio.move_on_after(seconds):
            while self.pending:
                await anyio.sleep(0.05)

    def close(self) -> None:
        self._file.close()


class _Lines:
    """The client's frames, one bounded line at a time, from a private duplicate of fd 0; the frames
    that fail the screen are answered (through the write stream) instead of passed on. At the end of
    input it waits for the replies of the requests passed on (at most ``DRAIN_S``), then ends."""

    def __init__(self, fd: int, wire: _Wire) -> None:
        self._file = os.fdopen(fd, "rb", buffering=2**16, closefd=True)
        self.wire = wire
        self.write_stream: Any = None
        self.ready = anyio.Event()

    async def _readline(self) -> bytes:
        limit = MAX_FRAME_BYTES + 1
        return await anyio.to_thread.run_sync(self._file.readline, limit, abandon_on_cancel=True)

    async def _reply(self, reply: dict[str, Any]) -> None:
        await self.ready.wait()
        message = types.jsonrpc_message_adapter.validate_python(reply, by_name=False)
        await self.write_stream.send(SessionMessage(message))

    def __aiter__(self) -> AsyncIterator[str]:
        return self._frames()

    async def _frames(self) -> AsyncIterator[str]:
        while line := await self._readline():
            if len(line) > MAX_FRAME_BYTES and not line.endswith(b"\n"):
                start = line
                while (rest := await self._readline()) and not rest.endswith(b"\n"):
                    pass  # the rest of the oversized frame, skipped
                await self._reply(oversized_reply(start))
                continue
            if not line.strip():
                continue
            reply = screen(line)
            if reply is None:
                frame = json.loads(line)
                if isinstance(frame, dict) and "method" in frame and "id" in frame:
                    self.wire.pending.add(_key(frame["id"]))
                yield line.decode("utf-8")
            elif reply:
                await self._reply(reply)
        await self.wire.drained(DRAIN_S)

    def close(self) -> None:
        self._file.close()


def _divert(fd: int, to: int) -> int:
    """A private duplicate of ``fd`` (above the standard range); ``fd`` then points at ``to``."""
    import fcntl

    private = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    os.dup2(to, fd)
    return private


@contextlib.asynccontextmanager
async def screened_stdio() -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's stdio transport with every frame screened first (see the module docstring): fd 0 and
    fd 1 point at the null device and at stderr while it serves, the protocol uses private copies."""
    devnull = os.open(os.devnull, os.O_RDONLY)
    try:
        stdin_fd, stdout_fd = _divert(0, devnull), _divert(1, 2)
    finally:
        os.close(devnull)
    wire = _Wire(stdout_fd)
    lines = _Lines(stdin_fd, wire)
    try:
        # The SDK annotates anyio.AsyncFile[str], but it only iterates stdin's lines and writes and flushes
        # stdout: _Lines and _Wire are those two, and no AsyncFile can screen frames as they arrive.
        async with stdio_server(stdin=lines, stdout=wire) as (read_stream, write_stream):  # type: ignore[arg-type]
            lines.write_stream = write_stream
            lines.ready.set()
            yield read_stream, write_stream
    finally:
        for fd, private in ((0, stdin_fd), (1, stdout_fd)):
            with contextlib.suppress(OSError):
                os.dup2(private, fd)
        with contextlib.suppress(OSError):
            lines.close()
        with contextlib.suppress(OSError):
            wire.close()


# --- streamable HTTP ----------------------------------------------------------------------------------------
class ScreenedFrames:
    """ASGI middleware for the SDK's streamable-HTTP app: each POSTed frame screened first
    (``app.add_middleware(ScreenedFrames)``)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        body, more, oversized = b"", True, False
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            more = message.get("more_body", False)
            if len(body) > MAX_FRAME_BYTES:
                oversized = True
                body = body[:ID_PROBE_BYTES]
        reply = oversized_reply(body) if oversized else screen(body)
        if reply is None:
            await self.app(scope, _replay(body), send)
            return
        status = 400 if reply.get("error", {}).get("code") == types.PARSE_ERROR else 200
        payload = json.dumps(reply).encode() if reply else b""
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
        await send({"type": "http.response.start", "status": status if reply else 202, "headers": headers})
        await send({"type": "http.response.body", "body": payload})


def _replay(body: bytes) -> Any:
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await anyio.sleep_forever()
        return {"type": "http.disconnect"}  # pragma: no cover - never reached

    return receive
