"""HTML to clean text for Kiwix articles, shared by the libzim and kiwix-serve backends.

Both backends read the same article bytes and pass them through these functions, so titles, article
text and excerpts are identical whichever backend found them (scoring sees the same inputs).

Config keys: none (``EXCERPT_CHARS`` = 300 is the excerpt length).

Limitations: the main-content heuristics know MediaWiki (mwoffliner, saved Wikibooks pages) and plain
sites (zimit scrapes); scripts, styles, navigation, forms' controls, hidden (``display:none``) elements,
edit links and reference markers are dropped. Tables are kept, one row a line.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass

import lxml.etree
import lxml.html

EXCERPT_CHARS = 300

_TAG = re.compile(r"</?[A-Za-z][^<>]*>")
_SPACE = re.compile(r"\s+")
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


@dataclass(frozen=True)
class PageText:
    """An HTML page as clean text.

    Attributes:
        title: the page's ``<title>``, cleaned ("" when it has none).
        text: the main content as paragraphs separated by blank lines, without a leading title heading.
        lead: the main content's prose paragraphs (``<p>``) in order, without the title.
    """

    title: str
    text: str
    lead: tuple[str, ...]


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
    return PageText(title=page_title, text="\n\n".join(blocks), lead=lead)


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
