"""The EPUB reader (EPUB 2 and 3): spine order, chapters cut at the table of contents' entries (rules in
``folio.nodes.ingest.parsing``'s docstring), container checks before anything is parsed.

Refused in one line: a zip that is not an EPUB, contents that unpack to more than ``ZIP_EXPANSION``
times ``max_book_bytes`` (a zip bomb), XML entity declarations, DRM (Readium LCP, Adobe ADEPT
``rights.xml``, any ``encryption.xml`` that encrypts more than fonts). Font obfuscation (IDPF, Adobe) is
not DRM and the book is read. Limitations: footnotes stay inline where the EPUB puts them.
"""

from __future__ import annotations

import warnings
import zipfile
import zlib
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import unquote

from folio.nodes.core.types import FolioError, ParsedBook
from folio.nodes.readers.common import book_chapters, checked_chapters, clean_inline, megabytes, storable
from folio.nodes.readers.markup import HtmlBlock, html_blocks, local, xml_root

MAX_BOOK_BYTES = 200_000_000  # configs/default.yaml's ``max_book_bytes``
ZIP_EXPANSION = 4  # an EPUB's contents may unpack to at most this many times ``max_book_bytes``

# --- EPUB: container checks ------------------------------------------------------------------------

_FONT_OBFUSCATION = frozenset({"http://www.idpf.org/2008/embedding", "http://ns.adobe.com/pdf/enc#RC"})
_FONT_SUFFIXES = (".otf", ".ttf", ".woff", ".woff2", ".eot")


_XML_SUFFIXES = (".xml", ".opf", ".ncx", ".xhtml", ".html", ".htm", ".svg", ".smil")
_ENTITY_DECLARATIONS = tuple("<!ENTITY".encode(codec) for codec in ("utf-8", "utf-16-le", "utf-16-be"))


def epub_container_problem(zf: zipfile.ZipFile, max_bytes: int = MAX_BOOK_BYTES) -> str | None:
    """Why a zip cannot be read as a (DRM-free, bounded, entity-free) EPUB, or None."""
    names = set(zf.namelist())
    if "META-INF/container.xml" not in names:
        return "a zip archive but not an EPUB (no META-INF/container.xml)"
    unpacked = sum(info.file_size for info in zf.infolist())
    if unpacked > ZIP_EXPANSION * max_bytes:
        return (
            f"its contents unpack to {megabytes(unpacked)}, more than {ZIP_EXPANSION} x the "
            f"{megabytes(max_bytes)} limit (max_book_bytes)"
        )
    if "mimetype" in names:
        mimetype = zf.read("mimetype").decode("ascii", "replace").strip()
        if mimetype != "application/epub+zip":
            return f"a zip archive but not an EPUB (mimetype is {mimetype!r})"
    if "META-INF/license.lcpl" in names:
        return "DRM-protected EPUB (Readium LCP: META-INF/license.lcpl); Folio reads only DRM-free books"
    if "META-INF/rights.xml" in names:
        return "DRM-protected EPUB (META-INF/rights.xml); Folio reads only DRM-free books"
    entities = _entity_document(zf)
    if entities:
        return f"refused: {entities!r} declares XML entities (<!ENTITY>); entity expansion is not allowed"
    if "META-INF/encryption.xml" in names and _encrypts_content(zf.read("META-INF/encryption.xml")):
        return "DRM-protected EPUB (META-INF/encryption.xml encrypts its content documents)"
    container = xml_root(zf.read("META-INF/container.xml"))
    rootfile = None
    if container is not None:
        rootfile = next((el.get("full-path") for el in container.iter() if local(el.tag) == "rootfile"), None)
    if not rootfile:
        return "not a valid EPUB: META-INF/container.xml names no OPF package document"
    if unquote(rootfile) not in names:
        return f"not a valid EPUB: the OPF package document {rootfile!r} is missing"
    package = xml_root(zf.read(unquote(rootfile)))
    if package is None or not any(local(el.tag) == "itemref" for el in package.iter()):
        return f"not a valid EPUB: the spine of {rootfile!r} lists no documents (nothing to read)"
    return None


def _entity_document(zf: zipfile.ZipFile) -> str | None:
    """The first XML document of the zip that declares an entity (``<!ENTITY``), or None."""
    for info in zf.infolist():
        if info.filename.lower().endswith(_XML_SUFFIXES):
            data = zf.read(info)
            if any(marker in data for marker in _ENTITY_DECLARATIONS):
                return info.filename
    return None


def _encrypts_content(encryption_xml: bytes) -> bool:
    """True when ``encryption.xml`` encrypts anything but obfuscated fonts."""
    root = xml_root(encryption_xml)
    if root is None:
        return True
    for data in (el for el in root.iter() if local(el.tag) == "EncryptedData"):
        algorithm = next(
            (el.get("Algorithm", "") for el in data.iter() if local(el.tag) == "EncryptionMethod"), ""
        )
        uri = next((el.get("URI", "") for el in data.iter() if local(el.tag) == "CipherReference"), "")
        if algorithm not in _FONT_OBFUSCATION or not uri.lower().endswith(_FONT_SUFFIXES):
            return True
    return False


# --- EPUB: table of contents -----------------------------------------------------------------------

# A TOC node is ``(title, href or "", children)``.
TocNode = tuple[str, str, tuple[Any, ...]]


def _toc_nodes(toc: Any) -> tuple[TocNode, ...]:
    """ebooklib's ``book.toc`` (Links, Sections and ``(Section, children)`` pairs) as plain tuples."""
    nodes: list[TocNode] = []
    for entry in toc or ():
        if isinstance(entry, tuple | list) and len(entry) == 2:
            head, children = entry
            nodes.append(
                (clean_inline(head.title or ""), getattr(head, "href", "") or "", _toc_nodes(children))
            )
        else:
            nodes.append(
                (clean_inline(getattr(entry, "title", "") or ""), getattr(entry, "href", "") or "", ())
            )
    return tuple(nodes)


def _doc_of(href: str) -> str:
    return _norm_path(unquote(href.split("#", 1)[0]))


def _norm_path(path: str) -> str:
    parts: list[str] = []
    for part in PurePosixPath(path).parts:
        if part == "..":
            if parts:
                parts.pop()
        elif part not in (".", "/"):
            parts.append(part)
    return "/".join(parts)


def toc_starts(nodes: Sequence[TocNode]) -> list[tuple[str, str]]:
    """The ``(title, href)`` entries that start chapters, in TOC order (rule in the module docstring)."""
    level = _linked(nodes)
    starts: list[tuple[str, str]] = []
    for title, href, children in level:
        starts.append((title, href))
        child_docs = {_doc_of(child_href) for _, child_href, _ in _linked(children)}
        if children and (len(level) == 1 or child_docs - {_doc_of(href)}):
            starts.extend(toc_starts(children))
    return starts


def _linked(nodes: Sequence[TocNode]) -> list[TocNode]:
    """The nodes of one TOC level; a node without a link is a label and its children take its place."""
    out: list[TocNode] = []
    for node in nodes:
        out.extend([node] if node[1] else _linked(node[2]))
    return out


# --- EPUB: the book --------------------------------------------------------------------------------


def _epub_metadata(book: Any, source_path: str) -> tuple[str, str, str]:
    def values(name: str) -> list[str]:
        return [clean_inline(v) for v, _ in book.get_metadata("DC", name) if v and clean_inline(v)]

    titles, creators, languages = values("title"), values("creator"), values("language")
    return (
        titles[0] if titles else storable(Path(source_path).stem),
        " and ".join(dict.fromkeys(creators)) or "Unknown",
        languages[0] if languages else "und",
    )


def _read_epub(source_path: str, max_bytes: int = MAX_BOOK_BYTES) -> Any:
    """ebooklib's book after the container checks; every failure is a FolioError."""
    try:
        with zipfile.ZipFile(source_path) as zf:
            problem = epub_container_problem(zf, max_bytes)
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError):
        raise FolioError(source_path, "truncated or corrupt zip/EPUB archive") from None
    if problem:
        raise FolioError(source_path, problem)
    from ebooklib import epub

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return epub.read_epub(source_path, options={"ignore_ncx": True})
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError):
        raise FolioError(source_path, "truncated or corrupt zip/EPUB archive") from None
    except KeyError as exc:
        raise FolioError(
            source_path, f"broken EPUB: a file listed in its package is missing ({exc})"
        ) from None
    except Exception as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise FolioError(source_path, f"broken EPUB: {reason}") from None


def _epub_sections(book: Any, fallback_title: str) -> list[tuple[str, list[str]]]:
    """The spine cut at the TOC starts into ``(title, paragraphs)``; leading headings are not text."""
    from ebooklib import epub

    nav_names = {item.get_name() for item in book.get_items() if isinstance(item, epub.EpubNav)}
    starts = toc_starts(_toc_nodes(book.toc))
    targeted = {_doc_of(href) for _, href in starts}
    blocks: list[HtmlBlock] = []
    offsets: dict[str, tuple[int, dict[str, int]]] = {}
    doc_titles: list[tuple[int, str]] = []
    for idref, linear in book.spine:
        item = book.get_item_with_id(idref)
        if item is None or item.get_name() in nav_names or not item.media_type.endswith(("html", "xml")):
            continue
        name = _norm_path(item.get_name())
        if str(linear).lower() == "no" and name not in targeted:
            continue
        doc_blocks, ids = html_blocks(item.get_content())
        offsets[name] = (len(blocks), ids)
        heading = next((text for kind, text in doc_blocks if kind == "h"), "")
        doc_titles.append((len(blocks), heading or Path(name).stem))
        blocks.extend(doc_blocks)
    positions: list[tuple[int, str]] = []
    for title, href in starts:
        doc = _doc_of(href)
        if doc not in offsets:
            continue
        offset, ids = offsets[doc]
        fragment = unquote(href.split("#", 1)[1]) if "#" in href else ""
        positions.append((offset + ids.get(fragment, 0), title))
    if not positions:
        positions = doc_titles
    if not blocks:
        return []
    positions = sorted(dict(positions).items())  # one start per position: the deepest (last) entry
    bounds = [(0, fallback_title), *positions] if positions[0][0] > 0 else positions
    sections: list[tuple[str, list[str]]] = []
    for n, (start, title) in enumerate(bounds):
        end = bounds[n + 1][0] if n + 1 < len(bounds) else len(blocks)
        chunk = blocks[start:end]
        while chunk and chunk[0][0] == "h":
            chunk = chunk[1:]
        sections.append((title or fallback_title, [text for _, text in chunk]))
    return sections


def epub_book(source_path: str, max_bytes: int = MAX_BOOK_BYTES) -> ParsedBook:
    book = _read_epub(source_path, max_bytes)
    title, author, language = _epub_metadata(book, source_path)
    try:
        sections = _epub_sections(book, title)
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError):
        raise FolioError(source_path, "truncated or corrupt zip/EPUB archive") from None
    chapters = checked_chapters(book_chapters(sections), source_path)
    return ParsedBook(
        source_path=source_path,
        format="epub",
        title=title,
        author=author,
        language=language,
        chapters=chapters,
    )


def read(source_path: str, data: bytes, max_bytes: int) -> ParsedBook:
    """The format table's entry point: an EPUB (read again from its path by ebooklib)."""
    return epub_book(source_path, max_bytes)
