"""Node-level caching: Hamilton's cache with its results stored in diskcache, inside the library.

``DiskCacheResultStore`` is the small result-store adapter (Hamilton's ``DiskCacheAdapter`` is
deprecated); cache metadata (which data version each node produced for which inputs) goes to
Hamilton's SQLite metadata store. Both live in ``LIBRARY/cache/hamilton``, so two libraries never
share or pollute each other's cache.

What is cached and why:
- ``parsed_book`` always runs (cheap, and it is what notices an edited file); everything below
  it is keyed by the *content* of its inputs, so an unchanged book reuses its manifest, chunks,
  windows, vectors and concept map, and a changed config key re-runs exactly the nodes downstream of
  it (a new chunk size re-chunks and re-embeds; a new theme threshold re-clusters only).
- Writers (``lexical_index``, ``vector_index``, ``concept_map_file``, ``staged_book``) and clients
  (``encoder``) always run: the DAG registry declares them once per DAG (``Dag.never_cached`` in
  ``dataflows.registry``, handed to ``with_cache(recompute=...)``); node modules carry no cache rules.
- Window embeddings are additionally cached per window by ``(model id, text hash)``
  (``nodes.backends.embedding_cache``), so an edited chapter re-embeds only its own windows.

Fingerprints are registered for objects Hamilton cannot hash by value: the encoder (its model id),
the embedding cache and progress sinks (constant), book stores (book id + content hash) and concept
maps (their JSON bytes).
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from typing import Any

import diskcache
from hamilton.caching import fingerprinting
from hamilton.caching.stores.base import ResultStore, StoredResult
from hamilton.caching.stores.sqlite import SQLiteMetadataStore

from folio.nodes.backends.book_store import BookStore
from folio.nodes.backends.embedding_cache import EmbeddingCache, damaged_cache
from folio.nodes.backends.encoder import Encoder
from folio.nodes.backends.progress import Progress
from folio.nodes.backends.summary_store import store_path
from folio.nodes.core.types import ConceptMap, FolioError

RESULTS = "results"
# Objects handed to the DAG that must never be persisted (their fingerprints still version results).
CLIENT_TYPES: tuple[type, ...] = (Encoder, BookStore, EmbeddingCache, Progress)
METADATA = "metadata"


class DiskCacheResultStore(ResultStore):
    """Hamilton result store backed by a ``diskcache.Cache`` directory (safe across processes)."""

    def __init__(self, path: str | Path, size_limit: int = 8 * 2**30) -> None:
        self.path = Path(path)
        self.size_limit = size_limit
        self._cache = diskcache.Cache(str(self.path), size_limit=size_limit)

    def __getstate__(self) -> dict[str, Any]:
        return {"path": str(self.path), "size_limit": self.size_limit}

    def __setstate__(self, state: dict[str, Any]) -> None:
        DiskCacheResultStore.__init__(self, state["path"], state["size_limit"])

    def set(self, data_version: str, result: Any, **kwargs: Any) -> None:
        """Store a node's result; clients and connections are versioned but never stored."""
        if isinstance(result, CLIENT_TYPES):
            return
        try:
            payload = StoredResult.new(value=result).save()
        except Exception:  # unpicklable (open archives, sockets): nothing to reuse anyway
            return
        self._cache.set(data_version, payload)

    def get(self, data_version: str) -> Any | None:
        raw = self._cache.get(data_version)
        return None if raw is None else StoredResult.load(raw).value

    def delete(self, data_version: str) -> None:
        self._cache.delete(data_version)

    def delete_all(self) -> None:
        self._cache.clear()

    def exists(self, data_version: str) -> bool:
        return data_version in self._cache

    def __len__(self) -> int:
        return len(self._cache)

    def volume(self) -> int:
        return int(self._cache.volume())

    def close(self) -> None:
        self._cache.close()


def _constant(name: str):
    def fingerprint(obj: object, *args: Any, **kwargs: Any) -> str:
        return fingerprinting.hash_primitive(name)

    return fingerprint


@fingerprinting.hash_value.register(Encoder)
def _hash_encoder(obj: Encoder, *args: Any, **kwargs: Any) -> str:
    return fingerprinting.hash_primitive(f"encoder:{obj.embedder_id}")


@fingerprinting.hash_value.register(BookStore)
def _hash_book_store(obj: BookStore, *args: Any, **kwargs: Any) -> str:
    return fingerprinting.hash_primitive(f"book:{obj.book_id}:{obj.descriptor.get('content_hash')}")


@fingerprinting.hash_value.register(ConceptMap)
def _hash_concept_map(obj: ConceptMap, *args: Any, **kwargs: Any) -> str:
    return fingerprinting.hash_bytes(obj.to_json())


fingerprinting.hash_value.register(EmbeddingCache)(_constant("embedding-cache"))
fingerprinting.hash_value.register(Progress)(_constant("progress"))


def cache_dir(library_path: str | Path) -> Path:
    return Path(library_path) / "cache" / "hamilton"


def stores(library_path: str | Path) -> tuple[SQLiteMetadataStore, DiskCacheResultStore]:
    """The library's node-cache stores; a damaged one is a one-line ``FolioError`` naming it."""
    base = cache_dir(library_path)
    try:
        base.mkdir(parents=True, exist_ok=True)
        return SQLiteMetadataStore(
            path=str(base / METADATA), connection_kwargs={"timeout": 60}
        ), DiskCacheResultStore(base / RESULTS)
    except sqlite3.DatabaseError as exc:
        raise damaged_cache(base, "node cache", exc) from None
    except OSError as exc:
        raise FolioError(str(base), f"cannot write the node cache ({exc.strerror or exc})") from None


def cache_info(library_path: str | Path) -> dict[str, Any]:
    """Sizes of the node-result cache and the per-window embedding cache, and the number of stored
    summaries (read without writing)."""
    base = Path(library_path) / "cache"
    info: dict[str, Any] = {"library": str(Path(library_path)), "node_results": 0, "node_results_bytes": 0}
    results = cache_dir(library_path) / RESULTS
    info["window_embeddings"], info["window_embeddings_bytes"] = 0, 0
    embeddings = base / "embeddings"
    for directory, name, key in (
        (results, "node cache", "node_results"),
        (embeddings, "embedding cache", "window_embeddings"),
    ):
        if not (directory / "cache.db").exists():
            continue
        try:  # read-only: a read-only library or a damaged cache is one line
            count, size = _cache_size(directory / "cache.db")
        except sqlite3.OperationalError as exc:
            raise FolioError(str(directory), f"cannot read the {name} ({exc})") from None
        except sqlite3.DatabaseError as exc:
            raise damaged_cache(directory, name, exc) from None
        info[key], info[f"{key}_bytes"] = count, size
    info["summaries"] = _summary_count(store_path(library_path))
    return info


def _summary_count(database: Path) -> int:
    """Stored chapter summaries and synopses (``nodes.backends.summary_store``), read-only."""
    if not database.exists():
        return 0
    for uri in (f"file:{database}?mode=ro", f"file:{database}?mode=ro&immutable=1"):
        try:
            con = sqlite3.connect(uri, uri=True, timeout=60)
            try:
                return int(con.execute("SELECT count(*) FROM summaries").fetchone()[0])
            finally:
                con.close()
        except sqlite3.OperationalError:  # a directory that cannot take SQLite's shared-memory file
            continue
        except sqlite3.DatabaseError as exc:
            raise damaged_cache(database.parent, "summary store", exc) from None
    raise FolioError(str(database), "cannot read the summary store")


def _cache_size(database: Path) -> tuple[int, int]:
    """``(entries, bytes)`` of a diskcache database (its ``len`` and ``volume()``), read-only."""
    try:
        return _read_cache_size(f"file:{database}?mode=ro")
    except sqlite3.OperationalError:  # a directory that cannot take SQLite's shared-memory file
        return _read_cache_size(f"file:{database}?mode=ro&immutable=1")


def _read_cache_size(uri: str) -> tuple[int, int]:
    con = sqlite3.connect(uri, uri=True, timeout=60)
    try:
        count, size = con.execute("SELECT count(*), coalesce(sum(size), 0) FROM Cache").fetchone()
        pages = con.execute("PRAGMA page_count").fetchone()[0] * con.execute("PRAGMA page_size").fetchone()[0]
    finally:
        con.close()
    return int(count), int(pages) + int(size)


def clear_cache(library_path: str | Path) -> None:
    """Remove every cached node result, window embedding and stored summary of the library (books stay)."""
    shutil.rmtree(Path(library_path) / "cache", ignore_errors=True)


def last_run(dr: Any) -> dict[str, list[str]]:
    """Which nodes the driver's last run executed and which it took from the cache."""
    from hamilton.caching.adapter import CachingEventType

    by_node = dr.cache.logs(run_id=dr.cache.last_run_id, level="debug")
    events = [e for node_events in by_node.values() for e in node_events]
    executed = {e.node_name for e in events if e.event_type == CachingEventType.EXECUTE_NODE}
    retrieved = {e.node_name for e in events if e.event_type == CachingEventType.GET_RESULT}
    return {"executed": sorted(executed), "from_cache": sorted(retrieved - executed)}
