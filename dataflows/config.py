"""Configuration: YAML files merged over ``configs/default.yaml``, then environment overrides.

Every key may be overridden by an environment variable of its name in upper case with the ``FOLIO_``
prefix (``kiwix_max_books`` <- ``FOLIO_KIWIX_MAX_BOOKS``); unprefixed names (``LLM``, ``WORKERS``) are
ignored, so a shell's unrelated variables never change Folio. Values from the environment are parsed
as YAML scalars (``FOLIO_KIWIX_MAX_BOOKS=3`` is the integer 3; a list key takes a YAML list or
comma-separated names: ``FOLIO_SOURCES=book,kiwix``). The merged config is validated before any work
(``validated``): each key's type (that of its default in ``configs/default.yaml``, or ``NULLABLE``),
the allowed values of the switches and names (``CHOICES``) and numeric ranges (``RANGES``); a bad
value is one ``FolioError`` line naming where it came from (the variable, file or key) and what is
allowed. Two kinds of keys: *switches* (``SWITCHES``: ``embedder``,
``kiwix``, ``llm``, ``executor``...) select ``@config.when`` variants and are all that Hamilton's
``with_config`` receives; every other key is a *setting* (a number, path or URL), passed to the nodes
as the input of the same name at execute time (``dataflows.registry.execute``), where the node's
signature holds its default. A few settings are read by the assembly layer instead (``ASSEMBLY_KEYS``).
"""

from __future__ import annotations

import copy
import math
import os
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from stat import S_ISREG
from typing import Any

import yaml

from folio.nodes.core.types import FolioError

CONFIG_DIR = Path(str(resources.files("folio.configs")))  # configs/ in the repo, folio/configs when installed
DEFAULT_CONFIG = CONFIG_DIR / "default.yaml"


_PARSED: dict[tuple[str, int, int], dict[str, Any]] = {}


def _read_yaml(path: Path) -> dict[str, Any]:
    """The mapping in ``path`` (a fresh copy); parsed once per file version (path, mtime, size): a warm
    service re-reads its config on every request, and parsing it was ~10 ms of each ask."""
    try:
        stat = path.stat()
    except FileNotFoundError:
        raise FolioError(str(path), "config file not found") from None
    except OSError as exc:
        raise FolioError(str(path), f"cannot read the config file: {exc.strerror}") from None
    if not S_ISREG(stat.st_mode):  # a folder, or a FIFO that would block the read forever
        raise FolioError(str(path), "not a regular file: a config is a YAML file")
    key = (str(path), stat.st_mtime_ns, stat.st_size)
    data = _PARSED.get(key)
    if data is None:
        if len(_PARSED) > 64:
            _PARSED.clear()
        data = _PARSED[key] = _parsed_yaml(path)
    return copy.deepcopy(data)


def _parsed_yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except FileNotFoundError:
        raise FolioError(str(path), "config file not found") from None
    except OSError as exc:
        raise FolioError(str(path), f"cannot read the config file: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise FolioError(str(path), "not a text file: a config is YAML in UTF-8") from None
    except yaml.YAMLError as exc:
        raise FolioError(str(path), f"invalid YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise FolioError(str(path), "a config file must be a mapping of keys to values")
    return data


def config_files() -> list[Path]:
    """All config variants shipped in ``configs/`` (experiments excluded)."""
    return sorted(CONFIG_DIR.glob("*.yaml"))


def load_config(
    path: str | Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Defaults <- the given YAML file (which may name a ``base``) <- ``FOLIO_*`` environment <- explicit
    overrides, validated (``validated``)."""
    config = _read_yaml(DEFAULT_CONFIG)
    defaults = dict(config)
    origins: dict[str, str] = {}
    if path is not None:
        layer = _read_yaml(Path(path))
        base = layer.pop("base", None)
        if base is not None and not isinstance(base, str):
            raise FolioError(f"{path} (base)", f"must be the path of a config file (got {base!r})")
        if base:
            base_path = (Path(path).parent / base) if not Path(base).is_absolute() else Path(base)
            base_layer = _read_yaml(base_path)
            config.update(base_layer)
            origins.update({key: f"{base_path} ({key})" for key in base_layer})
        unknown = sorted(set(layer) - set(config))
        if unknown:
            raise FolioError(str(path), f"unknown config key(s): {', '.join(unknown)}")
        config.update(layer)
        origins.update({key: f"{path} ({key})" for key in layer})
    env = os.environ if environ is None else environ
    for key in list(config):
        name = ENV_PREFIX + key.upper()
        raw = env.get(name)
        if raw is not None:
            config[key] = _env_value(name, raw, defaults.get(key))
            origins[key] = name
    if overrides:
        unknown = sorted(set(overrides) - set(config))
        if unknown:
            raise FolioError("config", f"unknown config key(s): {', '.join(unknown)}")
        config.update(overrides)
        origins.update({key: key for key in overrides})
    config = validated(config, defaults, origins)
    if config.get("concept_map_llm") == "openai" and config.get("llm") != "openai":
        where = origins.get("concept_map_llm", "concept_map_llm")
        raise FolioError(
            where, "concept_map_llm: openai needs an LLM: set llm: openai (or concept_map_llm: none)"
        )
    return config


ENV_PREFIX = "FOLIO_"

# Allowed values of the switches and of the settings that are names (``tests/test_config.py`` checks
# them against the ``@config.when`` variants of the DAG modules).
CHOICES: dict[str, tuple[Any, ...]] = {
    "embedder": ("sentence_transformers", "onnx"),
    "kiwix": ("libzim", "http", "none"),
    "llm": ("none", "openai"),
    "concept_map_llm": ("none", "openai"),
    "executor": ("local", "dask"),
    "answer_mode": ("pipeline", "agent"),
    "search_mode": ("lexical", "semantic", "hybrid", "bm25s", "dense_exact"),
    "hybrid_fusion": ("convex", "rrf"),
    "rerank": ("none", "cross_encoder", "llm"),
    "eval_answers": (True, False),
    "answer_summaries": (True, False),
    "disambiguation": (True, False),
    "chunk_profile": ("narrative", "technical", "poetry"),
    "vector_dtype": ("f32", "f16", "i8"),
    "encoder_precision": ("auto", "fp32", "bf16"),
}
# Allowed names in the settings that are lists of names (``tests/test_config.py`` checks them against
# the node modules).
LIST_CHOICES: dict[str, tuple[str, ...]] = {"sources": ("book", "kiwix", "web", "news")}
# Keys whose default is null, with the type of a value when set.
NULLABLE: dict[str, type] = {
    "chunk_tokens": int,
    "workers": int,
    "kiwix_url": str,
    "dask_scheduler": str,
    "searxng_url": str,
    "rerank_model": str,
}
MAX_INT = 2**31 - 1  # no whole-number setting is larger (a huge -k is refused, not an OverflowError)
# Inclusive ranges of numeric settings; every other number is from 0 to MAX_INT.
RANGES: dict[str, tuple[float, float]] = {
    "search_k": (1, 10_000),
    "embedding_batch_size": (1, 65_536),
    "chunk_tokens": (16, 65_536),
    "window_tokens": (8, 65_536),
    "hnsw_connectivity": (2, 1_024),
    "hnsw_expansion_add": (1, 65_536),
    "kiwix_max_books": (1, 1_000),
    "kiwix_search_all_max": (0, 100_000),
    "workers": (1, 1_024),
    "fusion_max_sources": (1, 16),
    "fusion_thread_pool_size": (1, 256),
    "scope_max_chapters": (1, 100_000),
    "answer_max_citations": (1, 1_000),
    "answer_max_words": (1, 100_000),
    "searxng_max_results": (1, 1_000),
    "chunk_overlap": (0.0, 0.9),
    "hybrid_lexical_weight": (0.0, 1.0),
    "concept_centroid_weight": (0.0, 1.0),
    "concept_theme_threshold": (0.0, 2.0),
    "multibook_threshold": (0.0, 1.0),
    "scope_boost": (0.0, 1.0),
    "rerank_depth": (1, 100),
    "evidence_min_coverage": (0.0, 1.0),
    "evidence_min_similarity": (-1.0, 1.0),
}


def _env_value(name: str, raw: str, default: Any) -> Any:
    """An environment variable's value: a YAML scalar (empty: null); a list key also takes
    comma-separated names."""
    if not raw.strip():
        return None
    try:
        value = yaml.safe_load(raw)
    except yaml.YAMLError as exc:
        raise FolioError(name, f"not a valid value ({str(exc).splitlines()[0]})") from None
    if isinstance(default, list) and isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


def _shown(values: tuple[Any, ...]) -> str:
    return ", ".join(str(v).lower() if isinstance(v, bool) else str(v) for v in values)


def setting_problem(key: str, value: Any, default: Any) -> str | None:
    """Why ``value`` is not a valid ``key`` (``default``: its value in ``configs/default.yaml``), or None."""
    if key in CHOICES:
        allowed = CHOICES[key]
        if isinstance(value, bool) != isinstance(allowed[0], bool) or value not in allowed:
            return f"must be one of {_shown(allowed)} (got {value!r})"
        return None
    kind: type | None = NULLABLE.get(key) or (type(default) if default is not None else None)
    if value is None:
        return None if key in NULLABLE or default is None else "must be set (got null)"
    if kind is None:
        return None
    if kind is list:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            return f"must be a list of names (got {value!r})"
        names = LIST_CHOICES.get(key)
        unknown = [v for v in value if names is not None and v.strip().lower() not in names]
        if unknown:
            return f"names {', '.join(map(repr, unknown))}: use {', '.join(names or ())}"
        return None
    if kind is str:
        return None if isinstance(value, str) else f"must be text (got {value!r})"
    if kind is bool:
        return None if isinstance(value, bool) else f"must be true or false (got {value!r})"
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, int):
            return f"must be a whole number (got {value!r})"
    elif isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return f"must be a number (got {value!r})"
    low, high = RANGES.get(key, (0, MAX_INT))
    if not low <= value <= high:
        return f"must be from {low} to {high} (got {value!r})"
    return None


def validated(
    config: dict[str, Any], defaults: Mapping[str, Any], origins: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """``config`` itself when every key has a valid value, else a ``FolioError`` naming the first bad
    one by where it came from (``origins``: key -> variable, file or key; default: the key)."""
    for key, value in config.items():
        problem = setting_problem(key, value, defaults.get(key))
        if problem is not None:
            where = (origins or {}).get(key, key)
            raise FolioError(where, problem if where == key else f"{key} {problem}")
    return config


# Variant switches: the only keys that go to Hamilton's ``with_config`` (they select ``@config.when``
# functions). Every other key is a setting: a node input with a default in its signature, passed at
# execute time (``folio.dataflows.registry.settings_inputs``).
SWITCHES = frozenset(
    {
        "embedder",
        "kiwix",
        "llm",
        "concept_map_llm",
        "executor",
        "answer_mode",
        "search_mode",
        "hybrid_fusion",
        "rerank",
        "eval_answers",
        "answer_summaries",
    }
)


def switches(config: Mapping[str, Any]) -> dict[str, Any]:
    """The variant switches of ``config`` (what ``with_config`` receives)."""
    return {k: v for k, v in config.items() if k in SWITCHES}


def settings(config: Mapping[str, Any]) -> dict[str, Any]:
    """The settings of ``config``: numbers, paths, URLs (node inputs)."""
    return {k: v for k, v in config.items() if k not in SWITCHES}


# Settings read by the assembly layer (``dataflows/``) rather than by a node; every other key of a
# config is a switch or a node input (``tests/test_registry.py`` checks it).
ASSEMBLY_KEYS = frozenset(
    {
        "zim_paths",  # the Kiwix source of ``folio ask`` (dataflows.asking.ask_config, kiwix_query)
        "kiwix_url",  # idem, for kiwix: http
        "workers",  # the size of the local process pool (dataflows.parallel._remote_executor)
        "dask_scheduler",  # the Dask cluster (dataflows.parallel._remote_executor)
        "searxng_url",  # the web and news sources of ``folio ask`` (dataflows.asking)
        "searxng_timeout_seconds",
        "searxng_max_results",
        "ask_deadline_seconds",  # one ask's total deadline (dataflows.asking.ask, nodes.backends.deadlines)
        "book_formats",  # a Calibre library's format preference (dataflows.api.book_sources)
    }
)
