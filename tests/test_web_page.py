"""The web page at ``/`` of ``folio serve`` in a real headless browser: Debian's ``chromium`` driven by
Selenium through ``chromedriver``, against the real app on a real uvicorn (127.0.0.1, a free port) over a
copy of the ingested Alice library with one small Kiwix ZIM.

The tests assert on what the page shows: the books, an answer with its numbered citations, a citation's
passage marked in its chapter (the ``<mark>`` holds exactly the cited quote) or its Kiwix article, search
results in lexical mode, the API's one-line errors, "no answer" as such, text inserted as text, ingest and
remove jobs watched to the end, and the token sent on every call. A screenshot after asking (a passage
open) is kept under the test's tmp dir; with ``FOLIO_SCREENSHOT=1`` it is also copied to ``viz/web/page.png``
(the docs show it), so a test run leaves the checkout as it was.

Skips in one line when chromium or chromedriver is absent (``make test`` installs them when root).
Selenium gets the driver's path, so Selenium Manager never looks for one on the network.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from selenium import webdriver
from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.chrome.service import Service as DriverService
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import Select, WebDriverWait

from folio.dataflows.server import create_app
from folio.dataflows.service import MAX_QUESTION_CHARS, Service
from tests.conftest import ALICE_EPUB, REPO_DIR, ZIMS
from tests.servers import ServedApp

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
ZIM = ZIMS / "wikipedia_en_ray_charles_mini_2020-03.zim"
ALICE = "Alice's Adventures in Wonderland"
QUESTION = "What did the Cheshire Cat tell Alice about being mad?"
KIWIX_QUESTION = "What instrument did Ray Charles play?"
TOKEN = "page-token-7"
SCREENSHOT = REPO_DIR / "viz" / "web" / "page.png"
WAIT_S = 120  # an ask on 2 busy cores can take seconds; an ingest longer

pytestmark = pytest.mark.skipif(
    CHROMIUM is None or CHROMEDRIVER is None,
    reason="chromium and chromedriver are not installed (apt-get install chromium chromium-driver)",
)


# --- fixtures ------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def served(
    alice_library: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, str, Service]]:
    """The app over a copy of the Alice library (the tests remove and add it) and a ZIM, served twice by
    one ``Service``: without a token and with one. Yields (url, url with token, service)."""
    library = tmp_path_factory.mktemp("web") / "library"
    shutil.copytree(alice_library, library)
    service = Service(library, zim_paths=[ZIM])
    books = [ALICE_EPUB.parent]  # the folder the page's ingest may read (folio serve --books)
    with (
        ServedApp(create_app(service, books=books)) as open_app,
        ServedApp(create_app(service, TOKEN, books=books)) as guarded,
    ):
        yield open_app.url, guarded.url, service
    service.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(arg)
    options.add_argument("--window-size=1400,900")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=DriverService(executable_path=str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def page(browser: WebDriver, served: tuple[str, str, Service]) -> Iterator[WebDriver]:
    """The page freshly loaded, its books listed; after the test, no script error in the console."""
    browser.get(served[0] + "/")
    wait_for(browser, lambda d: "book" in text_of(d, "status"))
    yield browser
    script_errors = [e["message"] for e in browser.get_log("browser") if e.get("source") == "javascript"]
    assert not script_errors


# --- helpers -------------------------------------------------------------------------------------------
def wait_for(driver: WebDriver, condition: Callable[[WebDriver], Any], timeout: float = WAIT_S) -> Any:
    return WebDriverWait(driver, timeout, poll_frequency=0.1).until(condition)


def text_of(driver: WebDriver, element_id: str) -> str:
    return str(driver.find_element(By.ID, element_id).text)


def content(element: WebElement) -> str:
    """The element's exact text (``textContent``: no whitespace folding, unlike ``.text``)."""
    return str(element.get_property("textContent"))


def shown(driver: WebDriver, element_id: str) -> bool:
    return bool(driver.find_element(By.ID, element_id).is_displayed())


def ask(driver: WebDriver, question: str) -> None:
    """Type the question and press Enter; wait for the answer or the error."""
    box = driver.find_element(By.ID, "question")
    box.clear()
    box.send_keys(question, Keys.ENTER)
    wait_for(driver, lambda d: shown(d, "answer") or shown(d, "ask-error"))


def open_tab(driver: WebDriver, name: str) -> None:
    driver.find_element(By.CSS_SELECTOR, f"nav button[data-panel='{name}-panel']").click()


def passage_in_view(driver: WebDriver) -> bool:
    """The marked passage lies within the reader's visible box and the window."""
    return bool(
        driver.execute_script(
            """const m = document.getElementById("passage").getBoundingClientRect();
               const r = document.getElementById("reader").getBoundingClientRect();
               return m.top >= Math.max(r.top, 0) && m.top < Math.min(r.bottom, window.innerHeight);"""
        )
    )


def book_rows(driver: WebDriver) -> list[list[str]]:
    """Each listed book as [title, author, chapters, chunks]."""
    rows = []
    for row in driver.find_elements(By.CSS_SELECTOR, "#books-body tr"):
        cells = row.find_elements(By.TAG_NAME, "td")
        names = [str(cells[0].find_element(By.CLASS_NAME, c).text) for c in ("title", "author")]
        rows.append(names + [str(td.text) for td in cells[1:3]])
    return rows


def finished_job(driver: WebDriver, kind: str, timeout: float = WAIT_S) -> WebElement:
    """The newest job item of ``kind`` once it has finished (its data-state done or failed)."""

    def done(d: WebDriver) -> WebElement | bool:
        items = d.find_elements(By.CSS_SELECTOR, f"#jobs li[data-job^='{kind}-']")
        return items[0] if items and items[0].get_attribute("data-state") in ("done", "failed") else False

    return wait_for(driver, done, timeout)


# --- the books -----------------------------------------------------------------------------------------
def test_the_library_lists_the_book_with_its_counts(page: WebDriver, served) -> None:
    book = served[2].books()[0]
    assert text_of(page, "status").startswith("1 book · Kiwix: ")
    open_tab(page, "library")
    wait_for(page, lambda d: book_rows(d))
    assert book_rows(page) == [[ALICE, "Lewis Carroll", str(book["chapters"]), str(book["chunks"])]]


# --- asking --------------------------------------------------------------------------------------------
def test_an_answer_shows_its_citations_and_a_citation_opens_its_passage_marked(
    page: WebDriver, served, tmp_path: Path
) -> None:
    expected = served[2].ask(QUESTION)  # the same service answers the page: the same citations
    citations = expected["citations"]
    assert citations and all(c["book_id"] for c in citations)
    ask(page, QUESTION)
    assert not shown(page, "ask-error")
    answer = text_of(page, "answer-text")
    assert "Alice" in answer and "Cat" in answer
    markers = page.find_elements(By.CSS_SELECTOR, "#answer-text button.cite")
    assert [m.text for m in markers] == [f"[{i}]" for i in range(1, len(citations) + 1)]
    sources = page.find_elements(By.CSS_SELECTOR, "#sources li button")
    where = [
        f", p. {c['page']}"
        if c.get("page")
        else (f", {c['percent']:g}%" if c.get("percent") is not None else "")
        for c in citations
    ]
    assert [s.text for s in sources] == [
        f"{ALICE} › {c['chapter_title']}{w}" for c, w in zip(citations, where, strict=True)
    ]

    last = len(citations)  # the last cited sentence: the furthest into the chapter
    markers[last - 1].click()
    mark = wait_for(page, lambda d: d.find_elements(By.ID, "passage"))[0]
    assert content(mark) == citations[last - 1]["quote"]
    assert text_of(page, "reader-title") == citations[last - 1]["chapter_title"]
    wait_for(page, passage_in_view, 5)
    assert markers[last - 1].get_attribute("aria-pressed") == "true"

    shot = tmp_path / "page.png"
    assert page.save_screenshot(str(shot))
    if os.environ.get("FOLIO_SCREENSHOT") == "1":
        SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, SCREENSHOT)

    sources[0].click()  # a source in the list opens its passage too
    wait_for(page, lambda d: content(d.find_element(By.ID, "passage")) == citations[0]["quote"])
    page.find_element(By.ID, "reader-close").click()
    assert not shown(page, "reader")


def test_a_kiwix_citation_opens_its_article(page: WebDriver, served) -> None:
    expected = served[2].ask(KIWIX_QUESTION)
    kiwix = [c for c in expected["citations"] if c.get("zim")]
    assert kiwix, expected
    ask(page, KIWIX_QUESTION)
    archive = {b["name"]: b["title"] for b in served[2].kiwix_books()}[kiwix[0]["zim"]]
    label = " › ".join(p for p in (f"{archive} (Kiwix)", kiwix[0]["title"], kiwix[0]["section"]) if p)
    links = page.find_elements(By.CSS_SELECTOR, "#sources li button")
    assert label in [b.text for b in links]
    next(b for b in links if b.text == label).click()
    wait_for(page, lambda d: d.find_elements(By.CSS_SELECTOR, "#reader-body section p"))
    assert text_of(page, "reader-title") == kiwix[0]["title"]
    article = served[2].kiwix_article(kiwix[0]["zim"], kiwix[0]["path"])
    first = article["sections"][0]["paragraphs"][0]
    assert content(page.find_element(By.CSS_SELECTOR, "#reader-body section p")) == first


def test_no_answer_is_shown_as_such(page: WebDriver, served) -> None:
    question = "xyzzy plugh frobnicate quux"
    expected = served[2].ask(question)
    assert expected["citations"] == []
    ask(page, question)
    assert page.find_element(By.CSS_SELECTOR, "#not-found h2").text == "No answer found"
    assert expected["answer"] in text_of(page, "not-found")
    assert not page.find_elements(By.ID, "sources")


@pytest.mark.parametrize("question", ["   ", "x" * (MAX_QUESTION_CHARS + 1)])
def test_a_refused_question_shows_the_apis_one_line_error(page: WebDriver, served, question: str) -> None:
    refused = httpx.post(served[0] + "/api/ask", json={"question": question}, timeout=30)
    assert refused.status_code == 400
    page.execute_script("document.getElementById('question').value = arguments[0];", question)
    page.find_element(By.ID, "question").send_keys(Keys.ENTER)
    wait_for(page, lambda d: shown(d, "ask-error"))
    assert text_of(page, "ask-error") == refused.json()["error"]
    assert "\n" not in text_of(page, "ask-error") and not shown(page, "answer")


# --- searching -----------------------------------------------------------------------------------------
def test_a_lexical_search_lists_passages_and_a_result_opens_its_chunk(page: WebDriver, served) -> None:
    hits = served[2].search("rabbit", mode="lexical", k=10)
    assert hits
    open_tab(page, "search")
    assert page.switch_to.active_element.get_attribute("id") == "query"
    Select(page.find_element(By.ID, "mode")).select_by_value("lexical")
    page.find_element(By.ID, "query").send_keys("rabbit", Keys.ENTER)
    wait_for(page, lambda d: d.find_elements(By.CSS_SELECTOR, "#results li"))
    titles = [b.text for b in page.find_elements(By.CSS_SELECTOR, "#results li button")]
    assert titles == [f"{ALICE} › {h['chapter_title']}" for h in hits]
    assert text_of(page, "search-summary") == f"{len(hits)} passages (lexical)"
    snippets = [s.text.lower() for s in page.find_elements(By.CSS_SELECTOR, "#results .snippet")]
    assert all("rabbit" in s for s in snippets)
    page.find_element(By.CSS_SELECTOR, "#results li button").click()
    mark = wait_for(page, lambda d: d.find_elements(By.ID, "passage"))[0]
    assert content(mark) == hits[0]["text"]


# --- text stays text -----------------------------------------------------------------------------------
def test_text_from_the_server_is_inserted_as_text(page: WebDriver, served) -> None:
    path = "<img id=injected src=x onerror=\"document.title='owned'\">"
    refused = httpx.post(served[0] + "/api/ingest", json={"paths": [path]}, timeout=30)
    open_tab(page, "library")
    page.find_element(By.ID, "paths").send_keys(path)
    page.find_element(By.ID, "ingest-button").click()
    wait_for(page, lambda d: shown(d, "library-error"))
    assert text_of(page, "library-error") == refused.json()["error"]
    assert path in text_of(page, "library-error")
    assert not page.find_elements(By.ID, "injected") and page.title == "Folio"


# --- jobs ----------------------------------------------------------------------------------------------
def test_remove_asks_first_then_the_job_runs_and_an_ingest_brings_the_book_back(page: WebDriver) -> None:
    open_tab(page, "library")
    wait_for(page, lambda d: book_rows(d))
    remove = page.find_element(By.CSS_SELECTOR, "#books-body button")
    assert remove.get_attribute("aria-label") == f"Remove {ALICE}"

    remove.click()
    alert = wait_for(page, expected_conditions.alert_is_present(), 5)
    assert ALICE in alert.text
    alert.dismiss()  # "Cancel" keeps the book
    time.sleep(0.5)
    assert len(book_rows(page)) == 1 and not page.find_elements(By.CSS_SELECTOR, "#jobs li")

    remove.click()
    wait_for(page, expected_conditions.alert_is_present(), 5).accept()
    job = finished_job(page, "remove")
    assert job.get_attribute("data-state") == "done"
    assert job.find_element(By.CLASS_NAME, "job-text").text == f"Removed “{ALICE}”."
    wait_for(page, lambda d: shown(d, "books-empty") and text_of(d, "status").startswith("0 books"))
    assert book_rows(page) == []

    page.find_element(By.ID, "paths").send_keys(str(ALICE_EPUB))
    page.find_element(By.ID, "ingest-button").click()
    wait_for(  # the job is watched at once (its line names what is added; a bar follows the chunks)
        page,
        lambda d: any(
            e.text.startswith(f"Adding {ALICE_EPUB.name}") or e.text.startswith("Added")
            for e in d.find_elements(By.CSS_SELECTOR, "#jobs li[data-job^='ingest-'] .job-text")
        ),
    )
    job = finished_job(page, "ingest", timeout=300)
    assert job.get_attribute("data-state") == "done"
    assert job.find_element(By.CLASS_NAME, "job-text").text.startswith(f"Added “{ALICE}” (")
    wait_for(page, lambda d: [r[0] for r in book_rows(d)] == [ALICE])
    with pytest.raises(NoAlertPresentException):
        page.switch_to.alert.text  # noqa: B018 - no dialog is left open


# --- the token -----------------------------------------------------------------------------------------
def test_with_a_token_in_the_address_every_api_call_carries_it(browser: WebDriver, served) -> None:
    guarded = served[1]
    assert httpx.get(guarded + "/api/books", timeout=30).status_code == 401
    browser.get(f"{guarded}/?token={TOKEN}")  # the page's own calls carry no ?token: the header must
    wait_for(browser, lambda d: "book" in text_of(d, "status"))
    assert not shown(browser, "page-error")
    open_tab(browser, "library")
    wait_for(browser, lambda d: [r[0] for r in book_rows(d)] == [ALICE])

    browser.get(f"{guarded}/?token=wrong")
    assert "valid token" in browser.find_element(By.TAG_NAME, "body").text
