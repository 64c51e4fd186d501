"""Kiwix backend over a running kiwix-serve, with httpx (config ``kiwix: http``, ``kiwix_url``,
``kiwix_timeout_seconds``).

Endpoints: ``/catalog/v2/entries`` (OPDS, the books), ``/search?books.name=B&pattern=Q&format=xml``
(full text), ``/suggest?content=B&term=T`` (titles, JSON) and ``/raw/B/content/PATH`` (article bytes).
Excerpts and titles are built from the raw article bytes with ``html_text``, exactly as the libzim
backend does, so both backends give the same candidates (kiwix-serve's own snippets are not used).

kiwix-serve 3.3.0 quirks handled here: the catalog is not well-formed XML (a raw ``&`` in a link), so
XML is parsed leniently; ``/suggest`` accepts only ``content=`` (``books.name`` is a 404),
repeats its list for archives without a title index, HTML-escapes titles *and* paths in its JSON, and
ends with a "containing ..." pattern entry; search pages hold at most 140 results; an article's browse
URL is ``/B/PATH`` (``/content/B/PATH`` from 3.4), so browse URLs come from the catalog's ``text/html``
link; ``/raw`` answers a redirect entry with a 302 to the target's browse URL; the catalog entry's
``<name>`` may be empty, so a book's name is taken from that link.

Every request has an overall deadline of ``kiwix_timeout_seconds`` (connect and every read together,
``nodes.backends.deadlines``), nested in the active one (an ``ask``'s total deadline): a server that
trickles cannot hold a call longer.

Limitations: one HTTP request per candidate (the article is read to build its excerpt); the catalog has
no ``Source`` metadata, so ``is_wikipedia`` looks at Name, Title and Creator only; an article read
directly (not found by search/suggest first) takes its title from the page's ``<title>``.
"""

from __future__ import annotations

import html
import json
import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import quote, unquote, urlencode, urlsplit

import httpx
import lxml.etree

from folio.nodes.backends import mentions_wikipedia
from folio.nodes.backends.deadlines import deadline_client, deadline_scope
from folio.nodes.backends.html_text import PageText, clean_title, excerpt, page_text
from folio.nodes.core.kiwix_types import Article, Candidate, KiwixBook
from folio.nodes.core.types import Deadline, FolioError

MAX_REDIRECTS = 10
MAX_PAGE_LENGTH = 140  # kiwix-serve caps a search page at 140 results
CATALOG_PAGE = 100
PAGE_CACHE_SIZE = 256

_ATOM = "{http://www.w3.org/2005/Atom}"
_REDIRECT_STATUSES = frozenset((301, 302, 303, 307, 308))
_SUGGESTION = re.compile(
    r'"value"\s*:\s*"(?P<value>[^"]*)".*?"kind"\s*:\s*"path"\s*,\s*"path"\s*:\s*"(?P<path>[^"]*)"', re.S
)


@dataclass(frozen=True)
class CatalogEntry:
    """A book served by kiwix-serve and the server path of its browse root (``/B`` or ``/content/B``)."""

    book: KiwixBook
    root: str


@dataclass(frozen=True)
class _Fetched:
    path: str
    page: PageText
    mimetype: str


def raw_suggestion_count(limit: int) -> int:
    """How many raw suggestions to ask for (same rule as the libzim backend)."""
    return max(3 * limit, 40)


def parse_catalog(xml: bytes, base_url: str) -> tuple[CatalogEntry, ...]:
    """Books from an OPDS ``/catalog/v2/entries`` feed; entries without an HTML link are skipped."""
    feed = _xml(xml)
    if feed is None or not str(feed.tag).endswith("feed"):
        raise FolioError(base_url, "the server's catalog is not an OPDS feed (is this a kiwix-serve?)")
    origin = _origin(base_url)
    out: list[CatalogEntry] = []
    for entry in feed.iter(f"{_ATOM}entry"):
        root = next(
            (link.get("href", "") for link in entry.iter(f"{_ATOM}link") if link.get("type") == "text/html"),
            "",
        )
        root = urlsplit(root).path.rstrip("/")
        if not root:
            continue
        name = unquote(root.rsplit("/", 1)[-1])

        def text(tag: str, entry: lxml.etree._Element = entry) -> str:
            return (entry.findtext(f"{_ATOM}{tag}") or "").strip()

        author = (entry.findtext(f"{_ATOM}author/{_ATOM}name") or "").strip()
        count = text("articleCount")
        book = KiwixBook(
            name=name,
            title=text("title") or name,
            language=text("language"),
            description=text("summary"),
            article_count=int(count) if count.isdigit() else 0,
            is_wikipedia=mentions_wikipedia(text("name"), text("title"), author),
            location=origin + root,
        )
        out.append(CatalogEntry(book=book, root=root))
    return tuple(out)


def parse_search_results(xml: bytes, url: str) -> list[tuple[str, str]]:
    """``(title, link)`` pairs from a kiwix-serve ``format=xml`` (RSS) search page, best first."""
    rss = _xml(xml)
    if rss is None or rss.tag != "rss":
        raise FolioError(url, "kiwix-serve's search results are not an RSS feed")
    return [
        ((item.findtext("title") or "").strip(), (item.findtext("link") or "").strip())
        for item in rss.iter("item")
        if (item.findtext("link") or "").strip()
    ]


def parse_suggestions(text: str) -> list[tuple[str, str]]:
    """``(title, path)`` pairs from a ``/suggest`` JSON answer; titles and paths HTML-unescaped.

    Pattern entries ("containing ...") are dropped. kiwix-serve 3.3.0 does not JSON-escape everything,
    so an answer that is not valid JSON is read with a regular expression.
    """
    try:
        data = json.loads(text)
        pairs = [
            (str(item.get("value", "")), str(item["path"]))
            for item in data
            if isinstance(item, dict) and item.get("kind", "path") == "path" and item.get("path")
        ]
    except (json.JSONDecodeError, TypeError, AttributeError):
        pairs = [(m["value"], m["path"]) for m in _SUGGESTION.finditer(text)]
    return [(clean_title(value), html.unescape(path)) for value, path in pairs]


def link_path(link: str, book: str, root: str, base_path: str = "") -> str:
    """The entry path inside the ZIM for a kiwix-serve link (browse, ``/content`` or ``/raw`` URL)."""
    path = unquote(urlsplit(link).path)
    prefixes = (
        unquote(root) + "/",
        f"{base_path}/content/{book}/",
        f"{base_path}/raw/{book}/content/",
        f"{base_path}/{book}/",
    )
    for prefix in prefixes:
        if path.startswith(prefix):
            return path[len(prefix) :]
    raise FolioError(link, f"link does not point into book {book!r}")


class KiwixHttpBackend:
    """Kiwix books served by a kiwix-serve.

    Args:
        base_url: the server's root URL, e.g. ``http://127.0.0.1:8080`` (with any ``--urlRootLocation``).
        timeout: seconds one HTTP request may take in all (connect and every read).
        client: an ``httpx.Client`` to use instead of a new one (tests).
    """

    def __init__(self, base_url: str, timeout: float = 10.0, client: httpx.Client | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self._base_path = urlsplit(self.base_url).path.rstrip("/")
        self._origin = _origin(self.base_url)
        self._client = client or deadline_client(timeout=timeout, follow_redirects=False)
        self._catalog: dict[str, CatalogEntry] | None = None
        self._titles: dict[tuple[str, str], str] = {}
        self._pages: OrderedDict[tuple[str, str], _Fetched] = OrderedDict()
        self._lock = threading.Lock()

    def books(self) -> tuple[KiwixBook, ...]:
        """The served books, sorted by name; a ``FolioError`` when the server lists none (an empty or
        broken catalog: nothing to search)."""
        catalog = self._load_catalog()
        if not catalog:
            raise FolioError(self.base_url, "the server's catalog lists no books (is this a kiwix-serve?)")
        return tuple(entry.book for entry in catalog.values())

    def search(self, book: str, query: str, limit: int = 20) -> tuple[Candidate, ...]:
        """Full-text search of one book; best first, redirects resolved, duplicates removed."""
        entry = self._entry(book)
        if not query.strip() or limit <= 0:
            return ()
        params = {
            "books.name": book,
            "pattern": query,
            "format": "xml",
            "pageLength": min(2 * limit, MAX_PAGE_LENGTH),
        }
        url = self._url("/search", params)
        results = parse_search_results(self._get(url).content, url)
        hints = [
            (clean_title(title), link_path(link, book, entry.root, self._base_path))
            for title, link in results
        ]
        return self._candidates(book, hints, "search", limit)

    def suggest(self, book: str, term: str, limit: int = 20) -> tuple[Candidate, ...]:
        """Title suggestions for ``term``; redirects resolved, duplicates removed."""
        self._entry(book)
        if not term.strip() or limit <= 0:
            return ()
        url = self._url("/suggest", {"content": book, "term": term, "count": raw_suggestion_count(limit)})
        return self._candidates(book, parse_suggestions(self._get(url).text), "suggest", limit)

    def article(self, book: str, path: str) -> Article:
        """One article as clean text; a redirect is followed to its target."""
        entry = self._entry(book)
        fetched = self._fetch(book, path)
        if not fetched.mimetype.startswith("text/html"):
            raise FolioError(self._raw_url(book, path), f"not an HTML article ({fetched.mimetype})")
        with self._lock:
            title = self._titles.get((book, fetched.path))
        return Article(
            book=book,
            path=fetched.path,
            title=title or fetched.page.title or fetched.path,
            text=fetched.page.text,
            url=self._browse_url(entry, fetched.path),
            sections=fetched.page.sections,
        )

    def close(self) -> None:
        """Close the HTTP connections."""
        self._client.close()

    def __enter__(self) -> KiwixHttpBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- private ---------------------------------------------------------------------------------

    def _url(self, endpoint: str, params: dict[str, object] | None = None) -> str:
        query = f"?{urlencode(params, quote_via=quote)}" if params else ""
        return f"{self.base_url}{endpoint}{query}"

    def _raw_url(self, book: str, path: str) -> str:
        return f"{self.base_url}/raw/{quote(book)}/content/{quote(path, safe='/')}"

    def _browse_url(self, entry: CatalogEntry, path: str) -> str:
        return f"{self._origin}{entry.root}/{quote(path, safe='/')}"

    def _get(self, url: str) -> httpx.Response:
        response = self._request(url)
        if response.status_code != 200:
            raise FolioError(url, f"kiwix-serve answered HTTP {response.status_code}")
        return response

    def _request(self, url: str) -> httpx.Response:
        try:
            with deadline_scope(Deadline.after(self.timeout)):
                return self._client.get(url, timeout=self.timeout)
        except httpx.TimeoutException:
            message = f"kiwix-serve did not answer within {self.timeout:.1f} s (timeout)"
            raise FolioError(url, message) from None
        except httpx.ConnectError as exc:
            raise FolioError(url, f"cannot connect to kiwix-serve ({_reason(exc)})") from None
        except httpx.HTTPError as exc:
            raise FolioError(url, f"request to kiwix-serve failed ({_reason(exc)})") from None

    def _load_catalog(self) -> dict[str, CatalogEntry]:
        if self._catalog is not None:
            return self._catalog
        found: dict[str, CatalogEntry] = {}
        start = 0
        while True:
            url = self._url("/catalog/v2/entries", {"start": start, "count": CATALOG_PAGE})
            page = parse_catalog(self._get(url).content, self.base_url)
            new = [entry for entry in page if entry.book.name not in found]
            for entry in new:
                found[entry.book.name] = entry
            if len(page) < CATALOG_PAGE or not new:
                break
            start += len(page)
        self._catalog = dict(sorted(found.items()))
        return self._catalog

    def _entry(self, book: str) -> CatalogEntry:
        catalog = self._load_catalog()
        if book not in catalog:
            known = ", ".join(catalog) or "none"
            raise FolioError(book, f"no such book on {self.base_url} (served: {known})")
        return catalog[book]

    def _fetch(self, book: str, path: str) -> _Fetched:
        """Read an entry's raw bytes, following redirects, as clean page text (cached)."""
        key = (book, path)
        with self._lock:
            if key in self._pages:
                self._pages.move_to_end(key)
                return self._pages[key]
        entry = self._entry(book)
        current = path
        for _ in range(MAX_REDIRECTS + 1):
            url = self._raw_url(book, current)
            response = self._request(url)
            if response.status_code in _REDIRECT_STATUSES and response.headers.get("location"):
                current = link_path(response.headers["location"], book, entry.root, self._base_path)
                continue
            if response.status_code == 404:
                raise FolioError(url, "no such article")
            if response.status_code != 200:
                raise FolioError(url, f"kiwix-serve answered HTTP {response.status_code}")
            mimetype = response.headers.get("content-type", "").split(";")[0].strip()
            with self._lock:
                title = self._titles.get((book, current))
            page = (
                page_text(response.content, title=title)
                if mimetype.startswith("text/html")
                else PageText("", "", ())
            )
            fetched = _Fetched(path=current, page=page, mimetype=mimetype)
            with self._lock:
                self._pages[key] = fetched
                self._pages[(book, current)] = fetched
                while len(self._pages) > PAGE_CACHE_SIZE:
                    self._pages.popitem(last=False)
            return fetched
        raise FolioError(self._raw_url(book, path), f"more than {MAX_REDIRECTS} redirects")

    def _candidates(
        self, book: str, hints: Sequence[tuple[str, str]], origin: str, limit: int
    ) -> tuple[Candidate, ...]:
        """Candidates for ``(title, path)`` hints: a hint's title is the entry title of its own path."""
        entry = self._entry(book)
        with self._lock:
            for title, path in hints:
                if title:
                    self._titles[(book, path)] = title
        out: list[Candidate] = []
        seen: set[str] = set()
        for _, path in hints:
            try:
                fetched = self._fetch(book, path)
            except FolioError as exc:
                if exc.reason == "no such article":
                    continue
                raise
            if fetched.path in seen or not fetched.mimetype.startswith("text/html"):
                continue
            seen.add(fetched.path)
            with self._lock:
                known = self._titles.get((book, fetched.path))
            out.append(
                Candidate(
                    book=book,
                    path=fetched.path,
                    title=known or fetched.page.title or fetched.path,
                    excerpt=excerpt(fetched.page),
                    url=self._browse_url(entry, fetched.path),
                    origin=origin,
                )
            )
            if len(out) >= limit:
                break
        return tuple(out)


def _xml(content: bytes) -> lxml.etree._Element | None:
    """Parse XML leniently: kiwix-serve 3.3.0 writes a raw ``&`` in its catalog's self link."""
    parser = lxml.etree.XMLParser(recover=True, resolve_entities=False, no_network=True)
    try:
        return lxml.etree.fromstring(content, parser=parser)
    except lxml.etree.XMLSyntaxError:
        return None


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _reason(exc: Exception) -> str:
    text = str(exc).strip()
    if "refused" in text.lower():
        return "connection refused"
    return text or type(exc).__name__
