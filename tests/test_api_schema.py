"""``folio serve``'s OpenAPI schema (what ``/docs`` shows): every JSON route names its response model
(``dataflows.api_models``), and a response is the service's dict as it was (no field dropped, added or
retyped by the model)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.testclient import TestClient

from folio.dataflows.server import create_app
from folio.dataflows.service import Service


def _app(tmp_path: Path) -> FastAPI:
    return create_app(Service(tmp_path / "library"))


def _model_names(schema: dict[str, Any]) -> list[str]:
    """The component models a response schema names (itself, or its array's items)."""
    schema = schema.get("items", schema)
    ref = schema.get("$ref", "")
    return [ref.rpartition("/")[2]] if ref.startswith("#/components/schemas/") else []


def test_every_json_route_names_a_response_model(tmp_path) -> None:
    spec = _app(tmp_path).openapi()
    json_routes, unnamed = 0, []
    for path, methods in spec["paths"].items():
        for method, operation in methods.items():
            for status, response in operation["responses"].items():
                content = response.get("content", {})
                if not status.startswith("2") or "application/json" not in content:
                    continue
                json_routes += 1
                names = _model_names(content["application/json"]["schema"])
                if not names or names[0] not in spec["components"]["schemas"]:
                    unnamed.append(f"{method.upper()} {path} {status}")
    assert json_routes >= 17 and not unnamed, unnamed
    hit = spec["components"]["schemas"]["Hit"]
    assert {"book_id", "chapter_id", "chunk_id", "start", "end", "score", "text"} <= set(hit["properties"])
    ask = spec["paths"]["/api/ask"]["post"]["responses"]["200"]["content"]["application/json"]["schema"]
    assert _model_names(ask) == ["Answer"]


def test_a_response_is_the_service_dict_as_it_was(tmp_path, monkeypatch) -> None:
    service = Service(tmp_path / "library")
    row = {"book_id": "b1", "title": "T", "author": "A", "authors": ["A"], "source_file": "/x.epub"}
    row |= {"chapters": 2, "chunks": 3, "windows": 1, "series_index": 2, "new_field": {"kept": [1, 2.5]}}
    monkeypatch.setattr(service, "books", lambda _filters: [row])
    chunk = {"book_id": "b1", "chapter_id": "c", "chapter_title": "C", "chunk_id": "k", "start": 0, "end": 4}
    chunk |= {"score": 0, "text": "text"}
    monkeypatch.setattr(service, "chunk", lambda _book, _chunk: chunk)
    client = TestClient(create_app(service), base_url="http://127.0.0.1")
    assert client.get("/api/books").json() == [row]  # nothing dropped, no null filled in
    got = client.get("/api/books/b1/chunks/k")
    assert got.json() == chunk and '"score":0' in got.text  # an integer stays an integer
    monkeypatch.setattr(service, "chunk", lambda _book, _chunk: {**chunk, "start": "not a number"})
    broken = client.get("/api/books/b1/chunks/k")
    assert broken.status_code == 500 and set(broken.json()) == {"error"}  # checked: one line, no traceback
