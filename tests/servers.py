"""Local test servers: a real kiwix-serve, a scripted OpenAI-compatible server and a slow HTTP server.

Every server listens on 127.0.0.1 on a free port and is a context manager; nothing leaves the machine.

- ``start_kiwix_serve(zim_paths) -> KiwixServe``: runs ``kiwix-serve`` (skips the test when it is not
  installed), waits until its catalog answers; ``stop()`` kills it by PID.
- ``ScriptedLLMServer(script)``: ``/v1/chat/completions`` answers from a queue of ``Reply`` values and
  records every request body; ``/v1/models`` lists one model. ``url`` ends in ``/v1``.
- ``SlowHTTPServer(delay)``: answers every GET after ``delay`` seconds (timeout tests).
- ``TricklingHTTPServer(interval, gives_up_after)``: answers every GET one header byte per ``interval``
  seconds, never finishing, and hangs up by itself after ``gives_up_after`` seconds (deadline tests).
- ``dead_url()``: a URL on which nothing listens (connection refused).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self

import pytest

from bench.measuring import free_port, wait_until_answering

KIWIX_SERVE = "kiwix-serve"


def dead_url() -> str:
    """A base URL whose port refuses connections."""
    return f"http://127.0.0.1:{free_port()}"


# --- kiwix-serve ----------------------------------------------------------------------------------


def stop_by_pid(process: subprocess.Popen[bytes], wait_seconds: float) -> None:
    """SIGTERM a server started by a test (by its PID), SIGKILL it if it has not exited in
    ``wait_seconds``, and reap it."""
    if process.poll() is None:
        os.kill(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=wait_seconds)
        except subprocess.TimeoutExpired:
            os.kill(process.pid, signal.SIGKILL)
            process.wait(timeout=wait_seconds)


@dataclass
class KiwixServe:
    """A running kiwix-serve process."""

    url: str
    pid: int
    process: subprocess.Popen[bytes] = field(repr=False)

    def stop(self) -> None:
        """Kill the server (by its PID) and wait for it to exit."""
        stop_by_pid(self.process, 5)

    def __enter__(self) -> KiwixServe:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def kiwix_serve_binary() -> str | None:
    """The path of the ``kiwix-serve`` executable, or ``None``."""
    return shutil.which(KIWIX_SERVE)


def start_kiwix_serve(zim_paths: Sequence[str | os.PathLike[str]], wait_seconds: float = 20.0) -> KiwixServe:
    """Start ``kiwix-serve --address=127.0.0.1 --port=P ZIM...`` and wait until its catalog answers.

    Skips the calling test when kiwix-serve is not installed. The server is attached to this process
    (``--attachToProcess``), so it also exits if the test run dies.
    """
    binary = kiwix_serve_binary()
    if binary is None:
        pytest.skip("kiwix-serve is not installed (Debian/Ubuntu: apt-get install kiwix-tools)")
    port = free_port()
    args = [
        binary,
        "--address=127.0.0.1",
        f"--port={port}",
        f"--attachToProcess={os.getpid()}",
        *[str(Path(p)) for p in zim_paths],
    ]
    process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    server = KiwixServe(url=f"http://127.0.0.1:{port}", pid=process.pid, process=process)
    state = wait_until_answering(process, f"{server.url}/catalog/v2/entries", wait_seconds, interval=0.1)
    if state == "exited":
        stderr = process.stderr.read().decode("utf-8", "replace") if process.stderr else ""
        raise RuntimeError(f"kiwix-serve exited with {process.returncode}: {stderr.strip()[-500:]}")
    if state == "silent":
        server.stop()
        raise RuntimeError(f"kiwix-serve did not answer on {server.url} within {wait_seconds:g} s")
    return server


# --- scripted OpenAI-compatible server ------------------------------------------------------------


@dataclass(frozen=True)
class Reply:
    """One scripted answer of the fake LLM server; build it with the class methods."""

    content: str | None = None
    tool_calls: tuple[dict[str, Any], ...] = ()
    delay: float = 0.0
    status: int = 200
    body: str | None = None  # raw response body, sent as is (malformed JSON tests)
    headers: tuple[tuple[str, str], ...] = ()  # extra response headers (Retry-After)
    trickle: float = 0.0  # seconds between the body's bytes (a server that trickles)
    finish_reason: str | None = None  # default: "tool_calls" with tool calls, else "stop"

    @classmethod
    def answer(cls, content: str | dict[str, Any] | list[Any], delay: float = 0.0) -> Reply:
        """Answer with this content (a dict or list is serialised to JSON), after ``delay`` seconds."""
        text = content if isinstance(content, str) else json.dumps(content)
        return cls(content=text, delay=delay)

    @classmethod
    def tools(cls, *calls: tuple[str, dict[str, Any] | str], content: str | None = None) -> Reply:
        """Ask for tool calls, each ``(name, arguments)``; arguments dicts are serialised to JSON."""
        return cls(
            content=content,
            tool_calls=tuple(
                {
                    "id": f"call_{i}",
                    "type": "function",
                    "function": {
                        "name": name,
                        "arguments": args if isinstance(args, str) else json.dumps(args),
                    },
                }
                for i, (name, args) in enumerate(calls)
            ),
        )

    @classmethod
    def fail(cls, status: int, message: str = "scripted failure") -> Reply:
        """Answer with an HTTP error and an OpenAI-style error body."""
        return cls(status=status, body=json.dumps({"error": {"message": message, "type": "scripted"}}))

    @classmethod
    def slow(cls, seconds: float, content: str | dict[str, Any] = "late") -> Reply:
        """Wait ``seconds`` before answering (timeout tests)."""
        return cls.answer(content, delay=seconds)

    @classmethod
    def malformed(cls, body: str = '{"choices": [ this is not json') -> Reply:
        """Answer 200 with a body that is not valid JSON."""
        return cls(body=body)


class _BackgroundServer:
    """A ``ThreadingHTTPServer`` on a free 127.0.0.1 port, served by a daemon thread; ``url`` is its base
    URL; a context manager that stops it."""

    _server: ThreadingHTTPServer

    def _serve(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._server.block_on_close = False
        threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ScriptedLLMServer(_BackgroundServer):
    """An OpenAI-compatible chat server that replays a script.

    Args:
        script: replies in order (a str or dict is ``Reply.answer``); more can be added with ``push``.
        model: the model id listed at ``/v1/models`` and echoed in answers.

    When the script is empty a request gets HTTP 500 "script exhausted", which a test notices.
    ``requests`` holds every chat request body (parsed JSON), ``headers`` their headers.
    """

    def __init__(
        self, script: Iterable[Reply | str | dict[str, Any]] = (), model: str = "scripted-model"
    ) -> None:
        self.model = model
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self._script: deque[Reply] = deque()
        self._lock = threading.Lock()
        self.push(*script)
        self._serve(self._handler())

    @property
    def url(self) -> str:
        """The API base URL, ending in ``/v1``."""
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    @property
    def remaining(self) -> int:
        """Replies not yet used."""
        with self._lock:
            return len(self._script)

    def push(self, *replies: Reply | str | dict[str, Any]) -> None:
        """Append replies to the script."""
        with self._lock:
            self._script.extend(r if isinstance(r, Reply) else Reply.answer(r) for r in replies)

    def _next(self, request: dict[str, Any], headers: dict[str, str]) -> Reply | None:
        with self._lock:
            self.requests.append(request)
            self.headers.append(headers)
            return self._script.popleft() if self._script else None

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _send(self, status: int, body: str, reply: Reply | None = None) -> None:
                data = body.encode("utf-8")
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for name, value in reply.headers if reply else ():
                        self.send_header(name, value)
                    self.end_headers()
                    if reply is not None and reply.trickle:
                        for i in range(len(data)):
                            self.wfile.write(data[i : i + 1])
                            self.wfile.flush()
                            time.sleep(reply.trickle)
                    else:
                        self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout tests)

            def do_GET(self) -> None:
                if self.path.rstrip("/") == "/v1/models":
                    self._send(
                        200, json.dumps({"object": "list", "data": [{"id": server.model, "object": "model"}]})
                    )
                else:
                    self._send(404, json.dumps({"error": {"message": f"no route {self.path}"}}))

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length).decode("utf-8", "replace")
                if self.path.rstrip("/") != "/v1/chat/completions":
                    self._send(404, json.dumps({"error": {"message": f"no route {self.path}"}}))
                    return
                try:
                    request = json.loads(raw)
                except json.JSONDecodeError:
                    request = {"_unparsed": raw}
                reply = server._next(request, {k.lower(): v for k, v in self.headers.items()})
                if reply is None:
                    self._send(500, json.dumps({"error": {"message": "script exhausted"}}))
                    return
                if reply.delay:
                    time.sleep(reply.delay)
                if reply.body is not None:
                    self._send(reply.status, reply.body, reply)
                    return
                message: dict[str, Any] = {"role": "assistant", "content": reply.content}
                if reply.tool_calls:
                    message["tool_calls"] = list(reply.tool_calls)
                body = {
                    "id": f"chatcmpl-{len(server.requests)}",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": request.get("model", server.model),
                    "choices": [
                        {
                            "index": 0,
                            "message": message,
                            "finish_reason": reply.finish_reason
                            or ("tool_calls" if reply.tool_calls else "stop"),
                        }
                    ],
                    "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
                }
                self._send(reply.status, json.dumps(body), reply)

        return Handler


# --- slow HTTP server -----------------------------------------------------------------------------


class SlowHTTPServer(_BackgroundServer):
    """Answers every GET with ``200 <body>`` after ``delay`` seconds; ``url`` is its base URL."""

    def __init__(self, delay: float, body: str = "<feed></feed>") -> None:
        self.delay = delay
        self.hits = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                outer.hits += 1
                time.sleep(outer.delay)
                data = body.encode("utf-8")
                try:
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self._serve(Handler)


class TricklingHTTPServer(_BackgroundServer):
    """Answers every GET with a header that never ends, one byte every ``interval`` seconds (each read
    of the client gets data, so a per-read timeout never fires); hangs up after ``gives_up_after``
    seconds, so it stops by itself. ``url`` is its base URL; ``hits`` counts the requests."""

    def __init__(self, interval: float = 0.1, gives_up_after: float = 30.0) -> None:
        self.hits = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                outer.hits += 1
                stream = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Trickle: " + b"a" * 100_000
                ends = time.monotonic() + gives_up_after
                try:
                    for byte in stream:
                        if time.monotonic() > ends:
                            break
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                        time.sleep(interval)
                except (BrokenPipeError, ConnectionResetError):
                    pass
                self.close_connection = True

        self._serve(Handler)


# --- Folio's own HTTP server (folio serve) ---------------------------------------------------------


class ServedApp:
    """An ASGI app served by a real uvicorn on 127.0.0.1 in a thread of this process (its lifespan
    included); ``url`` is its base URL. ``stop()`` asks uvicorn to exit and joins the thread."""

    def __init__(self, app: Any, wait_seconds: float = 60.0) -> None:
        import uvicorn

        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name="uvicorn-test", daemon=True)
        self.thread.start()
        deadline = time.monotonic() + wait_seconds
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"uvicorn did not start on {self.url}")
            time.sleep(0.05)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)

    def __enter__(self) -> ServedApp:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
