"""(X)HTML and XML documents to text blocks, shared by the EPUB, HTML and MOBI readers.

``html_blocks(content)`` gives a document's blocks ``(kind, text)`` (kind "h" for a heading element, "p"
otherwise) in order and the block index of every element id; publisher furniture (cover, title page,
TOC, page lists, note references, ``class="pagenum"``) and non-text elements (script, style, images,
MathML, figures) are skipped. XML is parsed with ``resolve_entities=False`` and ``no_network=True``;
a document that is not well-formed XML falls back to the HTML parser. Limitations: CSS is ignored
(``display: none`` text is read).
"""

from __future__ import annotations

import html.entities
import re
from typing import Any

from lxml import etree
from lxml import html as lxml_html

from folio.nodes.readers.common import clean_inline


def local(tag: Any) -> str:
    return etree.QName(tag).localname if isinstance(tag, str) else ""


def xml_root(data: bytes) -> etree._Element | None:
    parser = etree.XMLParser(recover=True, resolve_entities=False, no_network=True, huge_tree=True)
    try:
        return etree.fromstring(data, parser=parser)
    except etree.XMLSyntaxError:
        return None


# --- EPUB: documents to blocks ---------------------------------------------------------------------

# A block is ``(kind, text)`` with kind "h" (a heading element) or "p" (anything else).
HtmlBlock = tuple[str, str]

_BLOCK_TAGS = frozenset(
    [
        "address",
        "article",
        "aside",
        "blockquote",
        "body",
        "caption",
        "center",
        "dd",
        "div",
        "dl",
        "dt",
        "figcaption",
        "footer",
        "form",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "header",
        "hr",
        "li",
        "main",
        "ol",
        "p",
        "pre",
        "section",
        "table",
        "tbody",
        "td",
        "th",
        "thead",
        "tfoot",
        "tr",
        "ul",
    ]
)
_SKIP_TAGS = frozenset(
    [
        "script",
        "style",
        "head",
        "title",
        "img",
        "svg",
        "math",
        "figure",
        "object",
        "video",
        "audio",
        "iframe",
        "nav",
        "template",
    ]
)
_SKIP_TYPES = frozenset(
    [
        "cover",
        "titlepage",
        "halftitlepage",
        "seriespage",
        "imprint",
        "colophon",
        "copyright-page",
        "toc",
        "landmarks",
        "loi",
        "lot",
        "page-list",
        "pagebreak",
        "noteref",
    ]
)
_SKIP_CLASSES = frozenset({"pagenum", "pageno", "page-number"})
_EPUB_TYPE = "{http://www.idpf.org/2007/ops}type"


def html_root(content: bytes) -> etree._Element | None:
    """Parse an (X)HTML document: as XML (named HTML entities made numeric), else with the HTML parser."""

    def numeric(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in ("amp", "lt", "gt", "quot", "apos") or name not in html.entities.name2codepoint:
            return match.group(0)
        return f"&#{html.entities.name2codepoint[name]};"

    declared = re.search(rb"""^\s*<\?xml[^>]*encoding=["']([A-Za-z0-9._-]+)""", content)
    encoding = "utf-16" if content.startswith((b"\xff\xfe", b"\xfe\xff")) else "utf-8-sig"
    try:
        text = content.decode(declared.group(1).decode() if declared else encoding)
    except (LookupError, UnicodeDecodeError):
        text = content.decode("utf-8", "replace")
    text = re.sub(r"^\s*<\?xml[^>]*\?>", "", text.lstrip("\ufeff"))
    text = re.sub(r"&([A-Za-z][A-Za-z0-9]*);", numeric, text)
    try:
        root = etree.fromstring(
            text.encode("utf-8"), etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=True)
        )
    except etree.XMLSyntaxError:
        root = None
    if root is None:
        try:
            root = lxml_html.document_fromstring(
                text.encode("utf-8"), parser=lxml_html.HTMLParser(encoding="utf-8")
            )
        except (etree.ParserError, ValueError):
            return None
    return root


def _is_skipped(el: etree._Element) -> bool:
    types = (el.get(_EPUB_TYPE) or el.get("epub:type") or "").split()
    roles = (el.get("role") or "").replace("doc-", "").split()
    classes = (el.get("class") or "").split()
    return (
        local(el.tag).lower() in _SKIP_TAGS
        or el.get("hidden") is not None
        or any(t.split(":")[-1] in _SKIP_TYPES for t in types + roles)
        or any(c in _SKIP_CLASSES for c in classes)
    )


def html_blocks(content: bytes, levels: bool = False) -> tuple[list[HtmlBlock], dict[str, int]]:
    """A document's text blocks in order and ``{element id: index of the first block at or after it}``
    (with ``levels``, a heading's kind is its element name, "h1" to "h6", instead of "h")."""
    root = html_root(content)
    blocks: list[HtmlBlock] = []
    ids: dict[str, int] = {}
    if root is None:
        return blocks, ids
    body = next((el for el in root.iter() if local(el.tag).lower() == "body"), root)
    buffer: list[str] = []
    kinds: list[str] = ["p"]

    def flush() -> None:
        text = clean_inline("".join(buffer))
        buffer.clear()
        if text:
            blocks.append((kinds[-1], text))

    def walk(el: etree._Element, skipped: bool) -> None:
        tag = local(el.tag).lower()
        is_block = tag in _BLOCK_TAGS
        if is_block:
            flush()
        if el.get("id") is not None:
            ids.setdefault(el.get("id"), len(blocks))
        skipped = skipped or _is_skipped(el)
        if is_block:
            heading = re.fullmatch(r"h[1-6]", tag)
            kinds.append(("h" if not levels else tag) if heading else "p")
        if tag == "br" and not skipped:
            buffer.append(" ")
        if el.text and not skipped and isinstance(el.tag, str):
            buffer.append(el.text)
        for child in el:
            walk(child, skipped)
            if child.tail and not skipped:
                buffer.append(child.tail)
        if is_block:
            flush()
            kinds.pop()

    walk(body, False)
    flush()
    return blocks, ids
