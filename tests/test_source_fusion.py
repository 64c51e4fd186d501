"""Cross-source fusion: source names, the shared pool and its deadline, empties, de-duplication, merging."""

from __future__ import annotations

import contextvars
import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from folio.nodes.backends.book_tools import PendingJobs, shared_pool
from folio.nodes.backends.searxng import SearxngSource
from folio.nodes.core.kiwix_types import ContextSection, KiwixContext, KiwixResult
from folio.nodes.core.types import Citation, Deadline, FolioError, RouteDecision, SourceResult
from folio.nodes.query.source_fusion import (
    NO_RESULTS,
    _dedupe,
    _fuse_results,
    _is_refusal,
    _join,
    _kiwix_source_results,
    _looks_empty,
    _merge_group,
    fused_context,
    source_names,
    source_plan,
)

ORDER = ("book", "kiwix", "web", "news")
WHALE = "The sperm whale dives deep. It hunts giant squid in the dark. Its head holds spermaceti oil."
WHALE_SHORT = "The sperm whale dives very deep. It hunts the giant squid in the dark."
NEON = "Neon is a noble gas. Its atomic number is ten. It glows red in lamps."


def result(source: str, text: str, label: str = "", clause: str = "q") -> SourceResult:
    return SourceResult(
        source, label or source, text, (Citation(source, title=label or source),), clause=clause
    )


def test_source_names_are_lowercased_deduplicated_and_capped() -> None:
    assert source_names([" Kiwix", "book", "KIWIX", "web", "news"], 3) == ("kiwix", "book", "web")


def test_unknown_source_name_is_a_folio_error() -> None:
    with pytest.raises(FolioError, match="unknown source 'gopher'"):
        source_names(["book", "gopher"], 4)


@pytest.mark.parametrize(
    "text", ["", "   ", "No results found.", "no results found for 'xyz'", "Nothing found"]
)
def test_looks_empty_phrases_are_empty(text: str) -> None:
    assert _looks_empty(text)


@pytest.mark.parametrize(
    "text",
    [
        NEON,
        "No resultant force acts on a body at rest.",
        "No results found.\nNeon is a noble gas.",
        "Nothing found its way out of the black hole, the theory said.",
        "Not found in nature as a free element, sodium is made by electrolysis.",
        "No match for the champion was found in the whole kingdom that year.",
    ],
)
def test_a_result_that_only_begins_like_an_empty_phrase_is_a_result(text: str) -> None:
    assert not _looks_empty(text)


def test_the_books_refusal_is_recognised_by_its_first_line() -> None:
    assert _is_refusal("I could not find support for this in the books.\nSearched:\n- text_search: x")
    assert not _is_refusal("I could not find support for the bridge, said the engineer. It fell.")


def test_a_book_refusal_survives_as_a_note_when_another_source_answers() -> None:
    refusal = result(
        "book", "I could not find support for this in the books.\nSearched:\n- x", clause="who is ahab"
    )
    text, kept, notes = _fuse_results([refusal, result("kiwix", NEON, clause="what is neon")], ORDER, 1500)
    assert text == NEON and [r.source for r in kept] == ["kiwix"]
    assert notes == ('book: "who is ahab": I could not find support for this in the books.',)
    # alone, it is no result (the answer shows the refusal itself) and no note repeats it
    assert _fuse_results([refusal], ORDER, 1500) == (NO_RESULTS, (), ())


def kiwix_result(*sections: ContextSection) -> KiwixResult:
    q = "What glows, neon or the sperm whale?"  # half the subject's words in each section
    return KiwixResult(q, q, tuple(s.source for s in sections), (), KiwixContext("", sections), ())


def test_each_kiwix_book_is_a_source_result_with_its_section_and_url() -> None:
    one = ContextSection("wiki", "Neon", "zim://wiki/A/Neon", 30.0, NEON, "A/Neon", "Uses")
    two = ContextSection("ray", "Ray Charles", "http://k/ray/A/Ray", 20.0, WHALE, "A/Ray", "")
    results = _kiwix_source_results(kiwix_result(one, two))
    assert [(r.label, r.text) for r in results] == [("Neon › Uses", NEON), ("Ray Charles", WHALE)]
    assert results[0].citations == (  # the passage is the quote, for the page to mark
        Citation(
            "kiwix",
            zim="wiki",
            path="A/Neon",
            title="Neon",
            url="zim://wiki/A/Neon",
            section="Uses",
            quote=NEON,
        ),
    )
    assert _kiwix_source_results(kiwix_result())[0].text == "no results found"


def test_a_damaged_kiwix_book_is_a_note_while_the_others_answer() -> None:
    import dataclasses

    one = ContextSection("ray", "Ray Charles", "zim://ray/A/Ray", 20.0, WHALE, "A/Ray", "")
    damaged = dataclasses.replace(
        kiwix_result(one), errors=(("wp", "damaged ZIM archive (Data corruption detected)"),)
    )
    [result] = _kiwix_source_results(damaged)
    assert result.text == WHALE
    assert result.notes == ("kiwix: wp: damaged ZIM archive (Data corruption detected)",)
    assert _kiwix_source_results(kiwix_result(one))[0].notes == ()


def test_a_multi_book_kiwix_answer_has_one_level_of_headers_and_keeps_both_books() -> None:
    one = ContextSection("wiki", "Neon", "u1", 30.0, NEON * 3, "A/Neon", "")
    two = ContextSection("ray", "Sperm whale", "u2", 20.0, WHALE, "A/Whale", "Diet")
    kiwix = _kiwix_source_results(kiwix_result(one, two))
    text, kept, _ = _fuse_results([*kiwix, result("web", "Lamps glow in many colours at night.")], ORDER, 100)
    assert [r.label for r in kept] == ["Neon", "Sperm whale › Diet", "web"]
    assert text.count("[") == 3 and "[wiki" not in text  # one header per book, none inside
    assert "[KIWIX — Sperm whale › Diet]\nThe sperm whale dives deep." in text
    alone, kept, _ = _fuse_results(kiwix[::-1], ORDER, 1500)  # the books in the order Kiwix gives them
    assert [r.label for r in kept] == ["Sperm whale › Diet", "Neon"]
    alone, _, _ = _fuse_results(kiwix, ORDER, 1500)
    assert alone.startswith("[KIWIX — Neon]\n") and "\n\n---\n\n[KIWIX — Sperm whale › Diet]\n" in alone


def test_zero_results_give_the_no_results_line() -> None:
    text, kept, notes = _fuse_results(
        [result("kiwix", "no results found"), SourceResult("web", "web", "", error="timed out after 1 s")],
        ORDER,
        1500,
    )
    assert (text, kept) == (NO_RESULTS, ())
    assert notes == ("web: timed out after 1 s",)


def test_one_survivor_is_returned_as_it_is_without_header() -> None:
    text, kept, _ = _fuse_results([result("kiwix", NEON), result("web", "No results")], ORDER, 1500)
    assert text == NEON
    assert [r.source for r in kept] == ["kiwix"]


def test_two_results_get_headers_separators_and_truncation() -> None:
    text, _, _ = _fuse_results(
        [result("web", NEON, "Neon"), result("kiwix", WHALE * 5, "Sperm whale")], ORDER, 100
    )
    first, second = text.split("\n\n---\n\n")
    assert first.startswith("[KIWIX — Sperm whale]\n") and len(first.split("\n", 1)[1]) <= 100
    assert second == f"[WEB — Neon]\n{NEON}"


def test_overlapping_result_with_fewer_sentences_is_dropped() -> None:
    kept = _dedupe([result("web", WHALE_SHORT), result("kiwix", WHALE)])
    assert [r.source for r in kept] == ["kiwix"]


@settings(max_examples=60, deadline=None)
@given(st.permutations(range(4)))
def test_deduplication_does_not_depend_on_completion_order(order: list[int]) -> None:
    results = [
        result("kiwix", WHALE, "a"),
        result("web", WHALE_SHORT, "b"),
        result("news", NEON, "c"),
        result("book", NEON + " Neon was found in 1898.", "d"),
    ]
    arrived = [results[i] for i in order]
    text, kept, _ = _fuse_results(arrived, ORDER, 1500)
    expected_text, expected_kept, _ = _fuse_results(results, ORDER, 1500)
    assert text == expected_text
    assert {r.label for r in kept} == {r.label for r in expected_kept}
    assert {r.label for r in kept} == {"a", "d"}


def test_same_source_clauses_merge_under_one_header_with_repeats_once() -> None:
    a = result("kiwix", "Indoor air quality is measured by CO2.\nVentilation helps.", "Air", "air quality")
    b = result("kiwix", "Ventilation helps!\nDoor locks are in the hall.", "Locks", "doors locked")
    merged = _merge_group([a, b])
    # items (clauses) between ---; a line saying an earlier item's sentence again (in substance) goes
    assert (
        merged.text
        == "Indoor air quality is measured by CO2.\nVentilation helps.\n---\nDoor locks are in the hall."
    )
    one_line = _merge_group(
        [result("kiwix", "Air is fine.", "A", "x"), result("kiwix", "Doors are locked.", "B", "y")]
    )
    assert one_line.text == "Air is fine.\n---\nDoors are locked."
    text, _, _ = _fuse_results([a, b, result("web", WHALE, "Whales")], ORDER, 1500)
    assert text.count("[KIWIX") == 1 and "[FUSION" not in text
    assert text.count("Ventilation helps") == 1


def test_merged_clauses_keep_the_questions_order_not_the_alphabet() -> None:
    doors = result("kiwix", "Door locks are in the hall.", "doors", "are the doors locked")
    air = result("kiwix", "Indoor air quality is measured by CO2.", "air quality", "is the air quality good")
    _, kept, _ = _fuse_results([doors, air], ORDER, 1500)
    assert kept[0].label == "doors + air quality"
    assert kept[0].clause == "are the doors locked / is the air quality good"


def test_header_is_not_doubled_when_label_equals_source() -> None:
    text = _join([result("kiwix", NEON, "kiwix"), result("web", WHALE, "WEB")], 1500)
    assert "[KIWIX]\n" in text and "[WEB]\n" in text and "KIWIX — KIWIX" not in text


def test_merged_citation_markers_are_renumbered() -> None:
    a = SourceResult(
        "book", "B", "One [1]\nTwo [2]", (Citation("book", chunk_id="x"), Citation("book", chunk_id="y"))
    )
    b = SourceResult("book", "B", "Three [1]", (Citation("book", chunk_id="z"),))
    merged = _merge_group([a, b])
    assert merged.text == "One [1]\nTwo [2]\n---\nThree [3]"
    assert [c.chunk_id for c in merged.citations] == ["x", "y", "z"]


def test_source_plan_routes_book_clauses_to_books_and_others_to_external_sources() -> None:
    routes = (
        RouteDecision("BOOK", 0.9, (), ("b1",), "", "who is ahab"),
        RouteDecision("NOT_BOOK", 0.9, (), (), "", "what is neon"),
    )
    web = {"web": lambda c: None}
    plan = source_plan(routes, web, True, ["book", "kiwix", "web", "kiwix"], 4)
    assert plan == (("book", "who is ahab"), ("kiwix", "what is neon"), ("web", "what is neon"))
    assert source_plan(routes[1:], {}, False, ["book", "kiwix"], 4) == (("book", "what is neon"),)
    assert source_plan(routes[1:], web, False, ["book", "kiwix"], 4) == (("book", "what is neon"),)


def test_straggler_is_abandoned_and_fast_result_survives_within_deadline() -> None:
    finished = threading.Event()

    def slow(clause: str) -> SourceResult:
        time.sleep(2.0)
        finished.set()
        return result("web", "late " + clause)

    def fast(clause: str) -> SourceResult:
        return result("kiwix", NEON)

    t0 = time.monotonic()
    pending = PendingJobs(shared_pool(12), [("web", "q", slow), ("kiwix", "q", fast)])
    done, failed = pending.collect(0.5)
    elapsed = time.monotonic() - t0
    assert elapsed < 0.5 + 0.5
    assert [s for s, _, _ in done] == ["kiwix"]
    assert failed == [("web", "q", "timed out after 0.5 s")]
    assert not finished.is_set()
    assert finished.wait(3.0), "the straggler keeps running in the background"


def test_contextvars_are_copied_into_workers() -> None:
    var: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="none")
    var.set("req-42")
    pending = PendingJobs(shared_pool(12), [("kiwix", "q", lambda c: result("kiwix", var.get()))])
    done, _ = pending.collect(2.0)
    assert done[0][2].text == "req-42"


def test_failing_source_becomes_a_note_and_others_answer() -> None:
    def broken(clause: str) -> SourceResult:
        raise FolioError("http://127.0.0.1:1", "cannot reach SearXNG")

    pending = PendingJobs(
        shared_pool(12), [("web", "q", broken), ("kiwix", "q", lambda c: result("kiwix", NEON))]
    )
    done, failed = pending.collect(2.0)
    context = fused_context(
        (*[r for _, _, r in done], *[SourceResult(s, s, "", error=w) for s, _, w in failed]),
        list(ORDER),
        4,
        1500,
    )
    assert context.text == NEON
    assert context.notes == ("web: cannot reach SearXNG",)


def test_shared_pool_is_one_long_lived_pool() -> None:
    assert shared_pool(12) is shared_pool(12)


def test_the_ask_deadline_cuts_the_wait_before_the_fusion_timeout() -> None:
    release = threading.Event()
    pending = PendingJobs(shared_pool(12), [("web", "q", lambda c: release.wait(5.0))])
    started = time.monotonic()
    done, failed = pending.collect(10.0, Deadline.after(0.3))
    release.set()
    assert time.monotonic() - started < 0.3 + 0.5
    assert (done, failed) == ([], [("web", "q", "the ask's deadline of 0.3 s passed")])


def test_an_abandoned_source_job_does_not_keep_the_process_alive() -> None:
    import subprocess
    import sys

    code = (
        "import time; from folio.nodes.backends.book_tools import PendingJobs, shared_pool;"
        "p = PendingJobs(shared_pool(12), [('web', 'q', lambda c: time.sleep(600))]);"
        "print(p.collect(0.2)[1])"
    )
    started = time.monotonic()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[('web', 'q', 'timed out after 0.2 s')]"
    assert time.monotonic() - started < 60  # a ThreadPoolExecutor would join its worker for 600 s


def test_a_trickling_searxng_fails_within_its_overall_deadline() -> None:
    from tests.servers import TricklingHTTPServer

    with TricklingHTTPServer(interval=0.1, gives_up_after=20.0) as server:
        source = SearxngSource(server.url, "web", timeout=1.0)
        started = time.monotonic()
        with pytest.raises(FolioError, match=r"no answer within 1\.0 s"):
            source.search("neon")
        assert time.monotonic() - started < 1.0 + 1.0


def _searxng_server(body: dict, status: int = 200):
    import json as _json
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            seen.append(self.path)
            data = _json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, seen


def test_searxng_news_source_returns_cited_lines() -> None:
    from folio.nodes.backends.searxng import SearxngSource

    rows = [
        {"title": "Neon  lights", "url": "https://example.org/neon", "content": "Neon glows red."},
        {"title": "x"},
    ]
    server, seen = _searxng_server({"results": rows})
    try:
        result = SearxngSource(f"http://127.0.0.1:{server.server_address[1]}", "news")("neon")
    finally:
        server.shutdown()
    assert result.text == "Neon lights: Neon glows red."
    assert result.citations[0].as_dict() == {
        "source": "news",
        "url": "https://example.org/neon",
        "title": "Neon lights",
    }
    assert "format=json" in seen[0] and "categories=news" in seen[0]


def test_searxng_without_json_format_is_a_one_line_error() -> None:
    from folio.nodes.backends.searxng import SearxngSource

    server, _ = _searxng_server({}, status=403)
    try:
        with pytest.raises(FolioError, match="HTTP 403 \\(is the json format enabled"):
            SearxngSource(f"http://127.0.0.1:{server.server_address[1]}", "web")("neon")
    finally:
        server.shutdown()
