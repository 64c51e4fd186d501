"""A conversation id on every front end (issue 32, point 16): the HTTP API's ask and the MCP tools share
one session cache per conversation, so a repeated lookup or search is served from it."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from folio.dataflows.mcp_server import tool_specs
from folio.dataflows.server import create_app
from folio.dataflows.service import MAX_CONVERSATIONS, Service
from folio.nodes.core.types import FolioError
from tests.servers import ServedApp

QUESTION = "Who stole the tarts?"


@pytest.fixture(scope="module")
def service(alice_library: Path) -> Service:
    return Service(alice_library, config={"kiwix": "none", "search_mode": "lexical"})  # no model


def test_http_asks_in_one_conversation_share_its_cache(service: Service) -> None:
    with ServedApp(create_app(service)) as running, httpx.Client(base_url=running.url, timeout=120) as c:
        first = c.post("/api/ask", json={"question": QUESTION, "conversation": "c1"}).json()
        again = c.post("/api/ask", json={"question": QUESTION, "conversation": "c1"}).json()
        other = c.post("/api/ask", json={"question": QUESTION, "conversation": "c2"}).json()
        plain = c.post("/api/ask", json={"question": QUESTION}).json()
        bad = c.post("/api/ask", json={"question": QUESTION, "conversation": "x" * 101})
    assert first["conversation"] == "c1" and first["session_cache_hits"] == 0
    assert again["session_cache_hits"] >= 1 and again["answer"] == first["answer"]
    assert other["session_cache_hits"] == 0  # another conversation, another cache
    assert "conversation" not in plain and plain["answer"] == first["answer"]
    assert bad.status_code == 400 and "conversation" in bad.json()["error"]


def test_mcp_tool_calls_in_one_conversation_are_served_from_its_cache(service: Service) -> None:
    search = next(s for s in tool_specs() if s.name == "text_search")
    assert "conversation" in search.input_schema["properties"]
    cache = service.session("m1")
    first = search.run(service, {"query": "tarts", "conversation": "m1"})
    hits = cache.hits
    again = search.run(service, {"query": "tarts", "conversation": "m1"})
    assert again == first and cache.hits == hits + 1  # the repeated call: from the cache
    search.run(service, {"query": "tarts"})
    assert cache.hits == hits + 1  # no conversation: a fresh cache, this one untouched
    ask = next(s for s in tool_specs() if s.name == "ask")
    answer = ask.run(service, {"question": QUESTION, "conversation": "m1"})
    assert answer["conversation"] == "m1"


def test_conversations_are_bounded_and_their_ids_checked(service: Service) -> None:
    first = service.session("oldest")
    for i in range(MAX_CONVERSATIONS):
        service.session(f"bulk-{i}")
    assert service.session("oldest") is not first  # the least recently used was dropped
    with pytest.raises(FolioError):
        service.session("")
