"""Tests for nodes/readers/: every real file of ../shared/data/formats against the table in
docs/formats.md, the PDF, MOBI, HTML, Markdown, FB2 and DOCX readers' rules on real books, and their pure
helpers (layout, page labels, PalmDOC, the format table, located citations)."""

from __future__ import annotations

import functools
import re
from pathlib import Path

import pytest

from folio.nodes.core.types import Citation, FolioError, ParsedBook
from folio.nodes.ingest.parsing import parsed_book
from folio.nodes.readers import common, mobi, ocr, pdf, pdf_layout, table
from folio.nodes.readers.pdf_layout import Line, Piece
from tests.conftest import DATA_DIR, REPO_DIR

FORMATS = DATA_DIR / "formats"
DOC = REPO_DIR / "docs" / "formats.md"
README = REPO_DIR / "README.md"
ROW = re.compile(r"^\| `([^`]+)` \| (\w+) \| (.+?) \|$")


@functools.cache
def _parsed(relative: str) -> ParsedBook | FolioError:
    try:
        return parsed_book(str(FORMATS / relative))
    except FolioError as exc:
        return exc


def _book(relative: str) -> ParsedBook:
    book = _parsed(relative)
    assert isinstance(book, ParsedBook), book
    return book


def _outcome(relative: str) -> tuple[str, str]:
    """``(format or "refused", outcome)`` as docs/formats.md writes it."""
    book = _parsed(relative)
    if isinstance(book, FolioError):
        return "refused", book.reason
    words = sum(len(c.text.split()) for c in book.chapters)
    pages = f", {book.page_count} pages" if book.page_count else ""
    return book.format, f"{len(book.chapters)} chapters, {words:,} words{pages}"


def _doc_rows(doc: Path = DOC) -> list[tuple[str, str, str]]:
    """The rows of the outcome table of docs/formats.md or the README (the section "What every file ...
    gives"), the Calibre libraries' rows left to tests/test_calibre.py."""
    text = doc.read_text(encoding="utf-8")
    section = text.split("## What every file", 1)[1].split("\n## ", 1)[0]
    rows = [m.groups() for line in section.splitlines() if (m := ROW.match(line))]
    return [row for row in rows if not row[0].startswith("calibre/")]


def _format_files() -> list[str]:
    skip = ("SOURCES.md", "MANIFEST.sha256")
    return sorted(
        p.relative_to(FORMATS).as_posix()
        for p in FORMATS.rglob("*")
        if p.is_file()
        and not p.relative_to(FORMATS).as_posix().startswith("calibre/")
        and p.name not in skip
        and not p.name.endswith(".ground-truth.txt")
    )


# --- the table of docs/formats.md against the real files ----------------------------------------------


def test_the_table_lists_every_format_file_once_and_the_readme_gives_the_same_rows() -> None:
    listed = [row[0] for row in _doc_rows()]
    assert sorted(listed) == _format_files()
    assert _doc_rows(README) == _doc_rows()


@pytest.mark.parametrize("row", _doc_rows(), ids=lambda row: row[0])
def test_every_format_file_gets_the_outcome_the_table_says(
    row: tuple[str, str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    relative, kind, outcome = row
    if "no text layer" in outcome:  # the outcome without folio[ocr] (with it: test_ocr_reads_the_linn_page)
        monkeypatch.setattr(ocr, "available", lambda: False)
        with pytest.raises(FolioError) as caught:
            parsed_book(str(FORMATS / relative))
        assert (kind, caught.value.reason) == ("refused", outcome)
        return
    assert _outcome(relative) == (kind, outcome)


# --- PDF -------------------------------------------------------------------------------------------


def _raw_pages(relative: str) -> list[str]:
    import pypdfium2

    doc = pypdfium2.PdfDocument(str(FORMATS / relative))
    try:
        return [doc[i].get_textpage().get_text_bounded() for i in range(len(doc))]
    finally:
        doc.close()


def test_free_culture_chapters_follow_the_outline() -> None:
    titles = [c.title for c in _book("pdf/lessig-free-culture.pdf").chapters]
    numbered = [t for t in titles if re.match(r"(Chapter )?\d+:", t)]
    assert numbered[0] == "Chapter 1: Creators" and len(numbered) == 14
    assert [int(re.search(r"\d+", t).group()) for t in numbered] == list(range(1, 15))
    assert titles[titles.index("3: Catalogs") + 1] == '4: "Pirates"'  # "Film" and kin stay inside
    assert {"PREFACE", "INTRODUCTION", "CONCLUSION", "NOTES", "INDEX"} <= set(titles)


def test_free_culture_text_holds_no_running_header_and_no_bare_page_number() -> None:
    furniture = set()
    for page in _raw_pages("pdf/lessig-free-culture.pdf"):
        lines = [" ".join(line.split()) for line in page.replace("\r", "").split("\n")]
        for line in lines[:3] + lines[-3:]:  # a page's running head and foot
            if re.fullmatch(r"\d{1,3} FREE CULTURE|“[A-Z]+” \d{1,3}|[A-Z]+ \d{1,3}", line):
                furniture.add(line)
    assert len(furniture) >= 150 and "“PIRACY” 57" in furniture  # the running heads the check looks for
    for chapter in _book("pdf/lessig-free-culture.pdf").chapters:
        paragraphs = chapter.text.split("\n\n")
        assert not [p for p in paragraphs if pdf_layout.is_page_number(p)], chapter.title
        if chapter.title != "CONTENTS":  # its entries ("INDEX 333") look like running heads
            assert not [f for f in furniture if re.search(rf"(^|\s){re.escape(f)}(\s|$)", chapter.text)]
        assert "4TH PASS PAGES" not in chapter.text and ".qxd" not in chapter.text  # printer's marks


@pytest.mark.parametrize(
    "sentence",
    [
        "In the fall of 2002, Jesse Jordan of Oceanside, New York",
        "The idea of “intranet” search engines, search engines that search within",
        "the Copyright Act specifies something lawyers call “statutory damages.”",
    ],
)
def test_a_free_culture_passage_is_located_on_its_printed_page(sentence: str) -> None:
    pages = _raw_pages("pdf/lessig-free-culture.pdf")
    key = " ".join(sentence.split()[:6])
    index = next(i for i, page in enumerate(pages) if key in " ".join(page.split()))
    text = pages[index].replace("\r", "")
    footer = re.search(r"(?m)^(?:(\d{1,3}) FREE CULTURE|“[A-Z]+” (\d{1,3})|(\d{1,3}))\s*$", text)
    printed = next(g for g in footer.groups() if g)
    chapter = next(c for c in _book("pdf/lessig-free-culture.pdf").chapters if key in c.text)
    start = chapter.text.index(key)
    assert chapter.title == "3: Catalogs"
    assert common.page_span(chapter.pages, start, start + len(key)) == printed


PD_KIDS_PIECES = [  # every "Title / by Author" piece of the PDF, in order (read off its pages)
    "The Buried Moon - An English Fairy Tale by Edmund Dulac",
    "The Kind Giver and the Grudging Giver by Basil Hall Chamberlain",
    "Gooloo, The Magpie, and The Wahroogah by K. Langloh Parker",
    "The Honey-Bee by Anonymous",
    "Hiawatha From Indian Myths, by Ellen Emerson",
    "Thomas Jefferson by Jean S. Remy",  # title ends page 13, its by-line starts page 14
    "Rainy Day Games from Camping for Boys, by H.W. Gibson",
    "Camp Fun & Frolics from On The Trail: An Outdoor Book For Girls, by Lina Beard and Adelia Belle Beard",
    "How I Escaped by Frederick Douglass",
    "Life's Mirror by Madeline S. Bridges",
    "If-- by Rudyard Kipling",
    "THE BEAVER By William Holmes McGuffey",
    "The Pot Of Gold By Mary E Wilkins",
    "The Adventures of Oliver Twist by Charles Dickens and Hallie Erminie Rives",
    "The Wailuku by Charlotte Hapai",
    "The King of the Kites by W·H Drouse",
    "The Spirits of the Yellow River Translated by Frederick H. Martens",
    "The Half-Chick by Anonymous, from Spanish Tradition.",
]


def test_pd_kids_stories_are_its_chapters() -> None:
    """Its stories (and poems and pieces) are its chapters, each once, nothing else: SOURCES.md counts
    ten, the PDF holds eighteen titled pieces; the closing credits set large are not a chapter."""
    chapters = _book("pdf/pdkids-public-domain-stories.pdf").chapters
    assert [c.title for c in chapters] == PD_KIDS_PIECES
    first, jefferson = chapters[0], chapters[5]
    assert first.text.startswith("In my old Granny's days") and first.pages[0] == (0, "1")
    assert jefferson.text.startswith("When Thomas Jefferson was a boy") and jefferson.pages[0] == (0, "14")
    assert "Jefferson" not in chapters[4].text  # Hiawatha ends before the next story's title


def test_tracemonkey_reads_its_two_columns_in_order() -> None:
    text = "\n\n".join(c.text for c in _book("pdf/tracemonkey-pldi-09.pdf").chapters)
    for passage in (
        "Dynamic languages such as JavaScript, Python, and Ruby, are popular since they are expressive, "
        "accessible to non-experts, and make deployment as easy as distributing a source file.",
        "Compilers for statically typed languages rely on type information to generate efficient machine "
        "code. In a dynamically typed programming language such as JavaScript, the types of expressions "
        "may vary at runtime.",
    ):
        assert passage in text
    assert text.index("Dynamic languages such as JavaScript, Python") < text.index("Compilers for statically")
    book = _book("pdf/tracemonkey-pldi-09.pdf")
    titles = [c.title for c in book.chapters]
    assert titles[0] == book.title  # the title block and abstract, before the first heading
    assert titles[1:3] == ["1. Introduction", "2. Overview: Example Tracing Run"]  # headings 1.22x body
    assert titles[-3:] == ["10. Future Work", "Acknowledgments", "References"]
    assert not [t for t in titles[1:] if t[:1].islower()]  # no sentence "by nesting random ..." as a by-line


def test_a_title_ending_a_page_joins_the_by_line_that_starts_the_next() -> None:
    def line(top: float, text: str) -> Line:
        return Line(50, top - 10, 400, top, text, 10.5, 0)

    story_end = [
        line(700, "and so it ended."),
        line(300, "(source: PG EBook #1)"),
        line(70, "Thomas Jefferson"),
    ]
    next_page = [line(730, "by Jean S. Remy"), line(700, "When Thomas Jefferson was a boy")]
    moved = pdf.carried_titles([story_end, next_page])
    assert [ln.text for ln in moved[0]] == ["and so it ended.", "(source: PG EBook #1)"]
    assert [ln.text for ln in moved[1]][:2] == ["Thomas Jefferson", "by Jean S. Remy"]
    sentence = [line(700, "tester, JSFUNFUZZ, which generates random programs")]
    prose = [line(730, "by nesting random language elements. We modified it"), *next_page[1:]]
    assert pdf.carried_titles([sentence, prose]) == [sentence, prose]  # "by" + lower case: no by-line
    assert pdf._heading_lines([*sentence, *prose], 1.2 * 10.5) == set()


@pytest.mark.parametrize(
    "relative", ["pdf/scanned-huck-finn-ch2-page22.pdf", "pdf/vector-text-as-curves.pdf"]
)
def test_a_pdf_without_text_layer_is_one_line_saying_what_to_do(
    relative: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ocr, "available", lambda: False)  # folio[ocr] not installed
    with pytest.raises(FolioError) as caught:
        parsed_book(str(FORMATS / relative))
    error = caught.value
    assert isinstance(error, FolioError) and "no text layer" in error.reason and "folio[ocr]" in error.reason
    assert "\n" not in str(error)


# --- MOBI, EPUB -------------------------------------------------------------------------------------


def test_hound_of_the_baskervilles_mobi_has_its_15_chapters() -> None:
    book = _book("mobi/hound-of-the-baskervilles-pg2852.mobi")
    assert [c.title.split(".")[0] for c in book.chapters] == [f"Chapter {n}" for n in range(1, 16)]
    assert book.chapters[0].title == "Chapter 1. Mr. Sherlock Holmes"
    assert (book.title, book.author, book.language) == (
        "The Hound of the Baskervilles",
        "Arthur Conan Doyle",
        "en",
    )
    assert "Project Gutenberg" not in book.chapters[-1].text  # the licence at the end is cut


def test_a_joint_mobi_gives_the_chapters_of_the_same_book_as_epub() -> None:
    from_mobi = _book("mobi/childrens-literature-kf7-kf8.mobi").chapters
    from_epub = parsed_book(
        str(DATA_DIR / "books/epub/curry-clippinger_childrens-literature_section4.epub")
    ).chapters
    assert [c.title for c in from_mobi] == [c.title for c in from_epub]
    for m, e in zip(from_mobi, from_epub, strict=True):
        a, b = set(m.text.split()), set(e.text.split())
        assert len(a & b) >= 0.95 * len(b), m.title


def test_drm_is_refused_naming_it_and_font_obfuscation_is_not_drm() -> None:
    assert "Mobipocket DRM" in str(_parsed("mobi/libmobi-drm-v2.mobi"))
    assert "Readium LCP" in str(_parsed("epub/moby-dick-lcp-drm.epub"))
    wasteland = _book("epub/wasteland-font-obfuscated.epub")
    assert any("April is the cruellest month" in c.text for c in wasteland.chapters)


def test_a_cp1252_mobi_decodes_its_text() -> None:
    book = _book("mobi/libmobi-mobi6-cp1252.mobi")
    assert book.author == "Bartek Fabiszewski" and "Mobipocket" in book.chapters[0].text


def test_palmdoc_decompresses_literals_pairs_and_space_pairs() -> None:
    # "ab" literal, 0xC1 = " A", a back-reference of distance 3 length 3 ((3 << 3) | 0 | 0x8000)
    assert mobi.palmdoc(b"ab\xc1" + bytes([0x80, (3 << 3) | 0])) == b"ab Ab A"
    assert mobi.palmdoc(b"\x02\x00\xffx") == b"\x00\xffx"
    with pytest.raises(ValueError):
        mobi.palmdoc(bytes([0x80, 0xF8]))  # a back-reference before the start


# --- FB2, DOCX, HTML, Markdown -------------------------------------------------------------------------


def test_fb2_and_docx_and_markdown_and_html_chapters_come_from_their_headings() -> None:
    aristotle = _book("other/aristotle-history-of-animals.fb2")
    assert [c.title for c in aristotle.chapters] == [
        f"Book {n}" for n in ["I", "II", "III", "IV", "V", "VI", "VII", "VIII", "IX"]
    ]
    poem = _book("other/asnyk-poem-with-note.fb2")
    assert poem.title == "Między nami nic nie było" and "[1]" not in poem.chapters[0].text
    handbook = _book("other/doj-chapter13-trustee-handbook.docx")
    assert all(c.title.startswith("CHAPTER") for c in handbook.chapters)
    flatland = _book("other/abbott-flatland.md")
    sections = [c.title for c in flatland.chapters if c.title.startswith("Section")]
    assert len(sections) == 22 and (flatland.title, flatland.author) == ("Flatland", "Edwin A. Abbott")
    pride = _book("other/pride-and-prejudice-pg1342.html")
    chapters = [c.title for c in pride.chapters if c.title.upper().startswith("CHAPTER")]
    assert len(chapters) == 61
    assert pride.chapters[1].text.startswith("IT is a truth universally acknowledged")
    assert pride.chapters[2].text.startswith("MR. BENNET was among the earliest")  # the drop cap's letter
    assert all("Project Gutenberg" not in c.text for c in pride.chapters)


# --- the format table ------------------------------------------------------------------------------


def test_the_format_table_picks_by_magic_then_suffix_and_refuses_a_lying_suffix(tmp_path: Path) -> None:
    assert table.format_of("x.txt", b"%PDF-1.4 ...").name == "pdf"
    assert table.format_of("x.bin", b"\0" * 60 + b"BOOKMOBI").name == "mobi"
    assert table.format_of("x.md", b"# Title").name == "markdown"
    assert table.format_of("x.htm", b"<html>").name == "html"
    assert table.format_of("notes", b"plain words").name == "txt"
    for name, what in (("a.pdf", "not a PDF"), ("a.mobi", "not a MOBI/AZW3"), ("a.epub", "not an EPUB")):
        with pytest.raises(FolioError, match=what):
            table.format_of(name, b"just some text")
    assert {".pdf", ".mobi", ".azw3", ".fb2", ".docx", ".html", ".md", ".epub", ".txt"} <= set(
        table.BOOK_SUFFIXES
    )


# --- PDF layout helpers ------------------------------------------------------------------------------


def _piece(left: float, top: float, text: str, width: float = 200.0) -> Piece:
    return Piece(left, top - 10, left + width, top, text, 10.0)


def test_two_column_pieces_read_the_left_column_before_the_right() -> None:
    pieces = [_piece(50, 700, "Title across the page", 500)]
    for n in range(6):
        pieces.append(_piece(320, 650 - 14 * n, f"right {n}"))
        pieces.append(_piece(50, 650 - 14 * n, f"left {n}"))
    lines = pdf_layout.page_lines(pieces, 40, 580)
    assert [ln.text for ln in lines] == ["Title across the page"] + [f"left {n}" for n in range(6)] + [
        f"right {n}" for n in range(6)
    ]
    single = pdf_layout.page_lines([_piece(50, 700 - 14 * n, f"line {n}", 480) for n in range(6)], 40, 580)
    assert [ln.column for ln in single] == [0] * 6


def test_headers_footers_and_printed_numbers_are_found() -> None:
    def page(n: int) -> list[Line]:
        header = Line(50, 700, 300, 710, f"{n} A BOOK" if n % 2 == 0 else f"CHAPTER TITLE {n}", 10, 0)
        words = ["whale", "ship", "sea", "storm", "mast", "deck", "rope", "sail", "oar", "tide", "gull"]
        body = [
            Line(
                50, 680 - 14 * k, 500, 690 - 14 * k, f"the {words[(n + k) % 11]} {words[(n * k) % 11]}", 10, 0
            )
            for k in range(5)
        ]
        return [header, *body]

    pages = [page(n) for n in range(10, 20)]
    dropped = pdf_layout.furniture(pages)
    assert all(d == {0} for d in dropped)
    assert pdf_layout.printed_numbers(pages, dropped) == [str(n) for n in range(10, 20)]
    assert pdf_layout.is_page_number("xiv") and pdf_layout.is_page_number("- 12 -")
    assert not pdf_layout.is_page_number("1928 was a year")


def test_paragraphs_join_hyphenated_lines_and_break_at_indents() -> None:
    lines = [
        Line(50, 690, 500, 700, "It was a remark-", 10, 0),
        Line(50, 676, 500, 686, "able thing to say.", 10, 0),
        Line(70, 662, 500, 672, "A new paragraph starts here", 10, 0),
        Line(50, 648, 300, 658, "and ends.", 10, 0),
    ]
    assert pdf_layout.paragraphs(lines, 40, 520) == [
        ("It was a remarkable thing to say.", True),
        ("A new paragraph starts here and ends.", True),
    ]


def test_page_labels_prefer_the_pdfs_own_then_the_printed_number() -> None:
    assert pdf.page_labels(["i", "", ""], ["", "1", ""]) == ["i", "1", "pdf 3"]
    assert pdf.page_labels(["", ""], ["", ""]) == ["1", "2"]
    starts = pdf.outline_starts(
        [(0, "PART", 3, None), (1, "Ch 1", 4, None), (2, "Sec", 5, None), (0, "END", 9, None)]
    )
    assert [t for t, _, _ in starts] == ["PART", "Ch 1", "END"]


# --- located citations --------------------------------------------------------------------------------


def test_page_marks_and_spans() -> None:
    marks = common.page_marks(
        [("one", ((0, "5"),)), ("two", ((0, "5"),)), ("three four", ((0, "6"), (6, "7")))]
    )
    assert marks == ((0, "5"), (10, "6"), (16, "7"))
    assert common.page_span(marks, 0, 3) == "5" and common.page_span(marks, 5, 12) == "5-6"
    assert common.page_span((), 0, 3) == ""


def test_a_citation_is_located_by_page_or_by_percent() -> None:
    cite = Citation("book", "b", "c2", "3: Catalogs", "c2.000", 15, 30)
    paged = {
        "title": "Free Culture",
        "characters": 100,
        "chapters": [{"chapter_id": "c2", "offset": 50, "pages": [[0, "47"], [10, "48"]]}],
    }
    located = common.located_citation(cite, paged)
    assert (located.book_title, located.page, located.percent) == ("Free Culture", "48", None)
    assert common.location_text(located) == "Free Culture, ch. 3: Catalogs, p. 48"
    flowing = {"title": "Hound", "characters": 200, "chapters": [{"chapter_id": "c2", "offset": 50}]}
    located = common.located_citation(cite, flowing)
    assert located.percent == 32.5 and located.as_dict()["percent"] == 32.5
    assert common.location_text(located) == "Hound, ch. 3: Catalogs, 32.5%"


def test_the_formats_bench_measures_reader_speed_and_pdf_memory() -> None:
    from bench.formats_bench import pdf_peak_memory, reader_speed

    row = reader_speed(FORMATS / "pdf/pdkids-public-domain-stories.pdf")
    assert row is not None and row["pages"] == 55 and row["pages_per_s"] > 0 and row["mb_per_s"] > 0
    assert reader_speed(FORMATS / "mobi/libmobi-drm-v2.mobi") is None  # refused: no speed
    memory = pdf_peak_memory(FORMATS / "pdf/pdkids-public-domain-stories.pdf")
    assert memory["peak_rss_mb"] > memory["import_only_peak_rss_mb"] > 10


def test_a_cited_pdf_page_renders_as_a_png_with_the_passage_marked() -> None:
    import struct
    import zlib

    import numpy as np

    from folio.nodes.readers.pdf_image import page_index, page_png

    labels = _book("pdf/lessig-free-culture.pdf").page_labels
    index = page_index(labels, "48-49")
    assert labels[index] == "48" and index == 61
    with pytest.raises(FolioError, match="no such page"):
        page_index(labels, "9999")
    path = str(FORMATS / "pdf/lessig-free-culture.pdf")

    def pixels(data: bytes) -> np.ndarray:
        assert data.startswith(b"\x89PNG\r\n\x1a\n")
        width, height = struct.unpack(">II", data[16:24])
        raw, at = b"", 8
        while at < len(data):
            size = struct.unpack(">I", data[at : at + 4])[0]
            if data[at + 4 : at + 8] == b"IDAT":
                raw += data[at + 8 : at + 8 + size]
            at += size + 12
        rows = np.frombuffer(zlib.decompress(raw), np.uint8).reshape(height, 1 + 3 * width)
        return rows[:, 1:].reshape(height, width, 3)

    plain = pixels(page_png(path, index))
    marked = pixels(page_png(path, index, "In the fall of 2002, Jesse Jordan of Oceanside"))
    changed = np.argwhere((plain != marked).any(axis=2))
    assert len(changed) > 500  # the passage's boxes are tinted
    assert (marked[tuple(changed.T)][:, 2] < plain[tuple(changed.T)][:, 2]).all()  # less blue: yellow
    top = changed[:, 0].min() / plain.shape[0]
    assert 0.4 < top < 0.6  # the chapter's first line, below its heading, as on the printed page


def test_folio_ask_prints_a_located_citation() -> None:
    from folio.dataflows.formatting import format_answer
    from folio.nodes.core.types import Answer

    cite = Citation(
        "book", "free-culture-1", "c3", "3: Catalogs", "c3.000", 0, 20, book_title="Free Culture", page="48"
    )
    answer = Answer("Who?", "Jesse Jordan tinkered with a search engine [1].", (cite,), "BOOK", ("book",), 1)
    assert "[1] Free Culture, ch. 3: Catalogs, p. 48 — free-culture-1 c3.000" in format_answer(answer)


@pytest.mark.slow
def test_ocr_reads_the_linn_page() -> None:
    """folio[ocr] on the scanned two-column page (minutes on a loaded 2-core machine)."""
    if not ocr.available():
        pytest.skip(f"folio[ocr] is not installed ({ocr.INSTALL})")
    from bench.formats_bench import ocr_accuracy

    result = ocr_accuracy(DATA_DIR)
    assert result["word_accuracy"] >= 0.7, result  # 0.757 measured at 300 dpi


def test_word_accuracy_counts_the_truths_words_found_in_order() -> None:
    from bench.formats_bench import word_accuracy

    assert word_accuracy("The quick brown fox", "the quick brown fox") == 1.0
    assert word_accuracy("quick fox", "the quick brown fox") == 0.5
    assert word_accuracy("fox brown quick the", "the quick brown fox") == 0.25


# --- located citations end to end (ingest: the model tier) ----------------------------------------------


@pytest.fixture(scope="module")
def formats_library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from folio.dataflows.api import ingest

    path = tmp_path_factory.mktemp("formats-library")
    report = ingest(
        [
            FORMATS / "pdf/pdkids-public-domain-stories.pdf",
            FORMATS / "mobi/hound-of-the-baskervilles-pg2852.mobi",
        ],
        library=path,
    )
    assert report.ok, [str(e) for e in report.errors]
    return path


def test_answers_cite_the_pdf_page_and_the_mobi_position(formats_library: Path) -> None:
    from folio.dataflows.asking import ask
    from folio.dataflows.library import Library

    config = {"llm": "none", "search_mode": "lexical"}
    answer = ask("Who was trapped and buried in the bog?", library=formats_library, config=config)
    cite = next(c for c in answer.citations if c.kind == "book")
    assert cite.book_title == "pdkids-public-domain-stories" and cite.percent is None
    pages = _raw_pages("pdf/pdkids-public-domain-stories.pdf")
    key = " ".join(cite.quote.split()[:5])
    printed = [str(i + 1) for i, page in enumerate(pages) if key in " ".join(page.split())]
    assert cite.page in printed, (cite.page, printed, cite.quote)

    answer = ask("What did Sir Henry lose at the hotel?", library=formats_library, config=config)
    cite = next(c for c in answer.citations if c.kind == "book")
    descriptor = next(d for d in Library(formats_library).descriptors() if d["book_id"] == cite.book_id)
    chapter = next(c for c in descriptor["chapters"] if c["chapter_id"] == cite.chapter_id)
    assert cite.book_title == "The Hound of the Baskervilles" and cite.page == ""
    assert cite.percent == round(100 * (chapter["offset"] + cite.start) / descriptor["characters"], 1)
    assert 0 < cite.percent < 100 and cite.as_dict()["percent"] == cite.percent
