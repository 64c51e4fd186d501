"""nodes/backends/deadlines.py: the active deadline and HTTP clients bounded by it (connect + all reads)."""

from __future__ import annotations

import threading
import time

import httpx
import pytest

from folio.nodes.backends.deadlines import active_deadline, deadline_client, deadline_scope
from folio.nodes.core.types import Deadline
from tests.servers import TricklingHTTPServer, dead_url


def test_nested_scopes_keep_the_nearer_deadline_and_restore_the_outer_one() -> None:
    assert active_deadline() is None
    outer, inner = Deadline.after(5.0), Deadline.after(60.0)
    with deadline_scope(outer):
        with deadline_scope(inner) as active:
            assert active is outer  # the ask's 5 s bound a 60 s per-call deadline
        with deadline_scope(Deadline.after(1.0)) as active:
            assert active is not outer and active is not None and active.seconds == 1.0
        assert active_deadline() is outer
    assert active_deadline() is None


def test_deadline_bounds_a_timeout_and_expires() -> None:
    deadline = Deadline.after(0.2)
    assert 0.0 < deadline.bound(10.0) <= 0.2 and deadline.bound(0.05) == 0.05
    time.sleep(0.25)
    assert deadline.expired() and deadline.remaining() == 0.0 and deadline.bound(None) == 0.0


def test_a_trickling_server_cannot_hold_a_call_past_its_deadline() -> None:
    with TricklingHTTPServer(interval=0.1, gives_up_after=20.0) as server:
        # control: httpx's own timeout is per read, so the same call with a 1 s timeout is still waiting
        plain = httpx.Client(timeout=1.0)
        outcome: list[object] = []
        control = threading.Thread(target=lambda: outcome.append(_get(plain, server.url)), daemon=True)
        control.start()
        client = deadline_client(timeout=1.0)
        started = time.monotonic()
        with deadline_scope(Deadline.after(1.0)), pytest.raises(httpx.TimeoutException):
            client.get(server.url)
        assert time.monotonic() - started < 1.0 + 1.0
        control.join(timeout=1.5)
        assert control.is_alive() and not outcome, "the per-read timeout alone does not stop a trickle"
        plain.close()  # the control thread is a daemon; the server hangs up by itself


def test_an_expired_deadline_fails_the_next_request_at_once() -> None:
    client = deadline_client(timeout=5.0)
    with deadline_scope(Deadline.after(0.0)), pytest.raises(httpx.ConnectTimeout):
        client.get(dead_url())


def _get(client: httpx.Client, url: str) -> object:
    try:
        return client.get(url)
    except httpx.HTTPError as exc:
        return exc
