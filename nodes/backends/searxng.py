"""Web and news search through a SearXNG instance's JSON API (``/search?format=json``), over httpx.

``SearxngSource(base_url, category)`` is a fusion source: calling it with a clause returns a
``SourceResult`` whose text has one line per result (``title: snippet``) and whose citations hold the
result URLs. ``category`` is ``general`` for the ``web`` source and ``news`` for ``news``.
The instance must allow the JSON format (``search.formats: [html, json]`` in its settings.yml).

Config keys (read by ``nodes/query/source_fusion.py::web_sources``): ``searxng_url``,
``searxng_timeout_seconds``,
``searxng_max_results``.
Each search has an overall deadline of ``searxng_timeout_seconds`` (connect and every read together,
``nodes.backends.deadlines``), nested in the active one (an ``ask``'s total deadline).
Limitations: one page of results; snippets are the engines' own, not the pages' text.
"""

from __future__ import annotations

import httpx

from folio.nodes.backends.deadlines import deadline_client, deadline_scope
from folio.nodes.core.types import Citation, Deadline, FolioError, SourceResult

SOURCE_CATEGORIES = {"web": "general", "news": "news"}


class SearxngSource:
    """One SearXNG category as a fusion source.

    Args:
        base_url: the instance root, e.g. ``http://127.0.0.1:8888``.
        source: ``web`` or ``news``.
        timeout: seconds one search may take in all (connect and every read).
        max_results: results kept.
        client: an ``httpx.Client`` to use (tests).
    """

    def __init__(
        self,
        base_url: str,
        source: str = "web",
        timeout: float = 10.0,
        max_results: int = 5,
        client: httpx.Client | None = None,
    ) -> None:
        if source not in SOURCE_CATEGORIES:
            raise FolioError("sources", f"SearXNG serves web and news, not {source!r}")
        self.base_url = base_url.rstrip("/")
        self.source = source
        self.timeout = float(timeout)
        self.max_results = int(max_results)
        self._client = client or deadline_client(timeout=self.timeout)

    def search(self, query: str) -> list[dict[str, str]]:
        """The instance's results for ``query``: dicts with title, url and content."""
        url = f"{self.base_url}/search"
        params = {"q": query, "format": "json", "categories": SOURCE_CATEGORIES[self.source]}
        try:
            with deadline_scope(Deadline.after(self.timeout)):
                response = self._client.get(url, params=params, timeout=self.timeout)
        except httpx.TimeoutException:
            raise FolioError(url, f"no answer within {self.timeout:.1f} s") from None
        except httpx.TransportError as exc:
            raise FolioError(url, f"cannot reach SearXNG ({exc or type(exc).__name__})") from None
        if response.status_code != 200:
            hint = " (is the json format enabled in settings.yml?)" if response.status_code == 403 else ""
            raise FolioError(url, f"HTTP {response.status_code}{hint}")
        try:
            body = response.json()
        except ValueError:
            raise FolioError(url, "the answer is not JSON") from None
        rows = body.get("results") if isinstance(body, dict) else None
        if not isinstance(rows, list):
            raise FolioError(url, "the answer has no results list")
        out = []
        for row in rows:
            if isinstance(row, dict) and row.get("url"):
                out.append(
                    {
                        "title": " ".join(str(row.get("title") or row["url"]).split()),
                        "url": str(row["url"]),
                        "content": " ".join(str(row.get("content") or "").split()),
                    }
                )
        return out[: self.max_results]

    def __call__(self, clause: str) -> SourceResult:
        """The fusion source: the clause's results as one text with URL citations."""
        rows = self.search(clause)
        text = "\n".join(f"{r['title']}: {r['content']}" if r["content"] else r["title"] for r in rows)
        citations = tuple(Citation(self.source, title=r["title"], url=r["url"]) for r in rows)
        return SourceResult(self.source, self.source, text or "no results found", citations, clause=clause)

    def close(self) -> None:
        self._client.close()
