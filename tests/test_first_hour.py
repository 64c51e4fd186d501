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
from folio.nodes.types import FolioError
from tests.conftest import REPO_DIR, ZIMS
from tests.servers import ServedApp

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
ZIM = ZIMS / "wikipedia_en_ray_charles_mini_2020-03.zim"
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
    service = Service(library, zim_paths=[ZIM])
    with ServedApp(create_app(service)) as running:
        yield running.url, service
    service.close()


def _readme_routes() -> list[tuple[str, str]]:
    """(method, path) of every route the README's HTTP section lists, ``{…}`` parts as given."""
    text = (REPO_DIR / "README.md").read_text(encoding="utf-8")
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
        concrete = path
        for part, value in filled.items():
            concrete = concrete.replace(part, value)
        concrete = concrete.replace("/chunks/{id}", f"/chunks/{chunk['chunk_id']}")
        if concrete.startswith("/api/jobs/"):
            concrete = concrete.replace(book["book_id"], "ingest-1")
        if method in ("DELETE", "POST"):
            continue  # removing the book and ingesting are jobs (tests/test_server.py)
        response = httpx.request(method, url + concrete + queries.get(concrete, ""), timeout=120)
        assert response.status_code != 405, (method, concrete)
        assert response.status_code in (200, 404) or job.status_code == 404, (method, concrete, response.text)


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
