"""Deadlines: the active deadline of the running work and HTTP clients bounded by it.

``deadline_scope(deadline)`` makes ``deadline`` (a ``nodes.core.types.Deadline``) active for the code run
inside it, in this thread and in the jobs it hands to the fusion pool (their ``contextvars`` are
copied); nested scopes keep the nearer deadline. ``active_deadline()`` is the active one (None outside
any scope): ``dataflows.asking.ask`` opens a scope of ``ask_deadline_seconds`` around the whole graph,
so any client can ``active_deadline().bound(its_timeout)``.

``deadline_client(**httpx_kwargs)`` is an ``httpx.Client`` whose every socket operation (connect, each
write, each read) waits at most the time left to the active deadline, and fails with httpx's
``ConnectTimeout``/``WriteTimeout``/``ReadTimeout`` once it has passed: a server that trickles one byte
a second cannot hold a call past its deadline (httpx's own timeouts are per operation). Callers open a
scope per call (``deadline_scope(Deadline.after(timeout))``) so each call has an overall deadline,
nested inside the ask's.

Limitations: name resolution (``getaddrinfo``) is not bounded (an IP address or ``localhost`` is
instant); only plain sockets are bounded through httpcore's network backend (no proxies: a client
built here ignores proxy environment variables).
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import httpcore
import httpx

from folio.nodes.core.types import Deadline

_ACTIVE: contextvars.ContextVar[Deadline | None] = contextvars.ContextVar("folio_deadline", default=None)


def active_deadline() -> Deadline | None:
    """The deadline of the work running in this context, or None."""
    return _ACTIVE.get()


@contextmanager
def deadline_scope(deadline: Deadline | None) -> Iterator[Deadline | None]:
    """Run the block under ``deadline`` (or the active one, when that is nearer); None changes nothing."""
    current = _ACTIVE.get()
    nearer = current if deadline is None or (current is not None and current.at <= deadline.at) else deadline
    token = _ACTIVE.set(nearer)
    try:
        yield nearer
    finally:
        _ACTIVE.reset(token)


def _bounded(timeout: float | None, error: type[Exception]) -> float | None:
    """``timeout`` cut to the active deadline; ``error`` once it has passed."""
    deadline = _ACTIVE.get()
    if deadline is None:
        return timeout
    left = deadline.at - time.monotonic()
    if left <= 0:
        raise error(f"deadline of {deadline.seconds:g} s passed")
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore.NetworkStream):
    def __init__(self, stream: httpcore.NetworkStream) -> None:
        self._stream = stream

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, _bounded(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, _bounded(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> Any:
        tls = self._stream.start_tls(ssl_context, server_hostname, _bounded(timeout, httpcore.ConnectTimeout))
        return _DeadlineStream(tls)

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class _DeadlineBackend(httpcore.NetworkBackend):
    def __init__(self) -> None:
        self._backend = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        bounded = _bounded(timeout, httpcore.ConnectTimeout)
        return _DeadlineStream(self._backend.connect_tcp(host, port, bounded, local_address, socket_options))

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.NetworkStream:
        bounded = _bounded(timeout, httpcore.ConnectTimeout)
        return _DeadlineStream(self._backend.connect_unix_socket(path, bounded, socket_options))

    def sleep(self, seconds: float) -> None:
        self._backend.sleep(seconds)


class _DeadlineTransport(httpx.HTTPTransport):
    """httpx's transport over a connection pool whose sockets obey the active deadline."""

    def __init__(self) -> None:
        super().__init__()
        self._pool = httpcore.ConnectionPool(
            ssl_context=httpx.create_ssl_context(), network_backend=_DeadlineBackend()
        )


def deadline_client(**kwargs: Any) -> httpx.Client:
    """An ``httpx.Client`` (``kwargs`` as httpx takes them) bounded by the active deadline."""
    return httpx.Client(transport=_DeadlineTransport(), **kwargs)
