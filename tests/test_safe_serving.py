"""Issue 33, safe to serve and nothing lost: each hole tried as a hostile or careless client would,
against a real ``folio serve`` process, the real ``folio mcp`` process and the CLI, on generated
libraries (no model: lexical search).

- the HTTP ingest reads only under ``--books`` folders (outside, symlink out, relative: 403);
- Host (421) and Origin (403) are checked, and the token is still needed;
- ``remove`` takes an exact id or a unique prefix of 4+ characters (``--dry-run`` changes nothing);
- readers never fail while a writer commits (1,000 reads against a writer process committing in a loop;
  readers served over HTTP; readers of a per-book library while one of them upgrades it);
- an upgrade sets damaged books aside, one line each, and upgrades the rest;
- every HTTP error is ``{"error": "<one line>"}``, FastAPI's own included;
- every MCP request with an id gets a reply (stdio and streamable HTTP).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from bench.measuring import free_port
from folio.dataflows.http_guard import host_problem, ingest_path_problem, origin_problem
from folio.dataflows.library import removal_target
from folio.dataflows.mcp_stdio import MAX_FRAME_BYTES, screen
from folio.nodes.backends.library_index import usearch_index
from folio.nodes.core.types import FolioError
from tests.conftest import REPO_DIR
from tests.servers import stop_by_pid
from tests.test_hardening_cli import book_ids
from tests.test_library_index import build_library, synthetic_book, write_book_dir

WORDS = ["whale", "ship", "captain", "harpoon", "sailor", "island", "storm", "rope", "deck", "mast", "ocean"]
FOLIO = [sys.executable, "-m", "folio.dataflows.cli"]


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FOLIO_", "XDG_"))}
    env.update(
        HOME=str(home),
        FOLIO_SEARCH_MODE="lexical",
        HAMILTON_TELEMETRY_ENABLED="false",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        PYTHONPATH=str(REPO_DIR),
    )
    return env


def _book(title: str, seed: int, book_id: str | None = None) -> Any:
    text = [" ".join(WORDS[(seed + i * j) % len(WORDS)] for j in range(40)) + f" part {i}" for i in range(3)]
    return synthetic_book(title, [text], book_id=book_id)


def generated(path: Path, titles: tuple[str, ...] = ("Alpha", "Beta", "Gamma")) -> Path:
    build_library(path, [_book(t, i) for i, t in enumerate(titles)]).close()
    for leftover in path.parent.glob(f"{path.name}-staged-*"):
        shutil.rmtree(leftover, ignore_errors=True)
    return path


def folio(home: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*FOLIO, *args], capture_output=True, text=True, env=_env(home), timeout=timeout, cwd=home
    )


@pytest.fixture
def lib_dir(tmp_path: Path) -> Path:
    return generated(tmp_path / "lib")


@pytest.fixture
def home(tmp_path: Path) -> Path:
    (tmp_path / "home").mkdir()
    return tmp_path / "home"


@contextlib.contextmanager
def folio_serve(home: Path, lib: Path, *args: str) -> Iterator[str]:
    """A real ``folio serve`` process over ``lib`` (lexical search); yields its base URL."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    process = subprocess.Popen(
        [*FOLIO, "serve", "--library", str(lib), "--port", str(port), *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=_env(home),
        cwd=home,
    )
    try:
        headers = {"Authorization": f"Bearer {args[args.index('--token') + 1]}"} if "--token" in args else {}
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and process.poll() is None:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(url + "/api/health", headers=headers, timeout=5).status_code == 200:
                    break
            time.sleep(0.2)
        else:
            raise RuntimeError(f"folio serve did not start: {process.stderr.read().decode()[-500:]}")  # type: ignore[union-attr]
        yield url
    finally:
        stop_by_pid(process, 10)


def one_line_error(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, (response.status_code, response.text)
    body = response.json()
    assert set(body) == {"error"}, body
    assert "\n" not in body["error"] and "Traceback" not in body["error"] and body["error"]
    return str(body["error"])


# --- 1. what the API may read -------------------------------------------------------------------------------
def test_ingest_path_rule() -> None:
    roots = [Path("/srv/books")]
    assert ingest_path_problem("/srv/books/a.epub", []) is not None  # no --books: off
    assert ingest_path_problem("a.epub", roots) is not None  # relative
    assert ingest_path_problem("/srv/books/../../etc/passwd", roots) is not None
    assert ingest_path_problem("/etc/passwd", roots) is not None
    assert ingest_path_problem("/srv/books/sub/a.epub", roots) is None
    assert ingest_path_problem("/srv/books", roots) is None


def test_http_ingest_reads_only_under_the_books_folders(lib_dir: Path, home: Path, tmp_path: Path) -> None:
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    secret = tmp_path / "secret.txt"
    secret.write_text("the user's private notes " * 50)
    (allowed / "leak.txt").symlink_to(secret)
    (allowed / "out").symlink_to(tmp_path)
    before = book_ids(lib_dir)
    with folio_serve(home, lib_dir) as url:  # no --books: ingest over HTTP is off
        assert "is off" in one_line_error(httpx.post(url + "/api/ingest", json={"paths": [str(secret)]}), 403)
    with folio_serve(home, lib_dir, "--books", str(allowed)) as url:
        refused = [
            "../../../../etc/passwd",
            "/etc/passwd",
            str(secret),
            str(allowed / "leak.txt"),  # a symlink leading out
            str(allowed / "out" / "secret.txt"),  # through a symlinked folder
            f"{allowed}/../secret.txt",
            "secret.txt",
        ]
        for path in refused:
            error = one_line_error(httpx.post(url + "/api/ingest", json={"paths": [path]}), 403)
            assert path in error
        mixed = httpx.post(url + "/api/ingest", json={"paths": [str(allowed / "x.txt"), str(secret)]})
        one_line_error(mixed, 403)  # one path outside refuses the whole job
        inside = httpx.post(url + "/api/ingest", json={"paths": [str(allowed / "missing.txt")]})
        assert "no such file" in one_line_error(inside, 404)  # inside: the guard lets it through
        assert httpx.get(url + "/api/jobs").json() == []
        assert [b["book_id"] for b in httpx.get(url + "/api/books").json()] == before
    assert book_ids(lib_dir) == before


def test_serve_refuses_a_books_folder_that_does_not_exist(lib_dir: Path, home: Path) -> None:
    done = folio(home, "serve", "--library", str(lib_dir), "--books", str(home / "nope"))
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [f"folio: {home / 'nope'}: --books needs a folder that exists"]


# --- 2. who may talk to it ----------------------------------------------------------------------------------
def test_host_rule() -> None:
    allowed = frozenset({"127.0.0.1", "localhost", "::1"})
    for good in ("127.0.0.1:8765", "localhost", "LOCALHOST:1", "[::1]:8765", "[::1]"):
        assert host_problem(good, allowed) is None, good
    for bad in ("evil.example", "evil.example:8765", "127.0.0.1.evil.example", "", None, "[::1", "a:b"):
        assert host_problem(bad, allowed) is not None, bad
    assert host_problem("anything", None) is None  # a wildcard bind: the token guards it
    assert origin_problem("POST", "http://evil.example", allowed) is not None
    assert origin_problem("DELETE", "null", allowed) is not None
    assert origin_problem("POST", "http://localhost:8765", allowed) is None
    assert origin_problem("GET", "http://evil.example", allowed) is None  # a read: Host decides
    assert origin_problem("POST", None, allowed) is None  # not a browser


def test_a_foreign_host_or_origin_is_refused_and_the_token_still_counts(lib_dir: Path, home: Path) -> None:
    first = book_ids(lib_dir)[0]
    with folio_serve(home, lib_dir) as url:
        port = url.rsplit(":", 1)[1]
        for path in ("/api/books", "/", "/api/health", "/mcp/", "/docs"):
            error = one_line_error(httpx.get(url + path, headers={"Host": "evil.example"}), 421)
            assert "evil.example" in error
        for host in (f"localhost:{port}", f"127.0.0.1:{port}", f"[::1]:{port}"):
            assert httpx.get(url + "/api/books", headers={"Host": host}).status_code == 200
        evil = {"Origin": "http://evil.example"}
        one_line_error(httpx.delete(f"{url}/api/books/{first}", headers=evil), 403)
        one_line_error(httpx.post(url + "/api/ask", json={"question": "whale?"}, headers=evil), 403)
        assert httpx.get(url + "/api/books", headers=evil).status_code == 200  # a read: Host decides
        same = {"Origin": url}
        dry = httpx.delete(f"{url}/api/books/{first}", params={"dry_run": "true"}, headers=same)
        assert dry.status_code == 200 and dry.json()["book_id"] == first
    assert first in book_ids(lib_dir)
    with folio_serve(home, lib_dir, "--token", "s3cret") as url:
        one_line_error(httpx.get(url + "/api/books"), 401)
        token = {"Authorization": "Bearer s3cret"}
        one_line_error(httpx.get(url + "/api/books", headers={**token, "Host": "evil.example"}), 421)
        assert httpx.get(url + "/api/books", headers=token).status_code == 200


# --- 3. removing needs a real id ----------------------------------------------------------------------------
def test_removal_target_rule() -> None:
    ids = ["same-prefix-one", "same-prefix-two", "alpha-12345678"]
    assert removal_target("alpha-12345678", ids) == "alpha-12345678"
    assert removal_target("alph", ids) == "alpha-12345678"
    for ref, says in [
        ("", "no book named"),
        ("   ", "no book named"),
        ("a", "at least 4"),
        ("same", "same-prefix-one, same-prefix-two"),
        ("zzzz", "no such book"),
    ]:
        with pytest.raises(FolioError, match=says):
            removal_target(ref, ids)


def test_remove_refuses_empty_short_ambiguous_and_unknown_ids(home: Path, tmp_path: Path) -> None:
    lib = tmp_path / "lib"
    build_library(lib, [_book("One", 1, "same-prefix-one"), _book("Two", 2, "same-prefix-two")]).close()
    before = book_ids(lib)
    for ref, says in [
        ("", "no book named"),
        ("  ", "no book named"),
        ("s", "at least 4 of its characters; it matches same-prefix-one, same-prefix-two"),
        ("same-prefix", "ambiguous: it matches same-prefix-one, same-prefix-two"),
        ("nothing-like-it", "no such book"),
    ]:
        done = folio(home, "remove", ref, "--library", str(lib))
        assert done.returncode == 1, (ref, done.stdout)
        [line] = done.stderr.strip().splitlines()
        assert line.startswith("folio: ") and says in line, (ref, line)
    dry = folio(home, "remove", "same-prefix-t", "--dry-run", "--library", str(lib))
    assert dry.returncode == 0 and dry.stdout.startswith("would remove same-prefix-two: Two")
    assert book_ids(lib) == before
    done = folio(home, "remove", "same-prefix-t", "--library", str(lib))
    assert done.returncode == 0 and done.stdout.strip() == "removed same-prefix-two"
    assert book_ids(lib) == ["same-prefix-one"]


def test_http_remove_needs_a_real_id_and_can_dry_run(lib_dir: Path, home: Path) -> None:
    before = book_ids(lib_dir)
    with folio_serve(home, lib_dir) as url:
        for ref, status in [("%20", 400), ("a", 400), ("no-such-book", 404)]:
            one_line_error(httpx.delete(f"{url}/api/books/{ref}"), status)
        dry = httpx.delete(f"{url}/api/books/{before[0][:6]}", params={"dry_run": "true"})
        assert dry.status_code == 200 and dry.json() == {
            "book_id": before[0],
            "title": "Alpha",
            "dry_run": True,
        }
        assert httpx.get(url + "/api/jobs").json() == []
    assert book_ids(lib_dir) == before


# --- 4. readers never wait on writers -----------------------------------------------------------------------
@contextlib.contextmanager
def committing(lib: Path, home: Path) -> Iterator[dict[str, int]]:
    """A writer process committing into ``lib`` in a loop (add a book, remove it, ...) until the block
    ends; yields a dict that then holds ``commits``."""
    stop = home / "stop-writer"
    writer = subprocess.Popen(
        [sys.executable, "-m", "tests.concurrency_workers", "writer", str(lib), str(stop)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(home),
    )
    counts: dict[str, int] = {}
    try:
        yield counts
    finally:
        stop.touch()
        out, err = writer.communicate(timeout=300)
        assert writer.returncode == 0, err[-800:]
        counts["commits"] = int(out.split()[-1])


@pytest.mark.slow
def test_a_thousand_reads_never_fail_while_a_writer_commits_in_a_loop(lib_dir: Path, home: Path) -> None:
    with committing(lib_dir, home) as counts:
        readers = [
            subprocess.Popen(
                [sys.executable, "-m", "tests.concurrency_workers", "reader", str(lib_dir), "500"],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=_env(home),
            )
            for _ in range(2)
        ]
        results = [r.communicate(timeout=900) for r in readers]
    reports = [json.loads(out.strip().splitlines()[-1]) for out, _ in results]
    failures = [line for out, _ in results for line in out.splitlines() if line.startswith("FAIL")]
    assert sum(r["reads"] for r in reports) == 1000
    assert failures == [] and sum(r["failures"] for r in reports) == 0, failures[:5]
    assert counts["commits"] >= 10  # the reads really ran beside commits


def test_served_reads_never_fail_while_another_process_commits(lib_dir: Path, home: Path) -> None:
    with folio_serve(home, lib_dir) as url, committing(lib_dir, home) as counts:
        statuses = []
        until = time.monotonic() + 30  # the writer's start-up, then commits beside the reads
        with httpx.Client(base_url=url, timeout=60) as client:
            while len(statuses) < 200 or time.monotonic() < until:
                path = "/api/books" if len(statuses) % 2 else "/api/search?q=whale+harpoon"
                response = client.get(path)
                statuses.append((response.status_code, response.text[:200]))
    assert [s for s in statuses if s[0] != 200] == []
    assert counts["commits"] >= 3


def legacy(path: Path, titles: tuple[str, ...]) -> Path:
    usearch_index()  # ONNX Runtime before usearch (write_book_dir imports usearch): else a segfault
    for i, title in enumerate(titles):
        write_book_dir(_book(title, i), path / "books" / title.lower(), legacy=True)
    return path


def test_readers_of_an_old_library_wait_for_its_upgrade_and_never_fail(home: Path, tmp_path: Path) -> None:
    lib = legacy(tmp_path / "old", ("Alpha", "Beta", "Gamma", "Delta"))
    readers = [
        subprocess.Popen(
            [*FOLIO, "books", "--json", "--library", str(lib)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(home),
        )
        for _ in range(4)
    ]
    for reader in readers:
        out, err = reader.communicate(timeout=300)
        assert reader.returncode == 0, err
        assert sorted(b["title"] for b in json.loads(out)) == ["Alpha", "Beta", "Delta", "Gamma"]
        assert all("waiting for another process" in line for line in err.strip().splitlines()), err
    assert not (lib / "books").exists() and len(book_ids(lib)) == 4


# --- 5. the upgrade sets damaged books aside ----------------------------------------------------------------
def test_an_upgrade_sets_each_damaged_book_aside_in_one_line_and_upgrades_the_rest(
    home: Path, tmp_path: Path
) -> None:
    lib = legacy(tmp_path / "old", ("Alpha", "Beta", "Gamma", "Delta", "Epsilon"))
    (lib / "books" / "alpha" / "book.sqlite").unlink()
    (lib / "books" / "beta" / "vectors.npy").unlink()
    (lib / "books" / "gamma" / "book.sqlite").write_bytes(b"not a database at all" * 100)
    (lib / "books" / "delta" / "book.json").unlink()
    done = folio(home, "books", "--json", "--library", str(lib))
    assert done.returncode == 0, done.stderr
    assert [b["title"] for b in json.loads(done.stdout)] == ["Epsilon"]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 4, lines
    for name, says in [
        ("alpha", "book.sqlite is missing"),
        ("beta", "vectors.npy is missing"),
        ("gamma", "not upgraded"),
        ("delta", "book.json is missing"),
    ]:
        assert any(line.startswith(f"folio: {name}: ") and says in line for line in lines), (name, lines)
        assert (lib / "not-upgraded" / name).is_dir()
    again = folio(home, "books", "--library", str(lib))
    assert again.returncode == 0 and again.stderr == ""


# --- 6. one error shape on HTTP -----------------------------------------------------------------------------
def test_every_http_error_is_one_error_line(lib_dir: Path, home: Path) -> None:
    json_type = {"content-type": "application/json"}
    nested = b'{"question": ' + b"[" * 20_000 + b"]" * 20_000 + b"}"
    with folio_serve(home, lib_dir) as url, httpx.Client(base_url=url, timeout=60) as c:
        assert "no such route" in one_line_error(c.get("/no/such/route"), 404)
        assert "not allowed" in one_line_error(c.put("/api/books"), 405)
        one_line_error(c.post("/api/books"), 405)
        one_line_error(c.get("/api/books/no-such-book/chapters/ch-1"), 404)
        one_line_error(c.post("/api/ask", content=b"{not json", headers=json_type), 422)
        one_line_error(c.post("/api/ask", content=nested, headers=json_type), 400)
        one_line_error(c.post("/api/ask", content=b"\xff\xfe", headers=json_type), 422)
        one_line_error(c.get("/api/search"), 422)
        one_line_error(c.get("/api/search", params={"q": "whale", "k": "ten"}), 422)
        one_line_error(c.get("/api/jobs/nope"), 404)
        one_line_error(c.post("/api/ingest", json={"paths": "not a list"}), 422)


# --- 7. MCP always answers ----------------------------------------------------------------------------------
INIT = {
    "jsonrpc": "2.0",
    "id": "init",
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}
HOSTILE: list[tuple[Any, str]] = [  # (frame, the reply's id) — raw strings are sent as they are
    ({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": [1, 2]}, 2),
    ({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": "books_list"}, 3),
    (
        '{"jsonrpc": "2.0", "id": 4, "method": "tools/call", '
        '"params": {"name": "text_search", "arguments": {"query": "whale \\ud83d"}}}',
        4,
    ),
    ({"jsonrpc": "2.0", "id": 5, "method": "no/such/method"}, 5),
    ('{"jsonrpc": "2.0", "id": 6, "method": "tools/call", oops', None),
    ('[{"jsonrpc": "2.0", "id": 7, "method": "tools/list"}]', None),
    ({"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": 7}}, 8),
    ({"jsonrpc": "1.0", "id": 9, "method": "tools/list"}, 9),
    (
        {
            "jsonrpc": "2.0",
            "id": 10,
            "method": "tools/call",
            "params": {"name": "books_list", "arguments": 5},
        },
        10,
    ),
]


def _frame(value: Any) -> bytes:
    return (value if isinstance(value, str) else json.dumps(value)).encode() + b"\n"


def test_screen_answers_what_the_sdk_would_drop() -> None:
    for frame, request_id in HOSTILE[:3] + HOSTILE[4:]:
        reply = screen(_frame(frame))
        if request_id in (5, 8, 10):  # well-formed JSON-RPC the SDK answers itself (-32601, -32602)
            assert reply is None
            continue
        assert reply is not None and reply["id"] == request_id and reply["error"]["code"] < 0, frame
    assert (
        screen(b'{"jsonrpc": "2.0", "method": "notifications/x", "params": [1]}') == {}
    )  # nothing to answer
    assert screen(_frame(INIT)) is None


def test_stdio_answers_every_request_and_keeps_serving(lib_dir: Path, home: Path) -> None:
    oversized = (
        b'{"jsonrpc": "2.0", "id": 11, "method": "tools/call", "params": {"q": "'
        + b"x" * (MAX_FRAME_BYTES + 10)
        + b'"}}\n'
    )
    last = {
        "jsonrpc": "2.0",
        "id": 12,
        "method": "tools/call",
        "params": {"name": "books_list", "arguments": {}},
    }
    frames = [_frame(INIT), _frame({"jsonrpc": "2.0", "method": "notifications/initialized"})]
    frames += [_frame(f) for f, _ in HOSTILE] + [oversized, b"\n", _frame(last)]
    process = subprocess.Popen(
        [*FOLIO, "mcp", "--library", str(lib_dir)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(home),
    )
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(b"".join(frames))
    process.stdin.flush()
    replies: list[dict[str, Any]] = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not any(r.get("id") == 12 for r in replies):
        line = process.stdout.readline()
        if not line:
            break
        replies.append(json.loads(line))
    process.stdin.close()
    process.wait(timeout=60)
    by_id: dict[Any, list[dict[str, Any]]] = {}
    for reply in replies:
        by_id.setdefault(reply.get("id"), []).append(reply)
    for request_id in ("init", 2, 3, 4, 5, 8, 9, 10, 11):
        assert request_id in by_id, (request_id, replies)
    for request_id in (2, 3, 4, 5, 8, 9, 10, 11):
        assert by_id[request_id][0]["error"]["code"] < 0
    assert sorted(r["error"]["code"] for r in by_id[None]) == [-32700, -32600]  # parse error, batch
    books = json.loads(by_id[12][0]["result"]["content"][0]["text"])["books"]
    assert len(books) == 3  # and it still serves


def test_streamable_http_answers_every_request(lib_dir: Path, home: Path) -> None:
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    with folio_serve(home, lib_dir) as url, httpx.Client(base_url=url, timeout=60) as c:
        for frame, request_id in HOSTILE:
            response = c.post("/mcp/", content=_frame(frame), headers=headers)
            assert response.status_code in (200, 400), (frame, response.status_code, response.text)
            reply = response.json()
            assert reply["id"] == request_id and reply["error"]["code"] < 0, (frame, reply)
