"""HTML -> clean text shared by both Kiwix backends: golden cases and real ZIM articles."""

from __future__ import annotations

import pytest

from folio.nodes.backends.html_text import (
    EXCERPT_CHARS,
    PageText,
    clean_title,
    collapse_whitespace,
    excerpt,
    page_text,
    truncate_words,
)
from tests.conftest import DATA_DIR

ZIM_DIR = DATA_DIR / "zim"


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("<i>Ray</i> (film)", "Ray (film)"),
        ("&lt;i&gt;Ray&lt;/i&gt;  (film)", "Ray (film)"),
        ("Genius &amp; Friends", "Genius & Friends"),
        ("I&apos;ll Be Good to You", "I'll Be Good to You"),
        ("  Solar\u00a0eclipse \n", "Solar eclipse"),
        ("1 < 2 and 3 > 2", "1 < 2 and 3 > 2"),
        ("", ""),
    ],
)
def test_clean_title_strips_tags_unescapes_and_collapses_space(raw: str, clean: str) -> None:
    assert clean_title(raw) == clean


def test_page_text_keeps_content_and_drops_scripts_navigation_hidden_and_reference_markers() -> None:
    html = """<html><head><title>Moon</title><style>p{color:red}</style></head><body>
      <nav>Home | Exercises</nav>
      <div role="navigation">Toggle navigation</div>
      <div id="mw-content-text">
        <h1>Moon</h1>
        <p>The <b>Moon</b> orbits&nbsp;Earth.<sup class="reference">[1]</sup>\
<span class="mw-ref">[2]</span></p>
        <script>var x = 1;</script>
        <p style="display: none">hidden text</p>
        <p>It has   phases.</p>
      </div>
      <footer>Privacy</footer>
    </body></html>"""
    page = page_text(html)
    assert page.title == "Moon"
    assert page.text == "The Moon orbits Earth.\n\nIt has phases."
    assert page.lead == ("The Moon orbits Earth.", "It has phases.")


def test_page_text_strips_a_leading_heading_equal_to_the_entry_title() -> None:
    html = (
        "<html><head><title>Site name</title></head>"
        "<body><h1><i>Ray</i> (film)</h1><p>Ray is a film.</p></body></html>"
    )
    assert page_text(html, title="<i>Ray</i> (film)").text == "Ray is a film."
    # without the entry title only the page's own <title> is stripped
    assert page_text(html).text.startswith("Ray (film)")


def test_table_cells_are_separated_and_rows_are_lines() -> None:
    html = (
        "<body><table><tr><th>Directed by</th><td>Taylor Hackford</td></tr>"
        "<tr><th>Runtime</th><td>152 min</td></tr></table></body>"
    )
    assert page_text(html).text == "Directed by Taylor Hackford\n\nRuntime 152 min"


@pytest.mark.parametrize("content", [b"", "   ", b"<html><body><script>x()</script></body></html>"])
def test_empty_or_script_only_content_gives_empty_page(content: bytes | str) -> None:
    page = page_text(content)
    assert page.text == ""
    assert page.lead == ()


def test_truncate_words_cuts_at_a_word_boundary() -> None:
    text = "alpha beta gamma delta"
    assert truncate_words(text, 100) == text
    assert truncate_words(text, 12) == "alpha beta"
    assert truncate_words("x" * 50, 10) == "x" * 10  # no space: hard cut


def test_excerpt_prefers_prose_paragraphs_and_falls_back_to_text() -> None:
    assert excerpt(PageText("T", "Infobox row\n\nProse here.", ("Prose here.",))) == "Prose here."
    assert excerpt(PageText("T", "Only a list\n\nitem two", ())) == "Only a list item two"


def _zim_page(book: str, path: str) -> PageText:
    from libzim.reader import Archive

    entry = Archive(ZIM_DIR / f"{book}.zim").get_entry_by_path(path)
    return page_text(bytes(entry.get_item().content), title=entry.title)


def test_real_wikipedia_article_text_starts_with_its_lead_sentence_not_its_title() -> None:
    page = _zim_page("wikipedia_en_100_mini_2022-10", "A/Solar_eclipse")
    assert page.title == "Solar eclipse"
    assert page.text.startswith("A solar eclipse occurs when the Moon passes between Earth and the Sun")
    short = excerpt(page)
    assert len(short) <= EXCERPT_CHARS
    assert page.text.replace("\n\n", " ").startswith(short)


def test_real_novid_article_has_clean_title_and_no_reference_markers() -> None:
    page = _zim_page("wikipedia_en_ray_charles_novid_2018-10", "A/Ray_(film).html")
    assert page.title == "Ray (film)"
    assert page.text.startswith("Ray is a 2004 American musical biographical film")
    assert "[2]" not in page.text
    assert "<" not in page.text


def test_real_zimit_page_loses_its_navbar_and_quiz_controls() -> None:
    page = _zim_page("tonedear.com_en_2024-09", "tonedear.com/ear-training/absolute-perfect-pitch-test")
    assert "Toggle navigation" not in page.text
    assert "Contact Me" not in page.text  # navbar menu
    assert excerpt(page).startswith("In this exercise, you will hear a single note.")


def test_collapse_whitespace_handles_nbsp_and_newlines() -> None:
    assert collapse_whitespace(" a\u00a0\n b\t") == "a b"
