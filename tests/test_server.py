"""``folio serve``: every HTTP endpoint against a real uvicorn on 127.0.0.1, the token rule, bad requests
(4xx with one line), ingest/remove jobs with progress, and concurrent asks while the library changes."""

from __future__ import annotations

import concurrent.futures
import json
import shutil
import socket
import subprocess
import sys
import time

import httpx
import pytest

from bench.scaling import small_books, write_book_files
from folio.dataflows import server as server_module
from folio.dataflows.server import bind_token, create_app, needs_token, status_for
from folio.dataflows.service import MAX_QUESTION_CHARS, Service
from folio.nodes.core.types import FolioError
from tests.conftest import REPO_DIR, ZIMS
from tests.servers import ServedApp

ZIM = ZIMS / "wikipedia_en_ray_charles_mini_2020-03.zim"


def _one_line_error(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"}
    assert "\n" not in body["error"] and "Traceback" not in body["error"]
    return body["error"]


# --- pure helpers ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("host", "needed"),
    [("127.0.0.1", False), ("::1", False), ("localhost", False), ("0.0.0.0", True), ("192.168.1.4", True)],
)
def test_only_loopback_binds_go_without_a_token(host: str, needed: bool) -> None:
    assert needs_token(host) is needed


def test_a_public_bind_without_a_token_is_refused_and_the_environment_token_counts(monkeypatch) -> None:
    monkeypatch.delenv("FOLIO_TOKEN", raising=False)
    with pytest.raises(FolioError, match="needs a token"):
        bind_token("0.0.0.0", None)
    assert bind_token("127.0.0.1", None) is None
    monkeypatch.setenv("FOLIO_TOKEN", "from-env")
    assert bind_token("0.0.0.0", None) == "from-env"
    assert bind_token("0.0.0.0", "given") == "given"


def test_missing_things_are_404_and_the_rest_400() -> None:
    assert status_for(FolioError("x", "no such book in the library")) == 404
    assert status_for(FolioError("question", "must be a non-empty string")) == 400


def test_folio_serve_on_a_public_address_without_token_fails_in_one_line(tmp_path, monkeypatch) -> None:
    env = {"HAMILTON_TELEMETRY_ENABLED": "false", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO_DIR)}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "folio.dataflows.cli",
            "serve",
            "--library",
            str(tmp_path),
            "--host",
            "0.0.0.0",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "folio: --host 0.0.0.0: serving beyond this machine needs a token: --token T or $FOLIO_TOKEN"
    ]


def test_folio_serve_on_a_port_in_use_fails_in_one_line_before_loading(tmp_path) -> None:
    env = {"HAMILTON_TELEMETRY_ENABLED": "false", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO_DIR)}
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "folio.dataflows.cli",
                "serve",
                "--library",
                str(tmp_path),
                "--port",
                str(port),
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"folio: --port {port}: cannot listen on 127.0.0.1:{port}: Address already in use"
    ]


# --- a served library --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def served(alice_library, tmp_path_factory):
    """``folio serve``'s app over a copy of the Alice library with one small Kiwix ZIM, on a real uvicorn."""
    library = tmp_path_factory.mktemp("served") / "library"
    shutil.copytree(alice_library, library)
    service = Service(library, zim_paths=[ZIM])
    with ServedApp(create_app(service)) as running, httpx.Client(base_url=running.url, timeout=60) as client:
        yield client, service


def test_health_and_version_say_what_is_served(served) -> None:
    client, service = served
    health = client.get("/api/health").json()
    assert health["status"] == "ok" and health["books"] == 1 and health["kiwix"] == "libzim"
    assert health["library"] == str(service.library.path)
    assert client.get("/api/version").json()["version"] == health["version"]


def test_books_are_the_cli_json_shape(served) -> None:
    client, service = served
    books = client.get("/api/books").json()
    assert books == service.library.books()
    assert books[0]["title"].startswith("Alice")


def test_ask_answers_with_citations_that_point_into_the_chapter_text(served) -> None:
    client, _ = served
    answer = client.post("/api/ask", json={"question": "What did the Cheshire Cat say to Alice?"}).json()
    assert set(answer) == {"answer", "citations", "route", "sources_used", "tool_calls", "notes"}
    assert "Cat" in answer["answer"] and answer["citations"]
    cite = next(c for c in answer["citations"] if "book_id" in c)
    chapter = client.get(f"/api/books/{cite['book_id']}/chapters/{cite['chapter_id']}").json()
    assert chapter["chapter_title"] == cite["chapter_title"]
    assert chapter["text"][cite["start"] : cite["end"]] == cite["quote"]
    chunk = client.get(f"/api/books/{cite['book_id']}/chunks/{cite['chunk_id']}").json()
    assert chunk["chapter_id"] == cite["chapter_id"] and cite["quote"][:40] in chunk["text"]


@pytest.mark.parametrize("mode", ["lexical", "semantic", "hybrid"])
def test_search_in_each_mode_finds_the_rabbit_hole(served, mode: str) -> None:
    client, _ = served
    hits = client.get("/api/search", params={"q": "down the rabbit hole", "mode": mode, "k": 3}).json()
    assert 1 <= len(hits) <= 3
    assert any("rabbit" in h["text"].lower() for h in hits)
    assert set(hits[0]) == {
        "book_id",
        "book_title",
        "chapter_id",
        "chapter_title",
        "chunk_id",
        "start",
        "end",
        "page",
        "percent",
        "score",
        "text",
    }


def test_search_can_be_scoped_to_chapters(served) -> None:
    client, _ = served
    first = client.get("/api/search", params={"q": "Alice", "mode": "lexical", "k": 5}).json()[0]
    scoped = client.get(
        "/api/search", params={"q": "Alice", "mode": "lexical", "chapter": [first["chapter_id"]]}
    ).json()
    assert scoped and {h["chapter_id"] for h in scoped} == {first["chapter_id"]}


def test_concepts_find_the_white_rabbit(served) -> None:
    client, _ = served
    rows = client.get("/api/concepts", params={"q": "White Rabbit", "k": 3}).json()
    assert rows and any("rabbit" in r["label"].lower() for r in rows)
    assert all(len(r["chapter_titles"]) == len(r["chapter_ids"]) for r in rows)


def test_kiwix_search_and_article_read_the_zim(served) -> None:
    client, _ = served
    books = client.get("/api/kiwix/books").json()
    assert [b["name"] for b in books] == [ZIM.stem]
    result = client.get("/api/kiwix/search", params={"q": "Where was Ray Charles born?"}).json()
    top = result["candidates"][0]
    assert top["book"] == ZIM.stem and "Ray Charles" in top["title"]
    article = client.get("/api/kiwix/article", params={"book": top["book"], "path": top["path"]}).json()
    assert article["title"] == top["title"] and "Charles" in article["text"]
    missing = client.get("/api/kiwix/article", params={"book": ZIM.stem, "path": "A/No_such_article_x"})
    assert "no such article" in _one_line_error(missing, 404)


def test_openapi_page_and_web_page_are_served(served) -> None:
    client, _ = served
    assert client.get("/docs").status_code == 200
    paths = client.get("/openapi.json").json()["paths"]
    assert {"/api/ask", "/api/search", "/api/books", "/api/ingest", "/api/jobs/{job_id}"} <= set(paths)
    page = client.get("/")
    assert page.status_code == 200 and "Folio" in page.text


@pytest.mark.parametrize(
    ("method", "url", "body", "status", "fragment"),
    [
        ("post", "/api/ask", {"question": "   "}, 400, "question: must be a non-empty string"),
        ("post", "/api/ask", {"question": "why " * MAX_QUESTION_CHARS}, 400, "question: too long"),
        ("post", "/api/ask", {}, 422, "question: Field required"),
        ("post", "/api/ask", {"question": 7}, 422, "question"),
        ("get", "/api/search?q=whale&mode=fuzzy", None, 400, "unknown search mode"),
        ("get", "/api/search?q=whale&k=0", None, 400, "k: must be a whole number"),
        ("get", "/api/search?q=whale&k=99999999999999999999", None, 400, "k: must be a whole number"),
        ("get", "/api/search?q=whale&k=ten", None, 422, "k:"),
        ("get", "/api/search", None, 422, "q: Field required"),
        ("get", "/api/search?q=whale&book=no-such-book", None, 404, "no such book"),
        ("get", "/api/books/no-such-book/chapters/ch-1", None, 404, "no such book"),
        ("get", "/api/concepts?q=%00%01", None, 200, None),
        ("get", "/api/jobs/ingest-999", None, 404, "no such job"),
        ("post", "/api/ingest", {"paths": ["/no/such/book.epub"]}, 403, "ingest over HTTP is off"),
        ("post", "/api/ingest", {"paths": []}, 400, "paths: give 1 to"),
        ("delete", "/api/books/no-such-book", None, 404, "no such book"),
    ],
)
def test_bad_requests_get_a_4xx_with_one_line(served, method, url, body, status, fragment) -> None:
    client, _ = served
    response = client.request(method.upper(), url, json=body)
    if fragment is None:  # hostile but valid: answered
        assert response.status_code == status
        return
    assert fragment in _one_line_error(response, status)


def test_a_malformed_or_oversized_body_is_refused(served) -> None:
    client, _ = served
    bad_json = client.post("/api/ask", content=b"{not json", headers={"content-type": "application/json"})
    _one_line_error(bad_json, 422)
    huge = client.post("/api/ask", content=b"x" * (server_module.MAX_BODY_BYTES + 1))
    assert "too large" in _one_line_error(huge, 413)


def test_an_unexpected_failure_is_a_500_with_one_line_and_the_server_goes_on(served, monkeypatch) -> None:
    client, service = served

    def broken(*_args: object) -> list:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(service, "books", broken)
    assert _one_line_error(client.get("/api/books"), 500) == "internal error: RuntimeError: disk on fire"
    monkeypatch.undo()
    assert client.get("/api/books").status_code == 200


# --- the token -----------------------------------------------------------------------------------------
def test_with_a_token_every_request_must_carry_it(alice_library) -> None:
    service = Service(alice_library)
    with ServedApp(create_app(service, token="s3cret")) as running, httpx.Client(base_url=running.url) as c:
        assert "token is required" in _one_line_error(c.get("/api/books"), 401)
        assert "token is required" in _one_line_error(c.get("/"), 401)
        _one_line_error(c.get("/api/books", headers={"Authorization": "Bearer wrong"}), 401)
        assert c.get("/api/books", headers={"Authorization": "Bearer s3cret"}).status_code == 200
        assert c.get("/api/books", headers={"X-Folio-Token": "s3cret"}).status_code == 200
        assert c.get("/", params={"token": "s3cret"}).status_code == 200


# --- jobs and concurrency --------------------------------------------------------------------------------
def _events(client: httpx.Client, job_id: str) -> list[dict]:
    with client.stream("GET", f"/api/jobs/{job_id}/events", timeout=300) as stream:
        return [json.loads(line[5:]) for line in stream.iter_lines() if line.startswith("data:")]


def test_ingest_job_streams_progress_and_remove_job_takes_the_book_away(
    alice_copy, data_dir, tmp_path
) -> None:
    [book] = write_book_files(small_books(data_dir, 1, words=1500), tmp_path / "books")
    service = Service(alice_copy)
    app = create_app(service, books=[tmp_path / "books"])
    with ServedApp(app) as running, httpx.Client(base_url=running.url, timeout=60) as c:
        job = c.post("/api/ingest", json={"paths": [str(book)]})
        assert job.status_code == 202 and job.json()["state"] in ("queued", "running")
        events = _events(c, job.json()["job_id"])
        final = events[-1]
        assert final["state"] == "done", final
        assert final["done"] == final["total"] > 0 and final["fraction"] == 1.0
        [ingested] = final["ingested"]
        assert "0001" in ingested["title"] and ingested["chunks"] > 0
        assert [e["done"] for e in events] == sorted(e["done"] for e in events)
        assert ingested["book_id"] in {b["book_id"] for b in c.get("/api/books").json()}
        assert c.get("/api/jobs").json()[0]["job_id"] == final["job_id"]

        removal = c.delete(f"/api/books/{ingested['book_id']}").json()
        assert _events(c, removal["job_id"])[-1]["state"] == "done"
        assert [b["title"] for b in c.get("/api/books").json()] == ["Alice's Adventures in Wonderland"]


def test_a_failed_ingest_reports_the_file_and_changes_nothing(alice_copy, tmp_path) -> None:
    bad = tmp_path / "broken.epub"
    bad.write_bytes(b"PK\x03\x04 not really a zip")
    service = Service(alice_copy)
    before = service.books()
    job = service.ingest([str(bad)])
    final = service.wait(job.job_id, timeout=120)
    assert final["state"] == "failed"
    assert len(final["errors"]) == 1 and "broken.epub" in final["errors"][0]
    assert service.books() == before


@pytest.mark.slow
def test_twenty_parallel_asks_while_one_book_is_ingested_and_another_removed(
    alice_copy, data_dir, tmp_path
) -> None:
    pieces = write_book_files(small_books(data_dir, 2, words=4000), tmp_path / "books")
    service = Service(alice_copy)
    first = service.wait(service.ingest([str(pieces[0])]).job_id, timeout=300)
    removed_id = first["ingested"][0]["book_id"]
    alice_id = next(b["book_id"] for b in service.books() if b["title"].startswith("Alice"))
    questions = [
        "Why did Alice follow the White Rabbit?",
        "What happened at the mad tea party?",
        "Who is the Queen of Hearts?",
        "What did the Caterpillar ask Alice?",
    ]
    app = create_app(service, books=[tmp_path / "books"])
    with ServedApp(app) as running, httpx.Client(base_url=running.url, timeout=120) as c:
        c.post("/api/ask", json={"question": questions[0]})  # warm
        ingest_job = c.post("/api/ingest", json={"paths": [str(pieces[1])]}).json()["job_id"]
        remove_job = c.delete(f"/api/books/{removed_id}").json()["job_id"]
        seen_books: list[list[tuple[str, int]]] = []
        spans: list[tuple[float, float]] = []

        def ask(i: int) -> tuple[int, dict]:
            t0 = time.time()
            r = c.post("/api/ask", json={"question": questions[i % len(questions)]})
            seen_books.append([(b["book_id"], b["chunks"]) for b in c.get("/api/books").json()])
            spans.append((t0, time.time()))
            return r.status_code, r.json()

        with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
            results = list(pool.map(ask, range(20)))
        ingest_final = service.wait(ingest_job, timeout=300)
        remove_final = service.wait(remove_job, timeout=300)

    assert [status for status, _ in results] == [200] * 20
    for _, answer in results:
        assert answer["citations"], answer
        assert all(
            cite.get("book_id") in (alice_id, removed_id, None) or "zim" in cite
            for cite in answer["citations"]
        )
    assert ingest_final["state"] == remove_final["state"] == "done"
    added = ingest_final["ingested"][0]
    final_books = {b["book_id"]: b["chunks"] for b in service.books()}
    assert set(final_books) == {alice_id, added["book_id"]}
    # Every listing a reader saw holds whole books: the added one with all of its chunks or not at all.
    for listing in seen_books:
        for book_id, chunks in listing:
            assert chunks == final_books.get(book_id, first["ingested"][0]["chunks"]), listing
    # The asks really ran while the library was being written.
    assert any(t0 < ingest_final["finished"] and t1 > ingest_final["started"] for t0, t1 in spans)


# --- warm-up -----------------------------------------------------------------------------------------------
def test_a_warmed_service_encodes_on_one_torch_thread_and_answers_as_before(alice_library) -> None:
    import torch

    from folio.dataflows.asking import ask
    from folio.dataflows.service import QUERY_THREADS

    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        question = "What were the gardeners doing to the white roses?"
        default = ask(question, library=alice_library).as_dict()
        service = Service(alice_library)
        service.warm()
        assert torch.get_num_threads() == QUERY_THREADS == 1
        assert service.ask(question) == default
    finally:
        torch.set_num_threads(before)
