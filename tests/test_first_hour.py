"""Issue 31, the first hour of a new user: what tripped one up, each as a test.

- the OpenAPI pages (``/docs``, ``/redoc``) render in Chromium with every request beyond 127.0.0.1 blocked;
- HTTP: every route the README lists answers, errors name JSON fields and query parameters (not CLI
  flags), a body that is not JSON says so;
- ``make``: the llama-cpp-python build prints its elapsed time while it runs (a stand-in build), the demo
  ends with the two lines that make its library the shell's default, and those lines work;
- the CLI: list options before or after the question, the empty default library, a failed first ingest,
  the evaluation-only modes, examples in ``folio --help``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from folio.dataflows.server import create_app, http_message, validation_message
from folio.dataflows.service import Service
from folio.nodes.core.types import FolioError
from tests.conftest import REPO_DIR, ZIMS
from tests.servers import ServedApp

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
ZIM = ZIMS / "wikipedia_en_ray_charles_mini_2020-03.zim"
ZIM_NOVID = ZIMS / "wikipedia_en_ray_charles_novid_2018-10.zim"  # the same title, another flavour and date
KIWIX_QUESTION = "What instrument did Ray Charles play?"
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None or CHROMEDRIVER is None,
    reason="chromium and chromedriver are not installed (apt-get install chromium chromium-driver)",
)


# --- HTTP: messages (pure helpers) ----------------------------------------------------------------------
def test_an_error_about_a_cli_flag_names_the_parameter_over_http() -> None:
    assert http_message(FolioError("--mode", "unknown search mode 'x'")) == "mode: unknown search mode 'x'"
    assert http_message(FolioError("--kiwix-url", "bad")) == "kiwix_url: bad"
    assert http_message(FolioError("/books/a.epub", "no such file")) == "/books/a.epub: no such file"


def test_validation_errors_say_what_is_wrong_in_words() -> None:
    bad_json = [
        {"type": "json_invalid", "loc": ("body", 1), "msg": "JSON decode error", "ctx": {"error": "x"}}
    ]
    assert validation_message(bad_json) == "the request body is not valid JSON (x)"
    missing = [{"type": "missing", "loc": ("body", "question"), "msg": "Field required"}]
    assert validation_message(missing) == "question: Field required (JSON field)"
    query = [{"type": "int_parsing", "loc": ("query", "k"), "msg": "Input should be a valid integer"}]
    assert validation_message(query) == "k: Input should be a valid integer (query parameter)"


# --- HTTP: a served library --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def served(alice_library: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Service]]:
    library = tmp_path_factory.mktemp("first-hour") / "library"
    shutil.copytree(alice_library, library)
    service = Service(library, zim_paths=[ZIM, ZIM_NOVID])
    with ServedApp(create_app(service)) as running:
        yield running.url, service
    service.close()


def _readme_routes() -> list[tuple[str, str]]:
    """(method, path) of every route the documentation's HTTP section lists (``docs/serving.md``, where
    the README sends its readers), ``{…}`` parts as given."""
    text = (REPO_DIR / "docs" / "serving.md").read_text(encoding="utf-8")
    line = text[text.index("Routes: `") : text.index("Ingest and remove are jobs")]
    routes: list[tuple[str, str]] = []
    base = ""
    for spec in re.findall(r"`([^`]+)`", line):
        methods, _, path = spec.partition(" ") if " " in spec else ("GET", "", spec)
        if path.startswith("/api/"):
            base = path
        else:
            path = base + path  # "/chapters/{id}" continues the previous route
        for method in methods.split("|"):
            for variant in _expanded(path):
                routes.append((method, variant))
    return routes


def _expanded(path: str) -> list[str]:
    """``/api/kiwix/books|search|article`` as three paths, ``/api/jobs[/{id}[/events]]`` as three."""
    if "[" in path:
        head, _, rest = path.partition("[")
        inner = rest[: rest.rindex("]")]
        return [head, *(head + tail for tail in _expanded(inner))]
    if "|" in path:
        head, _, alternatives = path.rpartition("/")
        return [f"{head}/{name}" for name in alternatives.split("|")]
    return [path]


def test_every_route_the_readme_lists_answers(served) -> None:
    url, service = served
    book = service.books()[0]
    chunk = service.search("rabbit", mode="lexical", k=1)[0]
    filled = {
        "{book}": book["book_id"],
        "{id}": book["book_id"],
        "/chapters/" + book["book_id"]: f"/chapters/{chunk['chapter_id']}",
    }
    routes = _readme_routes()
    assert ("GET", "/api/books/{book}") in routes and len(routes) >= 14
    job = httpx.post(f"{url}/api/ingest", json={"paths": ["/no/such.epub"]}, timeout=60)
    queries = {
        "/api/search": "?q=rabbit",
        "/api/concepts": "?q=rabbit",
        "/api/kiwix/search": "?q=piano",
        "/api/kiwix/article": "?book=x&path=y",
    }
    for method, path in routes:
        concrete = path.replace("/chunks/{id}", f"/chunks/{chunk['chunk_id']}")
        for part, value in filled.items():
            concrete = concrete.replace(part, value)
        if concrete.startswith("/api/jobs/"):
            concrete = concrete.replace(book["book_id"], "ingest-1")
        if method in ("DELETE", "POST"):
            continue  # removing the book and ingesting are jobs (tests/test_server.py)
        response = httpx.request(method, url + concrete + queries.get(concrete, ""), timeout=120)
        assert response.status_code != 405, (method, concrete)
        # a real book, chapter and chunk answer 200; a job or article that is not there, 404; ingest over
        # HTTP is off without --books (403), so no job exists
        assert job.status_code == 403, job.text
        assert response.status_code in (200, 404), (method, concrete, response.text)


def test_one_book_is_its_row_and_its_chapters(served) -> None:
    url, service = served
    book = service.books()[0]
    got = httpx.get(f"{url}/api/books/{book['book_id']}", timeout=60)
    assert got.status_code == 200
    body = got.json()
    assert {k: body[k] for k in book} == book
    assert len(body["contents"]) == book["chapters"]
    first = body["contents"][0]
    chapter = httpx.get(
        f"{url}/api/books/{book['book_id']}/chapters/{first['chapter_id']}", timeout=60
    ).json()
    assert chapter["chapter_title"] == first["title"]
    missing = httpx.get(f"{url}/api/books/no-such-book", timeout=60)
    assert missing.status_code == 404 and "no such book" in missing.json()["error"]


def test_http_errors_name_parameters_and_a_body_that_is_not_json_says_so(served) -> None:
    url, _ = served
    mode = httpx.get(f"{url}/api/search", params={"q": "whale", "mode": "fuzzy"}, timeout=60)
    assert mode.status_code == 400
    assert mode.json()["error"].startswith("mode: unknown search mode 'fuzzy'")
    assert "--" not in mode.json()["error"]
    bad = httpx.post(
        f"{url}/api/ask", content=b"{not json", headers={"content-type": "application/json"}, timeout=60
    )
    assert bad.status_code == 422
    assert bad.json()["error"].startswith("the request body is not valid JSON")
    missing = httpx.post(f"{url}/api/ask", json={"query": "x"}, timeout=60)
    assert missing.json()["error"].startswith("question: ")


def test_the_api_pages_work_behind_a_token(served) -> None:
    _, service = served
    with ServedApp(create_app(service, "t0ken")) as guarded:
        page = httpx.get(f"{guarded.url}/docs", params={"token": "t0ken"}, timeout=60)
        assert page.status_code == 200 and "/openapi.json?token=t0ken" in page.text
        assert "/docs-assets/swagger-ui-bundle.js" in page.text
        assert httpx.get(f"{guarded.url}/openapi.json?token=t0ken", timeout=60).status_code == 200
        script = httpx.get(f"{guarded.url}/docs-assets/swagger-ui-bundle.js", timeout=60)
        assert script.status_code == 200 and script.headers["content-type"].startswith("text/javascript")
        assert httpx.get(f"{guarded.url}/api/books", timeout=60).status_code == 401
        assert httpx.get(f"{guarded.url}/docs-assets/../api/books", timeout=60).status_code == 401
        assert httpx.get(f"{guarded.url}/docs-assets/nothing.js", timeout=60).status_code == 404


# --- the OpenAPI pages in Chromium, offline --------------------------------------------------------------
@pytest.fixture(scope="module")
def offline_browser() -> Iterator[object]:
    """Headless Chromium that can reach 127.0.0.1 only (every other host: a dead proxy, no DNS), with
    its network log on."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service as DriverService

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1400,900",
        "--proxy-server=http://127.0.0.1:9",
        "--proxy-bypass-list=127.0.0.1",
        "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    driver = webdriver.Chrome(service=DriverService(executable_path=str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def requested_urls(driver) -> list[str]:
    """Every URL the page asked for since the last call (the performance log's requests)."""
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


@needs_chromium
@pytest.mark.parametrize(
    ("path", "rendered"), [("/docs", ".swagger-ui .opblock"), ("/redoc", "[id^='operation']")]
)
def test_the_api_pages_render_with_the_network_blocked(
    served, offline_browser, path: str, rendered: str, tmp_path
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    url, _ = served
    driver = offline_browser
    driver.get(url + path)
    WebDriverWait(driver, 60, poll_frequency=0.2).until(lambda d: d.find_elements(By.CSS_SELECTOR, rendered))
    assert "/api/ask" in driver.find_element(By.TAG_NAME, "body").text
    driver.save_screenshot(str(tmp_path / f"{path.strip('/')}.png"))
    urls = [u for u in requested_urls(driver) if u.startswith("http")]
    assert urls and all(u.startswith(url) for u in urls), urls


# --- make -------------------------------------------------------------------------------------------------
def _make(*args: str, cwd: Path = REPO_DIR) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "--no-print-directory", "-s", *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def test_the_llama_build_reports_its_elapsed_time_while_it_runs(tmp_path) -> None:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / ".installed").touch()  # newer than pyproject.toml: setup is not redone
    done = _make(
        f"{venv}/bin/.llm-tier",
        f"VENV={venv}",
        f"LLAMA_WHEELS={tmp_path / 'wheels'}",
        "HEARTBEAT_S=1",
        "LLAMA_BUILD=sleep 3.5",
    )
    assert done.returncode == 0, done.stderr
    beats = re.findall(r"still building llama-cpp-python: 0 min (\d+) s elapsed", done.stdout)
    assert len(beats) >= 2 and [int(b) for b in beats] == sorted(int(b) for b in beats), done.stdout
    assert "llama-cpp-python built in" in done.stdout


def test_the_demo_ends_with_two_lines_that_make_its_library_the_default(alice_library, tmp_path) -> None:
    assert "demo-next" in (REPO_DIR / "Makefile").read_text().split("\ndemo:", 1)[1].split("\n\n", 1)[0]
    done = _make("demo-next", f"LIBRARY={alice_library}")
    lines = [line.strip() for line in done.stdout.splitlines() if line.strip().startswith("export ")]
    assert len(lines) == 2 and str(alice_library) in lines[1]
    env = {k: v for k, v in os.environ.items() if k not in ("FOLIO_LIBRARY", "VIRTUAL_ENV")}
    env["PATH"] = "/usr/bin:/bin"
    shell = subprocess.run(
        ["bash", "-c", "; ".join([*lines, "folio books"])],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shell.returncode == 0, shell.stderr
    assert "Alice" in shell.stdout


@pytest.mark.slow
def test_building_the_package_prints_no_setuptools_warning_and_ships_the_page(tmp_path) -> None:
    """A wheel built from a copy of the sources (pyproject, the packages, README; a LICENSE stub where the
    checkout has none yet): setuptools says nothing, and the web page and its package are in it."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        if (REPO_DIR / name).exists():
            shutil.copy(REPO_DIR / name, src / name)
    (src / "LICENSE").touch()
    for name in ("nodes", "dataflows", "configs"):
        shutil.copytree(REPO_DIR / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp_path), "."],
        cwd=src,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr
    assert "Warning" not in built.stdout + built.stderr, built.stdout + built.stderr
    import zipfile

    (wheel,) = tmp_path.glob("folio-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "folio/dataflows/web/index.html" in names
    metadata = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("METADATA"))).decode()
    assert "License-Expression: Apache-2.0" in metadata


# --- the CLI ----------------------------------------------------------------------------------------------
def _folio(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess:
    """``folio ARGS`` in a fresh interpreter with ``env`` over this one's (``FOLIO_LIBRARY`` removed)."""
    base = {k: v for k, v in os.environ.items() if k != "FOLIO_LIBRARY"}
    return subprocess.run(
        [sys.executable, "-m", "folio.dataflows.cli", *args],
        capture_output=True,
        text=True,
        env={**base, **(env or {})},
        cwd=cwd,
        timeout=300,
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["ask", "--zim", "a.zim", "b.zim", "Why is the sky blue?"],
        ["ask", "Why is the sky blue?", "--zim", "a.zim", "b.zim"],
        ["ask", "--zim", "a.zim", "Why is the sky blue?", "--zim", "b.zim", "--json"],
        ["ask", "--zim", "a.zim", "b.zim", "--json", "Why is the sky blue?"],
    ],
)
def test_archives_before_or_after_the_question_leave_the_question_alone(argv: list[str]) -> None:
    from folio.dataflows.cli import build_parser
    from folio.dataflows.cli_guide import list_options_last

    args = build_parser().parse_args(list_options_last(argv))
    assert args.question == "Why is the sky blue?"
    assert args.zim == ["a.zim", "b.zim"]


def test_kiwix_with_the_archive_first_answers_the_question(tmp_path) -> None:
    question = "What instrument did Ray Charles play?"
    first = _folio("kiwix", "--zim", str(ZIM), question, "--json")
    assert first.returncode == 0, first.stderr
    last = _folio("kiwix", question, "--zim", str(ZIM), "--json")
    assert json.loads(first.stdout)["query"] == question
    assert json.loads(first.stdout) == json.loads(last.stdout)


def test_an_empty_default_library_says_where_it_is_and_how_to_pick_another(tmp_path) -> None:
    env = {"XDG_DATA_HOME": str(tmp_path / "data")}
    default = tmp_path / "data" / "folio"
    listed = _folio("books", env=env)
    assert listed.returncode == 0
    assert listed.stdout.startswith(f"no books yet in {default}")
    searched = _folio("search", "rabbit", env=env)
    assert searched.returncode == 1
    notes = [line for line in searched.stderr.splitlines() if line.startswith("folio: note: ")]
    assert notes and f"{default} is the default library" in notes[0]
    assert "--library DIR" in notes[0] and "FOLIO_LIBRARY" in notes[0]
    assert any("make demo" in note for note in notes)
    chosen = _folio("search", "rabbit", "--library", str(tmp_path / "mine"), env=env)
    assert "note:" not in chosen.stderr  # a library the user named needs no explaining


def test_the_note_names_the_demo_library_once_make_demo_filled_it(tmp_path, monkeypatch) -> None:
    from folio.dataflows import cli_guide

    demo = tmp_path / ".folio-demo"
    demo.mkdir()
    (demo / "library.sqlite").touch()
    monkeypatch.setattr(cli_guide, "demo_library", lambda: demo)
    notes = cli_guide.empty_library_notes(tmp_path / "default", given=False)
    assert notes[1] == f"`make demo` filled {demo}: `export FOLIO_LIBRARY={demo}` uses it"
    assert cli_guide.empty_library_notes(tmp_path / "default", given=True) == []


@pytest.mark.parametrize("where", ["--library", "default"])
def test_a_failed_first_ingest_leaves_no_library_folder(tmp_path, where: str) -> None:
    env = {"XDG_DATA_HOME": str(tmp_path / "data")}
    args = ["--library", str(tmp_path / "new" / "library")] if where == "--library" else []
    done = _folio("ingest", str(tmp_path / "missing.epub"), *args, env=env)
    assert done.returncode == 1
    assert done.stderr.strip() == f"folio: {tmp_path / 'missing.epub'}: no such file"
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_an_ingest_into_an_existing_empty_folder_keeps_the_folder(tmp_path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    done = _folio("ingest", str(tmp_path / "missing.epub"), "--library", str(mine))
    assert done.returncode == 1
    assert (mine / "notes.txt").read_text() == "mine"


def test_evaluation_only_modes_are_explained_where_listed() -> None:
    search = _folio("search", "--help")
    assert "bm25s" not in search.stdout and "dense_exact" not in search.stdout
    assert "hybrid: words and meaning (default)" in " ".join(search.stdout.split())
    evaluate = " ".join(_folio("eval", "--help").stdout.split())
    assert "bm25s (the bm25s library's BM25" in evaluate and "dense_exact (exact cosine search" in evaluate


def test_folio_help_shows_three_examples() -> None:
    shown = _folio("--help").stdout
    examples = shown.split("examples:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert len(examples) == 3 and all(line.strip().startswith("folio ") for line in examples)
    assert any("--zim" in line for line in examples)


# --- the page in Chromium, offline: Kiwix read like books ------------------------------------------------
def _page(driver, url: str, width: int):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver.set_window_size(width, 900)
    driver.get(url + "/")
    WebDriverWait(driver, 120, poll_frequency=0.2).until(
        lambda d: "Kiwix:" in d.find_element(By.ID, "status").text
    )
    return driver


@needs_chromium
def test_archives_with_the_same_title_are_told_apart_by_flavour_and_date(served, offline_browser) -> None:
    from selenium.webdriver.common.by import By

    page = _page(offline_browser, served[0], 1400)
    status = page.find_element(By.ID, "status").text
    assert "Ray Charles (mini, 2020-03), Ray Charles (novid, 2018-10)" in status, status


@needs_chromium
@pytest.mark.parametrize("width", [1400, 900])  # the reader beside the answer, and below it
def test_a_kiwix_citation_opens_the_article_at_its_passage_marked_and_the_tab_closes_it(
    served, offline_browser, width: int, tmp_path
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait

    url, service = served
    expected = [c for c in service.ask(KIWIX_QUESTION)["citations"] if c.get("zim")]
    assert expected and expected[0]["quote"]
    page = _page(offline_browser, url, width)
    wait = WebDriverWait(page, 120, poll_frequency=0.2)
    box = page.find_element(By.ID, "question")
    box.clear()
    box.send_keys(KIWIX_QUESTION, Keys.ENTER)
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#sources li button"))
    title = expected[0]["title"]
    button = next(b for b in page.find_elements(By.CSS_SELECTOR, "#sources li button") if title in b.text)
    assert "(Kiwix)" in button.text and ("mini, 2020-03" in button.text or "novid, 2018-10" in button.text)
    button.click()
    mark = wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#reader-body mark#passage"))[0]
    marked = " ".join(str(mark.get_property("textContent")).split())
    quote = " ".join(expected[0]["quote"].split())
    assert quote in marked and len(marked) < len(quote) + 2000  # the passage (or its paragraph), not all
    geometry = page.execute_script(
        """const m = document.getElementById("passage").getBoundingClientRect();
           const h = document.querySelector("#reader .reader-head").getBoundingClientRect();
           return [m.top, h.bottom, window.innerHeight];"""
    )
    mark_top, head_bottom, height = geometry
    assert head_bottom <= mark_top < height, geometry  # in view, and not under the reader's header
    page.save_screenshot(str(tmp_path / f"kiwix-passage-{width}.png"))
    page.find_element(By.CSS_SELECTOR, "nav button[data-panel='search-panel']").click()
    assert not page.find_element(By.ID, "reader").is_displayed()
