"""Tests for nodes/ingest/parsing.py: real EPUB and Project Gutenberg books, bad input, and the
pure helpers."""

from __future__ import annotations

import csv
import os
import re
import time
import zipfile
from pathlib import Path

import pytest

from folio.nodes.core.types import FolioError, Manifest, ParsedBook, RawChapter
from folio.nodes.ingest import parsing
from folio.nodes.ingest.parsing import manifest, parsed_book
from folio.nodes.readers import common, markup
from folio.nodes.readers import epub as epub_reader
from folio.nodes.readers import plain_text as text_reader
from tests.conftest import DATA_DIR

BOOKS = DATA_DIR / "books"
EPUB = BOOKS / "epub"
TXT = BOOKS / "txt"
MOBY_EPUB = EPUB / "melville_moby-dick.epub"
MOBY_QUIRKS = EPUB / "quirks" / "melville_moby-dick_mimetype-not-first.epub"
MOBY_TXT = TXT / "pg2701_melville_moby-dick.txt"
SHERLOCK = EPUB / "doyle_the-adventures-of-sherlock-holmes.epub"
CHILDRENS = EPUB / "curry-clippinger_childrens-literature_section4.epub"
ALICE_EPUB = EPUB / "carroll_alice-in-wonderland_abridged-pg19033.epub"
ALICE_TXT = TXT / "pg11_carroll_alices-adventures-in-wonderland.txt"
TIME_MACHINE = TXT / "pg35_wells_the-time-machine.txt"
GRIMM = TXT / "pg19068_grimm_household-stories_lucy-crane.txt"
POTTER = TXT / "pg572_potter_great-big-treasury.txt"
ALL_BOOKS = (
    MOBY_EPUB,
    MOBY_QUIRKS,
    MOBY_TXT,
    SHERLOCK,
    CHILDRENS,
    ALICE_EPUB,
    ALICE_TXT,
    TIME_MACHINE,
    GRIMM,
    POTTER,
)

pytestmark = pytest.mark.skipif(not DATA_DIR.is_dir(), reason=f"real test data not found at {DATA_DIR}")


@pytest.fixture(scope="module")
def books() -> dict[Path, ParsedBook]:
    return {path: parsed_book(str(path)) for path in ALL_BOOKS}


def _numbered(book: ParsedBook) -> list[int]:
    return [
        int(m.group(1)) for c in book.chapters if (m := re.match(r"chapter (\d+)\b", c.title, re.IGNORECASE))
    ]


def _key(text: str) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


# --- Moby-Dick: both formats ------------------------------------------------------------------------


@pytest.mark.parametrize("path", [MOBY_EPUB, MOBY_TXT, MOBY_QUIRKS], ids=["epub", "txt", "quirks-epub"])
def test_moby_dick_has_chapters_1_to_135_in_order_then_the_epilogue(
    books: dict[Path, ParsedBook], path: Path
) -> None:
    book = books[path]
    assert _numbered(book) == list(range(1, 136))
    assert book.chapters[-1].title == "Epilogue"
    assert book.chapters[-1].text.endswith("only found another orphan.")
    loomings = next(c for c in book.chapters if _key(c.title) == "chapter 1 loomings")
    assert loomings.text.startswith("Call me Ishmael.")


def test_moby_dick_front_matter_is_etymology_and_extracts_in_both_formats(
    books: dict[Path, ParsedBook],
) -> None:
    for path in (MOBY_EPUB, MOBY_TXT):
        chapters = books[path].chapters
        assert len(chapters) == 138
        assert _key(chapters[0].title) == "etymology"
        assert _key(chapters[1].title).startswith("extracts supplied by a sub sub librarian")
        assert "The pale Usher" in chapters[0].text
        assert "And God created great whales." in chapters[1].text
        assert not any("Transcriber" in c.title for c in chapters)


def test_moby_dick_text_takes_the_body_headings_not_the_table_of_contents(
    books: dict[Path, ParsedBook],
) -> None:
    chapters = books[MOBY_TXT].chapters
    assert all(len(c.text) > 200 for c in chapters)  # no empty chapter from the contents list
    assert chapters[56].title == "CHAPTER 55. Of the Monstrous Pictures of Whales."
    assert (
        chapters[57].title
        == "CHAPTER 56. Of the Less Erroneous Pictures of Whales, and the True Pictures of Whaling Scenes."
    )
    assert "BOOK I. (Folio)" in chapters[33].text  # Cetology's own BOOK/CHAPTER labels stay inside it


def test_moby_dick_epub_and_text_chapters_hold_the_same_amount_of_text(books: dict[Path, ParsedBook]) -> None:
    pairs = zip(books[MOBY_EPUB].chapters, books[MOBY_TXT].chapters, strict=True)
    ratios = [len(e.text.split()) / len(t.text.split()) for e, t in pairs]
    assert min(ratios) > 0.9 and max(ratios) < 1.1


def test_moby_dick_with_mimetype_not_first_parses_like_the_normal_epub(books: dict[Path, ParsedBook]) -> None:
    normal, quirks = books[MOBY_EPUB], books[MOBY_QUIRKS]
    assert [c.title for c in quirks.chapters] == [c.title for c in normal.chapters]
    assert quirks.chapters[2].text == normal.chapters[2].text


def test_epub_metadata_comes_from_the_package(books: dict[Path, ParsedBook]) -> None:
    moby = books[MOBY_EPUB]
    assert (moby.title, moby.author, moby.language, moby.format) == (
        "Moby-Dick",
        "Herman Melville",
        "en-US",
        "epub",
    )
    assert books[CHILDRENS].author == "Charles Madison Curry and Erle Elsworth Clippinger"


def test_text_metadata_comes_from_the_gutenberg_header(books: dict[Path, ParsedBook]) -> None:
    moby = books[MOBY_TXT]
    assert (moby.title, moby.author, moby.language, moby.format) == (
        "Moby Dick; or The Whale",
        "Herman Melville",
        "en",
        "txt",
    )
    potter = books[POTTER]  # old 1996-style header
    assert (potter.title, potter.author) == ("The Great Big Treasury of Beatrix Potter", "Beatrix Potter")


# --- other EPUBs -------------------------------------------------------------------------------------

SHERLOCK_STORIES = [
    "A Scandal in Bohemia",
    "The Redheaded League",
    "A Case of Identity",
    "The Boscombe Valley Mystery",
    "The Five Orange Pips",
    "The Man with the Twisted Lip",
    "The Adventure of the Blue Carbuncle",
    "The Adventure of the Speckled Band",
    "The Adventure of the Engineer’s Thumb",
    "The Adventure of the Noble Bachelor",
    "The Adventure of the Beryl Coronet",
    "The Adventure of the Copper Beeches",
]


def test_sherlock_epub_gives_its_twelve_stories_without_front_and_back_matter(
    books: dict[Path, ParsedBook],
) -> None:
    book = books[SHERLOCK]
    assert [c.title for c in book.chapters] == SHERLOCK_STORIES
    assert not any("Standard Ebooks" in c.text for c in book.chapters)


def test_sherlock_nested_parts_stay_inside_a_scandal_in_bohemia(books: dict[Path, ParsedBook]) -> None:
    scandal = books[SHERLOCK].chapters[0].text
    assert scandal.startswith("To Sherlock Holmes she is always the woman.")
    paragraphs = scandal.split("\n\n")
    assert "II" in paragraphs and "III" in paragraphs  # the part headings inside the story
    assert paragraphs.index("II") < paragraphs.index("III")
    assert "head of a private school at Walsall" not in scandal  # the next file's story is not appended


def test_childrens_literature_epub_is_split_at_its_toc_anchors(books: dict[Path, ParsedBook]) -> None:
    chapters = {c.title: c for c in books[CHILDRENS].chapters}
    assert len(chapters) >= 15
    prince = chapters["200 THE HAPPY PRINCE"]
    river = chapters["204 THE KING OF THE GOLDEN RIVER OR THE BLACK BROTHERS"]
    assert prince.text.startswith("The ill-fated Oscar Wilde")
    assert "High above the city, on a tall column, stood the statue of the Happy Prince." in prince.text
    assert "In a secluded and mountainous part of Stiria" not in prince.text
    assert river.text.startswith("John Ruskin (1819-1900)")
    assert "In a secluded and mountainous part of Stiria" in river.text
    assert "High above the city" not in river.text
    fairyfoot = chapters["199 THE STORY OF FAIRYFOOT"]
    assert "High above the city" not in fairyfoot.text and "Stumpinghame" in fairyfoot.text


def test_childrens_literature_hidden_sub_parts_stay_in_their_story(books: dict[Path, ParsedBook]) -> None:
    titles = [c.title for c in books[CHILDRENS].chapters]
    assert not any(re.match(r"(I|II|III|IV)\. ", t) for t in titles)
    clover = next(c for c in books[CHILDRENS].chapters if c.title == "190 A FOUR-LEAVED CLOVER")
    assert "1. The Rabbi and The Diadem" in clover.text and "4. An Eastern Garden" in clover.text
    paragraphs = [p for c in books[CHILDRENS].chapters for p in c.text.split("\n\n")]
    assert not any(p.isdigit() for p in paragraphs)  # page numbers (epub:type="pagebreak") are gone


def test_abridged_alice_epub_has_ten_chapters(books: dict[Path, ParsedBook]) -> None:
    chapters = books[ALICE_EPUB].chapters
    assert [c.title for c in chapters][0::9] == ["Down The Rabbit-Hole", "Alice's Evidence"]
    assert len(chapters) == 10
    assert chapters[0].text.startswith("Alice was beginning to get very tired")


# --- other texts -------------------------------------------------------------------------------------


def test_alice_text_has_twelve_chapters(books: dict[Path, ParsedBook]) -> None:
    titles = [c.title for c in books[ALICE_TXT].chapters]
    assert len(titles) == 12
    assert titles[0] == "CHAPTER I. Down the Rabbit-Hole" and titles[-1] == "CHAPTER XII. Alice’s Evidence"


def test_time_machine_has_sixteen_roman_chapters_and_the_epilogue(books: dict[Path, ParsedBook]) -> None:
    titles = [c.title for c in books[TIME_MACHINE].chapters]
    assert len(titles) == 17
    assert (
        titles[0] == "I. Introduction" and titles[15] == "XVI. After the Story" and titles[16] == "Epilogue"
    )
    assert books[TIME_MACHINE].chapters[0].text.startswith("The Time Traveller (for so it will be convenient")


def _fairytaleqa() -> tuple[dict[str, dict[str, str]], dict[str, list[str]]]:
    qa = DATA_DIR / "qa" / "fairytaleqa"
    with (qa / "stories.csv").open(encoding="utf-8") as f:
        stories = {row["story"]: row for row in csv.DictReader(f)}
    sections: dict[str, list[str]] = {}
    with (qa / "sections.csv").open(encoding="utf-8") as f:
        for row in csv.DictReader(f):
            sections.setdefault(row["story"], []).append(row["text"])
    return stories, sections


def test_every_fairytaleqa_heading_is_a_chapter_title_of_its_book(books: dict[Path, ParsedBook]) -> None:
    stories, _ = _fairytaleqa()
    with (DATA_DIR / "qa" / "fairytaleqa" / "questions.csv").open(encoding="utf-8") as f:
        headings = {(row["book_file"], row["book_heading"]) for row in csv.DictReader(f)}
    assert len(headings) == len(stories) == 26
    normalise = lambda s: " ".join(s.lower().split())  # noqa: E731
    for book_file, heading in sorted(headings):
        titles = {normalise(c.title) for c in books[DATA_DIR / book_file].chapters}
        assert normalise(heading) in titles, (book_file, heading)


def _shingles(text: str, n: int = 8) -> set[str]:
    words = _key(text).split()
    return {" ".join(words[i : i + n]) for i in range(len(words) - n + 1)}


def test_every_fairytaleqa_story_text_lies_in_the_chapter_with_its_heading(
    books: dict[Path, ParsedBook],
) -> None:
    stories, sections = _fairytaleqa()
    chapter_shingles = {
        book_file: [(c.title, _shingles(c.text)) for c in books[DATA_DIR / book_file].chapters]
        for book_file in {row["book_file"] for row in stories.values()}
    }
    for story, row in stories.items():
        gold = _shingles(" ".join(sections[story]))
        cover = [
            (len(gold & shingles) / len(gold), title)
            for title, shingles in chapter_shingles[row["book_file"]]
        ]
        best, title = max(cover)
        assert _key(title) == _key(row["book_heading"]), story
        assert best >= 0.55, story


def test_grimm_mixed_case_headings_are_stories_and_the_illustration_list_is_dropped(
    books: dict[Path, ParsedBook],
) -> None:
    titles = [c.title for c in books[GRIMM].chapters]
    assert titles[0] == "THE RABBIT'S BRIDE" and titles[-1] == "THE GOLDEN GOOSE"
    assert "The FISHERMAN and his WIFE" in titles
    assert 50 <= len(titles) <= 54
    assert "Transcriber" not in books[GRIMM].chapters[-1].text


def test_potter_two_line_headings_are_joined(books: dict[Path, ParsedBook]) -> None:
    titles = [c.title for c in books[POTTER].chapters]
    assert len(titles) == 19
    assert titles[0] == "THE TALE OF PETER RABBIT" and "THE ROLY-POLY PUDDING" in titles


# --- all books -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ALL_BOOKS, ids=lambda p: p.stem[:30])
def test_chapter_texts_are_clean_plain_text(books: dict[Path, ParsedBook], path: Path) -> None:
    for chapter in books[path].chapters:
        text = chapter.text
        assert text and chapter.title
        assert not re.search(r"</?[a-zA-Z][a-zA-Z0-9]*[ >/]", text), chapter.title
        assert "Project Gutenberg" not in text and "PROJECT GUTENBERG" not in text, chapter.title
        assert "[Illustration" not in text
        for paragraph in text.split("\n\n"):
            assert paragraph and paragraph == paragraph.strip() and "\n" not in paragraph, chapter.title
            assert "  " not in paragraph and "\u00ad" not in paragraph and "\r" not in paragraph


@pytest.mark.parametrize("path", [SHERLOCK, MOBY_TXT], ids=["epub", "txt"])
def test_parsing_a_book_twice_gives_identical_ids(path: Path) -> None:
    first, second = manifest(parsed_book(str(path))), manifest(parsed_book(str(path)))
    assert first == second
    assert [c.chapter_id for c in first.chapters] == [c.chapter_id for c in second.chapters]


def test_manifest_ids_follow_the_rules(books: dict[Path, ParsedBook]) -> None:
    epub, txt = manifest(books[MOBY_EPUB]), manifest(books[MOBY_TXT])
    assert isinstance(epub, Manifest)
    assert re.fullmatch(r"moby-dick-[0-9a-f]{8}", epub.book_id)
    assert re.fullmatch(r"moby-dick-or-the-whale-[0-9a-f]{8}", txt.book_id)
    assert epub.book_id != manifest(books[MOBY_QUIRKS]).book_id  # other file name, other id
    assert [c.order for c in epub.chapters] == list(range(len(epub.chapters)))
    assert len({c.chapter_id for c in epub.chapters}) == len(epub.chapters)
    assert all(re.fullmatch(r"ch-[0-9a-f]{10}(-\d+)?", c.chapter_id) for c in epub.chapters)
    assert re.fullmatch(r"[0-9a-f]{64}", epub.content_hash) and epub.content_hash != txt.content_hash
    assert Path(epub.source_file) == MOBY_EPUB.resolve()


def test_an_edited_book_keeps_its_book_id_but_changes_its_content_hash(tmp_path: Path) -> None:
    path = tmp_path / "story.txt"
    path.write_text("CHAPTER I.\n\nOnce upon a time there was a fox.\n", encoding="utf-8")
    before = manifest(parsed_book(str(path)))
    path.write_text("CHAPTER I.\n\nOnce upon a time there was a wolf.\n", encoding="utf-8")
    after = manifest(parsed_book(str(path)))
    assert before.book_id == after.book_id
    assert before.content_hash != after.content_hash
    assert before.chapters[0].chapter_id != after.chapters[0].chapter_id


# --- bad input -----------------------------------------------------------------------------------------


def _epub_bytes(
    files: dict[str, str | bytes], *, opf_path: str = "OEBPS/content.opf", mimetype_first: bool = True
) -> dict[str, str | bytes]:
    container = (
        '<?xml version="1.0"?><container version="1.0" '
        'xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles>'
        f'<rootfile full-path="{opf_path}" media-type="application/oebps-package+xml"/>'
        "</rootfiles></container>"
    )
    out: dict[str, str | bytes] = {"mimetype": "application/epub+zip"} if mimetype_first else {}
    out["META-INF/container.xml"] = container
    out.update(files)
    if not mimetype_first:
        out["mimetype"] = "application/epub+zip"
    return out


def _write_zip(path: Path, files: dict[str, str | bytes]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return path


def _opf(manifest_items: str, spine: str, toc_attr: str = "") -> str:
    return (
        '<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="2.0" '
        'unique-identifier="id">'
        '<metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>Tiny Tales</dc:title>'
        "<dc:creator>A. Writer</dc:creator><dc:language>en</dc:language>"
        '<dc:identifier id="id">tiny</dc:identifier></metadata>'
        f"<manifest>{manifest_items}</manifest><spine{toc_attr}>{spine}</spine></package>"
    )


def _xhtml(body: str) -> str:
    return (
        '<?xml version="1.0" encoding="utf-8"?><html xmlns="http://www.w3.org/1999/xhtml" '
        f'xmlns:epub="http://www.idpf.org/2007/ops"><head><title>t</title></head><body>{body}</body></html>'
    )


def _tiny_epub2(path: Path) -> Path:
    """An EPUB 2 with an NCX only: two chapters plus an images-only cover."""
    ncx = (
        '<?xml version="1.0"?><ncx xmlns="http://www.daisy.org/z3986/2005/ncx/" version="2005-1"><navMap>'
        '<navPoint id="n1" playOrder="1"><navLabel><text>The First Tale</text></navLabel>'
        '<content src="one.xhtml"/></navPoint>'
        '<navPoint id="n2" playOrder="2"><navLabel><text>The Second Tale</text></navLabel>'
        '<content src="one.xhtml#second"/></navPoint></navMap></ncx>'
    )
    story = "The fox ran over the hill and&nbsp;down to the river, where the water was cold and clear. " * 4
    files = {
        "OEBPS/content.opf": _opf(
            '<item id="ncx" href="toc.ncx" media-type="application/x-dtbncx+xml"/>'
            '<item id="cover" href="cover.xhtml" media-type="application/xhtml+xml"/>'
            '<item id="one" href="one.xhtml" media-type="application/xhtml+xml"/>',
            '<itemref idref="cover"/><itemref idref="one"/>',
            ' toc="ncx"',
        ),
        "OEBPS/toc.ncx": ncx,
        "OEBPS/cover.xhtml": _xhtml('<div><img src="c.png" alt=""/></div>'),
        "OEBPS/one.xhtml": _xhtml(
            f"<h1>The First Tale</h1><p>{story}</p>"
            f'<p>It was<br/>late.<span epub:type="pagebreak">12</span></p>'
            f'<h1 id="second">The Second Tale</h1><p>{story.replace("fox", "hare")}</p>'
        ),
    }
    return _write_zip(path, _epub_bytes(files))


def test_epub2_with_only_an_ncx_uses_its_titles_and_splits_at_its_anchor(tmp_path: Path) -> None:
    book = parsed_book(str(_tiny_epub2(tmp_path / "tiny.epub")))
    assert (book.title, book.author, book.language) == ("Tiny Tales", "A. Writer", "en")
    assert [c.title for c in book.chapters] == ["The First Tale", "The Second Tale"]
    first, second = (c.text for c in book.chapters)
    assert first.startswith("The fox ran over the hill and down to the river")
    assert first.endswith("It was late.")  # <br/> is a space, the page number is gone
    assert second.startswith("The hare ran") and "fox" not in second


def _assert_folio_error(path: Path, *words: str) -> None:
    with pytest.raises(FolioError) as info:
        parsed_book(str(path))
    assert info.value.source == str(path)
    assert "\n" not in info.value.reason
    for word in words:
        assert word.lower() in info.value.reason.lower(), info.value.reason


def test_missing_path_is_a_folio_error(tmp_path: Path) -> None:
    _assert_folio_error(tmp_path / "nope.epub", "no such file")


def test_directory_is_a_folio_error(tmp_path: Path) -> None:
    _assert_folio_error(tmp_path, "directory")


@pytest.mark.parametrize("content", [b"", b"  \n\r\n\t  \n"], ids=["zero-bytes", "whitespace"])
def test_empty_file_is_a_folio_error(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "empty.txt"
    path.write_bytes(content)
    _assert_folio_error(path, "empty")


@pytest.mark.parametrize(
    ("content", "word"),
    [(b"\x89PNG\r\n\x1a\n" + bytes(range(256)), "PNG"), (b"some text\x00\x01\x02" * 20, "binary")],
    ids=["png", "nul-bytes"],
)
def test_binary_file_is_a_folio_error(tmp_path: Path, content: bytes, word: str) -> None:
    path = tmp_path / "book.txt"
    path.write_bytes(content)
    _assert_folio_error(path, word)


def test_text_in_a_wrong_encoding_is_refused_with_a_utf8_hint(tmp_path: Path) -> None:
    path = tmp_path / "latin1.txt"
    path.write_bytes("CHAPTER I.\n\nLe café était fermé, et la pâtisserie aussi.\n".encode("latin-1"))
    _assert_folio_error(path, "not valid UTF-8", "re-save")


@pytest.mark.parametrize(
    "content",
    [
        "CHAPTER I.\n\n\n\nCHAPTER II.\n\n*     *     *\n",
        "*** START OF THE PROJECT GUTENBERG EBOOK X ***\n\n*** END OF THE PROJECT GUTENBERG EBOOK X ***\n"
        "Project Gutenberg license text follows, with many words about the license and its terms.\n",
    ],
    ids=["headings-only", "gutenberg-boilerplate-only"],
)
def test_text_without_real_text_is_a_folio_error(tmp_path: Path, content: str) -> None:
    path = tmp_path / "hollow.txt"
    path.write_text(content, encoding="utf-8")
    _assert_folio_error(path, "no readable text")


def test_epub_without_real_text_is_a_folio_error(tmp_path: Path) -> None:
    files = {
        "OEBPS/content.opf": _opf(
            '<item id="c" href="c.xhtml" media-type="application/xhtml+xml"/>', '<itemref idref="c"/>'
        ),
        "OEBPS/c.xhtml": _xhtml('<div><img src="cover.png" alt="Cover"/></div>'),
    }
    _assert_folio_error(_write_zip(tmp_path / "pictures.epub", _epub_bytes(files)), "no readable text")


def test_truncated_epub_is_a_folio_error(tmp_path: Path) -> None:
    path = tmp_path / "cut.epub"
    data = MOBY_EPUB.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    _assert_folio_error(path, "truncated or corrupt")


def test_zip_that_is_not_an_epub_is_a_folio_error(tmp_path: Path) -> None:
    _assert_folio_error(
        _write_zip(tmp_path / "notes.zip", {"readme.txt": "hello"}), "not an EPUB", "container.xml"
    )


def test_epub_whose_package_document_is_missing_is_a_folio_error(tmp_path: Path) -> None:
    _assert_folio_error(_write_zip(tmp_path / "no-opf.epub", _epub_bytes({})), "OPF")


def test_drm_epub_with_rights_xml_is_a_folio_error(tmp_path: Path) -> None:
    path = _tiny_epub2(tmp_path / "drm.epub")
    with zipfile.ZipFile(path, "a") as zf:
        zf.writestr("META-INF/rights.xml", "<rights/>")
    _assert_folio_error(path, "DRM")


def _encryption(algorithm: str, uri: str) -> str:
    return (
        '<encryption xmlns="urn:oasis:names:tc:opendocument:xmlns:container" '
        'xmlns:enc="http://www.w3.org/2001/04/xmlenc#"><enc:EncryptedData>'
        f'<enc:EncryptionMethod Algorithm="{algorithm}"/><enc:CipherData>'
        f'<enc:CipherReference URI="{uri}"/></enc:CipherData></enc:EncryptedData></encryption>'
    )


def test_drm_epub_with_encrypted_content_is_a_folio_error(tmp_path: Path) -> None:
    path = _tiny_epub2(tmp_path / "drm.epub")
    with zipfile.ZipFile(path, "a") as zf:
        zf.writestr(
            "META-INF/encryption.xml",
            _encryption("http://www.w3.org/2001/04/xmlenc#aes128-cbc", "OEBPS/one.xhtml"),
        )
    _assert_folio_error(path, "DRM", "encryption.xml")


def test_epub_with_only_obfuscated_fonts_still_reads(tmp_path: Path) -> None:
    path = _tiny_epub2(tmp_path / "fonts.epub")
    with zipfile.ZipFile(path, "a") as zf:
        zf.writestr(
            "META-INF/encryption.xml", _encryption("http://www.idpf.org/2008/embedding", "OEBPS/f.otf")
        )
    assert len(parsed_book(str(path)).chapters) == 2


def test_epub_with_mimetype_not_first_reads(tmp_path: Path) -> None:
    path = _tiny_epub2(tmp_path / "tiny.epub")
    with zipfile.ZipFile(path) as zf:
        files: dict[str, str | bytes] = {name: zf.read(name) for name in zf.namelist() if name != "mimetype"}
    reordered = _write_zip(tmp_path / "reordered.epub", {**files, "mimetype": "application/epub+zip"})
    assert [c.title for c in parsed_book(str(reordered)).chapters] == ["The First Tale", "The Second Tale"]


def test_utf16_text_with_bom_and_crlf_reads(tmp_path: Path) -> None:
    path = tmp_path / "utf16.txt"
    text = "CHAPTER I. The Start\r\n\r\nIt was a bright\r\ncold day in April.\r\n"
    path.write_bytes(text.encode("utf-16"))
    book = parsed_book(str(path))
    assert [(c.title, c.text) for c in book.chapters] == [
        ("CHAPTER I. The Start", "It was a bright cold day in April.")
    ]
    assert (book.title, book.author) == ("utf16", "Unknown")


# --- pure helpers: golden cases --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "kind"),
    [
        ("CHAPTER 1. Loomings.", "label"),
        ("CHAPTER I.", "label"),
        ("Chapter Twelve", "label"),
        ("  I.", "number"),
        ("XVI", "number"),
        ("12.", "number"),
        ("Epilogue", "named"),
        ("EPILOGUE.", "named"),
        ("THE TALE OF PETER RABBIT", "caps"),
        ("The DEATH of the HEN", "caps"),
        ("The FISHERMAN and his WIFE", "caps"),
        ("EXTRACTS. (Supplied by a Sub-Sub-Librarian).", "caps"),
        ("It was a dark and stormy night.", None),
        ("THE END", None),
        ("I am OK", None),
        ("THE RABBIT'S BRIDE, Headpiece 1", None),
        ("    TITLE-PAGE.                                    PAGE", None),
        ("Chapters of my life were long.", None),
    ],
)
def test_heading_kind_golden_cases(line: str, kind: str | None) -> None:
    assert text_reader.heading_kind(line) == kind


def test_gutenberg_split_cuts_modern_header_footer_and_credits() -> None:
    text = (
        "The Project Gutenberg EBook of X\n\nTitle: Moby Dick; or The Whale\n\nAuthor: Herman Melville\n\n"
        "Language: English\n\n*** START OF THIS PROJECT GUTENBERG EBOOK MOBY DICK ***\n\n\n"
        "Produced by Daniel Lazarus and David Widger\n\n\nCHAPTER 1. Loomings.\n\nCall me Ishmael.\n\n"
        "End of Project Gutenberg's Moby Dick\n\n"
        "*** END OF THIS PROJECT GUTENBERG EBOOK MOBY DICK ***\nlicense"
    )
    header, body = text_reader.gutenberg_split(text)
    assert body.strip() == "CHAPTER 1. Loomings.\n\nCall me Ishmael."
    assert text_reader.gutenberg_metadata(header) == {
        "title": "Moby Dick; or The Whale",
        "author": "Herman Melville",
        "language": "en",
    }


def test_gutenberg_split_cuts_the_old_small_print_header() -> None:
    text = (
        "Project Gutenberg Etext The Great Big Treasury\n\nTitle: The Great Big Treasury\n\n"
        "**Welcome To The World of Free Plain Vanilla Electronic Texts**\n\n"
        "*END THE SMALL PRINT! FOR PUBLIC DOMAIN ETEXTS*Ver.10/04/01*END*\n\n\n"
        "Scanned by Charles Keller\nContact Mike Lough <Mikel@caere.com>\n\n\nTHE TALE OF\nPETER RABBIT\n\n"
        "Once upon a time.\n\nEnd Project Gutenberg's The Great Big Treasury\n"
    )
    header, body = text_reader.gutenberg_split(text)
    assert body.strip() == "THE TALE OF\nPETER RABBIT\n\nOnce upon a time."
    assert text_reader.gutenberg_metadata(header)["title"] == "The Great Big Treasury"


def test_potter_hard_wrapped_compounds_keep_their_hyphen(books: dict[Path, ParsedBook]) -> None:
    # the text file wraps "candle-" / "light" and "flower-" / "pot" at the hyphen
    text = "\n\n".join(c.text for c in books[POTTER].chapters)
    assert "They ate them by candle-light after the shop was closed." in text
    assert "perhaps hidden underneath a flower-pot." in text
    assert not re.search(r"[a-z]- [a-z]", text)


def test_unwrapped_joins_a_line_end_hyphen_only_before_a_lower_case_word() -> None:
    lines = [
        "They ate them by candle-",
        "light; nine- or ten-",
        "year-old; an X-",
        "Ray; 1914-",
        "1918 said--",
        "the",
    ]
    assert (
        common.unwrapped(lines)
        == "They ate them by candle-light; nine- or ten-year-old; an X- Ray; 1914- 1918 said-- the"
    )


def test_moby_dick_underscore_italics_are_dropped(books: dict[Path, ParsedBook]) -> None:
    text = "\n\n".join(c.text for c in books[MOBY_TXT].chapters)
    assert "look ye here—here—can ye smoothe out a seam like this" in text
    assert "_here_" not in text and not re.search(r"(?<!\w)_[^\s_][^_]*_(?!\w)", text)


def test_paragraph_text_drops_underscore_italics_only_around_words() -> None:
    lines = ["but _I_ think; snake_case_name, 31_st_, _Tooke’s", "Lucian_. and __init__ x_y"]
    assert (
        text_reader.paragraph_text(lines)
        == "but I think; snake_case_name, 31_st_, Tooke’s Lucian. and __init__ x_y"
    )


def test_gutenberg_split_leaves_text_without_markers_alone() -> None:
    assert text_reader.gutenberg_split("Just a story.\n\nThe end.") == ("", "Just a story.\n\nThe end.")


def test_unwrapped_joins_hard_wrapped_lines_with_single_spaces() -> None:
    assert (
        common.unwrapped(["  It was a", "dark   and\tstormy", " night."]) == "It was a dark and stormy night."
    )
    assert common.clean_inline("soft\u00adhy\u200bphen\u2060—dash ") == "softhyphen—dash"


def test_text_sections_take_toc_entries_in_the_body_and_drop_the_contents() -> None:
    body = (
        "CONTENTS\n\n I Introduction\n II The Machine\n Epilogue\n\n\n\n I\n\n\n Introduction\n\n"
        "The Time Traveller was expounding a recondite matter to us.\n\n\n\n II\n\n\n The Machine\n\n"
        "The thing the Time Traveller held was a glittering framework.\n\n\n\n Epilogue\n\n"
        "One cannot choose.\n"
    )
    sections = text_reader.text_sections(body, "The Time Machine")
    assert [title for title, _ in sections] == [
        "The Time Machine",
        "I. Introduction",
        "II. The Machine",
        "Epilogue",
    ]
    assert sections[0][1] == [] and sections[3][1] == ["One cannot choose."]


def test_text_sections_merge_a_lone_empty_heading_into_the_next() -> None:
    body = (
        "TOM THUMB\n\n\nThere was a boy. He was small.\n\n\n\nHOW MRS FOX MARRIED AGAIN\n\n\n"
        "FIRST VERSION.\n\n\nThere was once an old fox.\n\n\n\nSECOND VERSION.\n\n\nWhen old Mr. Fox died.\n"
    )
    titles = [title for title, _ in text_reader.text_sections(body, "Grimm")]
    assert titles == ["Grimm", "TOM THUMB", "HOW MRS FOX MARRIED AGAIN. FIRST VERSION.", "SECOND VERSION."]


def test_book_chapters_drop_empty_and_leading_front_matter() -> None:
    prose = (
        "The whale swam far out to sea, and the men in the boats followed it all day long. " * 10
    ).strip()
    sections = [
        ("Front", ["MOBY-DICK", "By Herman Melville"]),
        ("Empty", []),
        ("One", [prose, "* * *"]),
        ("Short", ["A brief interlude."]),
    ]
    assert common.book_chapters(sections) == (
        RawChapter("One", prose),
        RawChapter("Short", "A brief interlude."),
    )
    assert common.book_chapters([("A", ["Short note."]), ("B", ["Another."])]) == (
        RawChapter("A", "Short note."),
        RawChapter("B", "Another."),
    )


def test_html_blocks_drop_furniture_and_map_ids() -> None:
    content = _xhtml(
        '<section id="s1"><h2>Title <span class="pagenum">[Pg 4]</span></h2>'
        '<p>One&mdash;two&nbsp;three <a epub:type="noteref" href="#n">1</a>four.</p>'
        '<figure><img src="x.png"/><figcaption>A caption</figcaption></figure>'
        '<section id="s2" epub:type="colophon"><p>Made by robots.</p></section>'
        '<div>Outer <p id="p3">inner</p> tail</div></section>'
    ).encode()
    blocks, ids = markup.html_blocks(content)
    assert blocks == [
        ("h", "Title"),
        ("p", "One—two three four."),
        ("p", "Outer"),
        ("p", "inner"),
        ("p", "tail"),
    ]
    assert ids == {"s1": 0, "s2": 2, "p3": 3}


def test_html_blocks_read_html_that_is_not_well_formed_xml() -> None:
    blocks, _ = markup.html_blocks(b"<html><body><p>One<br>two<p>three &nbsp; four&hellip;</body></html>")
    assert blocks == [("p", "One two"), ("p", "three four…")]
    latin1 = '<?xml version="1.0" encoding="iso-8859-1"?><html><body><p>Caf\u00e9</p></body></html>'
    assert markup.html_blocks(latin1.encode("latin-1"))[0] == [("p", "Café")]


def test_toc_starts_split_at_files_not_at_sub_sections() -> None:
    sherlock = (
        ("Titlepage", "titlepage.xhtml", ()),
        ("A Scandal", "scandal.xhtml", (("I", "scandal.xhtml#p1", ()), ("II", "scandal.xhtml#p2", ()))),
        ("League", "league.xhtml", ()),
    )
    assert [t for t, _ in epub_reader.toc_starts(sherlock)] == ["Titlepage", "A Scandal", "League"]
    parts = (("Part One", "part1.xhtml", (("Ch 1", "ch1.xhtml", ()), ("Ch 2", "ch2.xhtml", ()))),)
    assert [t for t, _ in epub_reader.toc_starts(parts)] == ["Part One", "Ch 1", "Ch 2"]
    wrapper = (
        (
            "SECTION IV",
            "s04.xhtml#a",
            (
                ("INTRO", "s04.xhtml#b", ()),
                ("Oscar Wilde", "", (("200 PRINCE", "s04.xhtml#c", (("i", "s04.xhtml#d", ()),)),)),
            ),
        ),
    )
    assert [t for t, _ in epub_reader.toc_starts(wrapper)] == ["SECTION IV", "INTRO", "200 PRINCE"]


def test_ids_helpers_are_content_derived() -> None:
    assert parsing._slug("Alice’s Adventures in Wonderland!") == "alice-s-adventures-in-wonderland"
    assert parsing._slug("Élan & Vitality") == "elan-vitality"
    book_id = parsing._book_id("Moby-Dick", "Herman Melville", "melville_moby-dick.epub")
    assert book_id == parsing._book_id("Moby-Dick", "Herman Melville", "melville_moby-dick.epub")
    assert book_id != parsing._book_id("Moby-Dick", "Herman Melville", "moby.txt")
    assert re.fullmatch(r"[a-z0-9-]{1,40}-[0-9a-f]{8}", parsing._book_id("A" * 30 + " " + "B" * 30, "x", "y"))
    ids = parsing._chapter_ids([("One", "text"), ("Two", "text"), ("One", "text"), ("One", "text")])
    assert ids[0] == ids[2][: len(ids[0])] and ids[2:] == [ids[0] + "-2", ids[0] + "-3"] and ids[1] != ids[0]
    assert parsing._content_hash([("a", "b")]) != parsing._content_hash([("a", "b"), ("c", "d")])


# --- bounded reading: only regular files, size before reading, no XML entities, names of any bytes ------


def test_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.txt"
    os.mkfifo(fifo)  # nothing ever writes: reading it would block forever
    started = time.monotonic()
    _assert_folio_error(fifo, "FIFO", "only regular files")
    assert time.monotonic() - started < 2


def test_character_device_is_refused() -> None:
    with pytest.raises(FolioError) as info:
        parsed_book("/dev/zero")
    assert info.value.reason == "a device, not a book file: only regular files are read"


def test_huge_file_is_refused_by_size_before_it_is_read(tmp_path: Path) -> None:
    huge = tmp_path / "huge.txt"
    with huge.open("wb") as f:  # sparse: 5 GB that take no disk and would take no memory to refuse
        f.truncate(5_000_000_000)
    started = time.process_time()
    _assert_folio_error(huge, "too large: 5000 MB", "200 MB limit (max_book_bytes)")
    assert time.process_time() - started < 1


def test_max_book_bytes_setting_bounds_a_real_book() -> None:
    size = ALICE_TXT.stat().st_size
    with pytest.raises(FolioError, match="too large"):
        parsed_book(str(ALICE_TXT), max_book_bytes=size - 1)
    assert parsed_book(str(ALICE_TXT), max_book_bytes=size).chapters


def test_epub_that_unpacks_far_beyond_the_limit_is_refused(tmp_path: Path) -> None:
    files = {
        "OEBPS/content.opf": _opf('<item id="a" href="a.xhtml" media-type="application/xhtml+xml"/>', ""),
        "OEBPS/a.xhtml": _xhtml("<p>" + "a" * 2_000_000 + "</p>"),  # 2 MB deflates to a few KB
    }
    path = _write_zip(tmp_path / "bomb.epub", _epub_bytes(files))
    assert path.stat().st_size < 100_000
    with pytest.raises(FolioError, match=r"unpack to 2\.0 MB, more than 4 x the 0\.1 MB limit"):
        parsed_book(str(path), max_book_bytes=100_000)


def _entity_bomb_epub(path: Path, where: str) -> Path:
    """A small EPUB whose ``where`` document declares a "billion laughs" entity expansion bomb."""
    bomb = (
        '<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
        + "".join(
            f'<!ENTITY lol{i} "{("&lol" + (str(i - 1) if i > 1 else "") + ";") * 10}">' for i in range(1, 10)
        )
        + "]>"
    )
    story = "The fox ran over the hill and down to the river, where the water was cold and clear. " * 4
    opf = _opf(
        '<item id="one" href="one.xhtml" media-type="application/xhtml+xml"/>', '<itemref idref="one"/>'
    )
    xhtml = _xhtml(f"<h1>One</h1><p>{story} &lol9;</p>")
    files = _epub_bytes({"OEBPS/content.opf": opf, "OEBPS/one.xhtml": xhtml})
    if where == "opf":
        files["OEBPS/content.opf"] = opf.replace('<?xml version="1.0"?>', bomb)
    elif where == "container":
        files["META-INF/container.xml"] = bomb + str(files["META-INF/container.xml"]).split("?>", 1)[1]
    else:
        files["OEBPS/one.xhtml"] = bomb + xhtml.split("?>", 1)[1]
    return _write_zip(path, files)


@pytest.mark.parametrize(
    ("where", "name"),
    [("container", "META-INF/container.xml"), ("opf", "OEBPS/content.opf"), ("xhtml", "OEBPS/one.xhtml")],
)
def test_entity_expansion_bomb_is_a_one_line_refusal(tmp_path: Path, where: str, name: str) -> None:
    path = _entity_bomb_epub(tmp_path / "lol.epub", where)
    _assert_folio_error(path, f"refused: '{name}' declares XML entities", "entity expansion is not allowed")


def test_external_entity_is_refused(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP SECRET")
    opf = _opf(
        '<item id="one" href="one.xhtml" media-type="application/xhtml+xml"/>', '<itemref idref="one"/>'
    )
    xhtml = (
        f'<?xml version="1.0"?><!DOCTYPE html [<!ENTITY x SYSTEM "file://{secret}">]>'
        + _xhtml("<p>&x; " + "The fox ran over the hill and down to the river. " * 20 + "</p>").split(
            "?>", 1
        )[1]
    )
    path = _write_zip(
        tmp_path / "xxe.epub", _epub_bytes({"OEBPS/content.opf": opf, "OEBPS/one.xhtml": xhtml})
    )
    _assert_folio_error(path, "declares XML entities")


def test_empty_spine_is_named_as_such(tmp_path: Path) -> None:
    opf = _opf('<item id="one" href="one.xhtml" media-type="application/xhtml+xml"/>', "")
    files = {"OEBPS/content.opf": opf, "OEBPS/one.xhtml": _xhtml("<p>Some text here.</p>")}
    path = _write_zip(tmp_path / "nospine.epub", _epub_bytes(files))
    _assert_folio_error(path, "the spine of 'OEBPS/content.opf' lists no documents")


def test_newline_in_a_file_name_keeps_the_error_on_one_line(tmp_path: Path) -> None:
    path = tmp_path / "bad\nname.txt"
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 100)
    with pytest.raises(FolioError) as info:
        parsed_book(str(path))
    assert info.value.source == str(path)
    assert str(info.value) == f"{tmp_path}/bad\\nname.txt: not a text or EPUB file: looks like a PNG image"


def test_valid_book_under_a_non_utf8_name_is_read(tmp_path: Path) -> None:
    raw = os.fsencode(tmp_path) + b"/alice-\xff\xfe.txt"
    with open(raw, "wb") as f:
        f.write(ALICE_TXT.read_bytes())
    name = os.fsdecode(raw)  # the surrogate-escaped str a directory listing gives
    book = manifest(parsed_book(name))
    assert book.title == manifest(parsed_book(str(ALICE_TXT))).title
    assert book.source_file.endswith("/alice-\\xff\\xfe.txt")
    book.source_file.encode("utf-8")  # storable and printable: no surrogates left
    with pytest.raises(FolioError) as info:
        parsed_book(name, max_book_bytes=10)
    assert str(info.value).startswith(f"{tmp_path}/alice-\\xff\\xfe.txt: too large")
