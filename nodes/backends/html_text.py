"""HTML to clean text for Kiwix articles, shared by the libzim and kiwix-serve backends.

Both backends read the same article bytes and pass them through these functions, so titles, article
text, sections and excerpts are identical whichever backend found them (scoring sees the same inputs).

A page gives (``PageText``):

- ``text``: the main content, one block a paragraph (tables one row a line): what the Kiwix query
  stage searches for the question's words (``nodes/kiwix/candidates.py``), unchanged by the section rules
  below;
- ``lead``: the main content's ``<p>`` paragraphs: the excerpt scoring sees;
- ``sections``: the article as a reader reads it, ``ArticleSection(title, paragraphs, tables)`` in
  order (the lead first, title ""; then one per heading, titled by its heading path "History › Early
  years"). Paragraphs are prose only: infoboxes, navboxes, sidebars, message boxes, hatnotes ("For
  other uses, see…"), thumbnails and captions, coordinates, references and reference lists, the
  "This article is issued from Wikipedia" footer, link lists (lists whose items are mostly link text),
  blocks of three words or fewer and whole sections titled References, Notes, See also, External links,
  Further reading, Bibliography, Sources or Citations are left out. Data tables (``wikitable``, or a
  table with header cells and no paragraph inside) are kept apart in ``tables``, one row a line, cells
  joined by " | ": the Kiwix answer uses one only when it matches the question clearly better than
  every paragraph (``nodes/kiwix/fusion.py``). Other tables are layout: their cells read as blocks.

Config keys: none (``EXCERPT_CHARS`` = 300 is the excerpt length).

Limitations: the main-content heuristics know MediaWiki (mwoffliner, saved Wikibooks pages) and plain
sites (zimit scrapes); scripts, styles, navigation, forms' controls, hidden (``display:none``) elements,
edit links and reference markers are dropped everywhere. A plain site's menus and buttons of four words
or more still read as paragraphs; ``<br>`` ends a paragraph (verse reads one line a paragraph).
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass

import lxml.etree
import lxml.html

from folio.nodes.core.kiwix_types import ArticleSection
from folio.nodes.core.text import plural_stem, word_spans

EXCERPT_CHARS = 300

_TAG = re.compile(r"</?[A-Za-z][^<>]*>")
_SPACE = re.compile(r"\s+")
_WORD = re.compile(r"\w+")
_HIDDEN = re.compile(r"display\s*:\s*none", re.IGNORECASE)

_DROP_TAGS = (
    "script", "style", "noscript", "template", "head", "nav", "footer", "button", "select", "option",
    "input", "textarea", "svg", "iframe", "object", "embed", "audio", "video", "canvas", "map",
)  # fmt: skip
_DROP_CLASSES = (
    "mw-editsection", "reference", "noprint", "navbox", "mw-jump-link", "catlinks", "printfooter",
    "toc", "mw-indicators", "mw-empty-elt", "sr-only", "mw-ref", "navbar",
)  # fmt: skip
_DROP_ROLES = ("navigation", "banner", "contentinfo", "search")
_DROP_IDS = (
    "siteNotice",
    "siteSub",
    "contentSub",
    "contentSub2",
    "jump-to-nav",
    "mw-navigation",
    "footer",
    "toc",
)
# Main-content containers, most specific first.
_ROOTS = (
    '//*[@id="mw-content-text"]',
    "//main",
    '//*[@role="main"]',
    "//article",
    '//*[@id="content"]',
    "//body",
)
_BLOCKS = frozenset(
    (
        "address", "article", "aside", "blockquote", "body", "caption", "center", "dd", "details", "dialog",
        "div", "dl", "dt", "fieldset", "figcaption", "figure", "form", "h1", "h2", "h3", "h4", "h5", "h6",
        "header", "hr", "li", "main", "ol", "p", "pre", "section", "summary", "table", "tbody", "tfoot",
        "thead", "tr", "ul",
    )
)  # fmt: skip
_CELLS = frozenset(("td", "th"))
_HEADINGS = frozenset(("h1", "h2", "h3", "h4", "h5", "h6"))
MIN_PARAGRAPH_WORDS = 4  # a block of three words or fewer is a label, a menu item or residue, not prose
LINK_LIST_SHARE = 0.7  # a list whose text is at least this share link text is a link list
# Not prose (sections only): boxes beside the text, notes about the page, pictures, references.
_NOT_PROSE_CLASSES = frozenset(
    (
        "infobox", "navbox", "vertical-navbox", "sidebar", "hatnote", "dablink", "rellink", "thumb",
        "thumbinner", "thumbcaption", "gallery", "mw-gallery-traditional", "reflist", "references",
        "mw-references", "refbegin", "metadata", "ambox", "mbox-small", "sistersitebox", "side-box",
        "portal", "portalbox", "shortdescription", "geo", "geo-default", "coordinates", "noviewer",
        "mw-authority-control", "authority-control", "navigation-not-searchable", "mw-kartographer-maplink",
        "infobox-caption", "toc", "quotebox", "stub",
    )
)  # fmt: skip
_NOT_PROSE_TAGS = frozenset(("figure", "figcaption", "caption", "img", "math"))
_NOT_PROSE_IDS = frozenset(("coordinates", "references", "catlinks"))
_NOT_PROSE_ROLES = frozenset(("note", "presentation"))
_SKIPPED_SECTIONS = frozenset(
    (
        "references", "notes", "see also", "external links", "further reading", "bibliography", "sources",
        "citations", "footnotes", "notes and references", "references and notes", "works cited",
        "explanatory notes", "general references", "cited sources",
    )
)  # fmt: skip
_FOOTER = re.compile(r"^This article is issued from .{0,80}licensed under", re.IGNORECASE)


@dataclass(frozen=True)
class PageText:
    """An HTML page as clean text.

    Attributes:
        title: the page's ``<title>``, cleaned ("" when it has none).
        text: the main content as paragraphs separated by blank lines, without a leading title heading.
        lead: the main content's prose paragraphs (``<p>``) in order, without the title.
        sections: the article's prose by section, lead first (see the module docstring).
    """

    title: str
    text: str
    lead: tuple[str, ...]
    sections: tuple[ArticleSection, ...] = ()


def collapse_whitespace(text: str) -> str:
    """Collapse every run of whitespace (including non-breaking spaces) to one space and strip."""
    return _SPACE.sub(" ", text.replace("\u00a0", " ")).strip()


def clean_title(raw: str) -> str:
    """Clean an entry title: ``"<i>Ray</i> (film)"`` -> ``"Ray (film)"``; entities unescaped."""
    text = html.unescape(raw or "")
    text = _TAG.sub("", text)
    return collapse_whitespace(text)


def page_text(content: bytes | str, title: str | None = None) -> PageText:
    """Extract the clean title, main text and prose paragraphs of an HTML page.

    Args:
        content: the raw HTML (bytes are decoded by lxml from the page's declared charset).
        title: the entry title to strip from the start of the text; defaults to the page's ``<title>``.
    """
    doc = _parse(content)
    if doc is None:
        return PageText(title=clean_title(title or ""), text="", lead=())
    page_title = clean_title(doc.findtext(".//title") or "")
    strip_title = clean_title(title) if title else page_title
    _prune(doc)
    root = _main_root(doc)
    blocks = _drop_leading_title(_blocks(root), strip_title, page_title)
    lead = tuple(
        p
        for p in (collapse_whitespace(el.text_content()) for el in root.iter("p"))
        if p and not _same_title(p, strip_title, page_title)
    )
    _prune_not_prose(root)  # after ``text`` and ``lead``: what the search and the excerpts see stays
    sections = article_sections(root, strip_title, page_title)
    return PageText(title=page_title, text="\n\n".join(blocks), lead=lead, sections=sections)


def article_sections(root: lxml.html.HtmlElement, *titles: str) -> tuple[ArticleSection, ...]:
    """The prose of a pruned main-content element by section (see the module docstring).

    Headings equal to one of ``titles`` (the page's own title) start no section.
    """
    sections: list[ArticleSection] = []
    path: list[tuple[int, str]] = []  # (heading level, title) of the open headings
    paragraphs: list[str] = []
    tables: list[str] = []

    def close() -> None:
        title = " › ".join(t for _, t in path)
        skipped = any(t.casefold().strip(" :") in _SKIPPED_SECTIONS for _, t in path)
        if (paragraphs or tables) and not skipped:
            sections.append(ArticleSection(title, tuple(dict.fromkeys(paragraphs)), tuple(tables)))
        paragraphs.clear()
        tables.clear()

    for kind, level, text in _units(root):
        if kind == "heading":
            if _same_title(text, *titles):
                continue
            close()
            while path and path[-1][0] >= level:
                path.pop()
            path.append((level, text))
        elif kind == "table":
            tables.append(text)
        elif _prose(text) and not _same_title(text, *titles):
            paragraphs.append(text)
    close()
    return tuple(sections)


def excerpt(page: PageText, max_chars: int = EXCERPT_CHARS) -> str:
    """The first ``max_chars`` characters (cut at a word boundary) of the page's prose after its title.

    Prose paragraphs are preferred; a page without any falls back to its main text.
    """
    source = " ".join(page.lead) if page.lead else collapse_whitespace(page.text)
    return truncate_words(source, max_chars)


def truncate_words(text: str, max_chars: int) -> str:
    """Cut ``text`` to at most ``max_chars`` characters, at the last word boundary when there is one."""
    if len(text) <= max_chars:
        return text
    cut = text[: max_chars + 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > max_chars // 2 else text[:max_chars]).rstrip(" ,;:")


def _parse(content: bytes | str) -> lxml.html.HtmlElement | None:
    if isinstance(content, str):
        content = content.encode("utf-8")
        parser = lxml.html.HTMLParser(encoding="utf-8")
    else:
        parser = None
    if not content.strip():
        return None
    try:
        return lxml.html.document_fromstring(content, parser=parser)
    except (lxml.etree.ParserError, ValueError):
        return None


def _classes(el: lxml.html.HtmlElement) -> set[str]:
    return set((el.get("class") or "").split())


def _prune(doc: lxml.html.HtmlElement) -> None:
    """Remove non-content elements in place."""
    doomed = []
    for el in doc.iter():
        if not isinstance(el.tag, str):  # comments, processing instructions
            doomed.append(el)
            continue
        if (
            el.tag in _DROP_TAGS
            or el.get("id") in _DROP_IDS
            or _classes(el) & set(_DROP_CLASSES)
            or _HIDDEN.search(el.get("style") or "")
            or el.get("role") in _DROP_ROLES
            or el.get("hidden") is not None
            or el.get("aria-hidden") == "true"
        ):
            doomed.append(el)
    for el in doomed:
        if el.getparent() is not None:
            el.drop_tree()


def _prose(text: str) -> bool:
    """At least ``MIN_PARAGRAPH_WORDS`` words and not the page's licence footer."""
    return len(_WORD.findall(text)) >= MIN_PARAGRAPH_WORDS and not _FOOTER.match(text)


def _not_prose(el: lxml.html.HtmlElement) -> bool:
    return bool(
        el.tag in _NOT_PROSE_TAGS
        or _classes(el) & _NOT_PROSE_CLASSES
        or el.get("id") in _NOT_PROSE_IDS
        or (el.get("role") in _NOT_PROSE_ROLES and el.tag != "table")
        or (el.get("role") == "presentation" and _classes(el) & {"mbox-small", "sistersitebox"})
    )


def _prune_not_prose(root: lxml.html.HtmlElement) -> None:
    """Remove boxes, notes, pictures and references (see ``_NOT_PROSE_CLASSES``) in place."""
    doomed = [el for el in root.iter() if isinstance(el.tag, str) and _not_prose(el)]
    for el in doomed:
        if el.getparent() is not None:
            el.drop_tree()


def _link_list(el: lxml.html.HtmlElement) -> bool:
    """A list whose text is mostly link text (see also lists, discographies' link columns)."""
    total = len(collapse_whitespace(el.text_content()))
    linked = sum(len(collapse_whitespace(a.text_content())) for a in el.iter("a"))
    return total > 0 and linked >= LINK_LIST_SHARE * total


def _data_table(el: lxml.html.HtmlElement) -> bool:
    """A table of data (not page layout): a ``wikitable``, or header cells and no paragraph inside."""
    if "wikitable" in _classes(el):
        return True
    return next(el.iter("th"), None) is not None and next(el.iter("p", "table"), el) is el


def _table_lines(el: lxml.html.HtmlElement) -> str:
    """A data table as lines: one row a line, its non-empty cells joined by " | "."""
    rows = []
    for tr in el.iter("tr"):
        cells = [collapse_whitespace(c.text_content()) for c in tr if c.tag in _CELLS]
        line = " | ".join(c for c in cells if c)
        if line:
            rows.append(line)
    return "\n".join(rows)


def _units(root: lxml.html.HtmlElement) -> list[tuple[str, int, str]]:
    """(kind, heading level, text) in reading order: "heading", "paragraph" (a block's inline text)
    and "table" (a data table's lines); link lists are skipped."""
    units: list[tuple[str, int, str]] = []
    run: list[str] = []

    def flush() -> None:
        text = collapse_whitespace("".join(run))
        run.clear()
        if text:
            units.append(("paragraph", 0, text))

    def walk(el: lxml.html.HtmlElement) -> None:
        tag = el.tag if isinstance(el.tag, str) else ""
        if tag in _HEADINGS:
            flush()
            units.append(("heading", int(tag[1]), collapse_whitespace(el.text_content())))
            return
        if tag == "table" and _data_table(el):
            flush()
            units.append(("table", 0, _table_lines(el)))
            return
        if tag in ("ul", "ol") and _link_list(el):
            flush()
            return
        block = tag in _BLOCKS or tag in _CELLS or tag == "br"
        if block:
            flush()
        if el.text:
            run.append(el.text)
        for child in el:
            walk(child)
            if child.tail:
                run.append(child.tail)
        if block:
            flush()

    walk(root)
    flush()
    return units


def _main_root(doc: lxml.html.HtmlElement) -> lxml.html.HtmlElement:
    for xpath in _ROOTS:
        found = doc.xpath(xpath)
        if found and collapse_whitespace(found[0].text_content()):
            return found[0]
    return doc


def _blocks(root: lxml.html.HtmlElement) -> list[str]:
    """Text of ``root`` split into block-level paragraphs; table cells separated by spaces."""
    parts: list[str] = []

    def walk(el: lxml.html.HtmlElement) -> None:
        tag = el.tag if isinstance(el.tag, str) else ""
        block = tag in _BLOCKS
        if block:
            parts.append("\n")
        if tag == "br":
            parts.append("\n")
        if el.text:
            parts.append(el.text)
        for child in el:
            walk(child)
            if child.tail:
                parts.append(child.tail)
        if block:
            parts.append("\n")
        elif tag in _CELLS:
            parts.append(" ")

    walk(root)
    lines = (collapse_whitespace(line) for line in "".join(parts).split("\n"))
    return [line for line in lines if line]


def _same_title(text: str, *titles: str) -> bool:
    folded = text.casefold()
    return any(t and folded == t.casefold() for t in titles)


def _drop_leading_title(blocks: list[str], *titles: str) -> list[str]:
    if blocks and _same_title(blocks[0], *titles):
        return blocks[1:]
    return blocks


def best_passage(text: str, terms: Sequence[str], max_chars: int = EXCERPT_CHARS) -> tuple[int, str]:
    """The passage of at most ``max_chars`` characters of ``text`` that best matches the query terms.

    The best window holds the most distinct query stems, then the most matching words (ties: the
    earliest). The passage starts at the sentence holding the window's first match when its matches
    still fit from there, else at that first match. Returns (start offset in ``text``, passage); a text
    without any query word gives (0, its first ``max_chars`` characters).
    """
    stems = {plural_stem(t) for t in terms}
    spans = [(start, end, plural_stem(word)) for word, start, end in word_spans(text)]
    best = (0, 0, 0, 0)  # (distinct stems, matching words, first span, end span) of the best window
    counts: dict[str, int] = {}
    hits = end = 0
    for start, (offset, _, first) in enumerate(spans):
        end = max(end, start)
        while end < len(spans) and spans[end][1] - offset <= max_chars:
            if spans[end][2] in stems:
                counts[spans[end][2]] = counts.get(spans[end][2], 0) + 1
                hits += 1
            end += 1
        if (len(counts), hits) > best[:2]:
            best = (len(counts), hits, start, end)
        if first in stems and start < end:
            hits -= 1
            counts[first] -= 1
            if not counts[first]:
                del counts[first]
    if not best[0]:
        return 0, truncate_words(" ".join(text[: 2 * max_chars].split()), max_chars)
    matches = [spans[i] for i in range(best[2], best[3]) if spans[i][2] in stems]
    first_match, last_end = matches[0][0], matches[-1][1]
    stops = (text.rfind(". ", 0, first_match), text.rfind("\n", 0, first_match))
    sentence = max([0] + [i + 1 for i in stops if i >= 0])
    while sentence < first_match and text[sentence].isspace():
        sentence += 1
    begin = sentence if last_end - sentence <= max_chars else first_match
    return begin, truncate_words(" ".join(text[begin : begin + 2 * max_chars].split()), max_chars)
