"""Configuration: YAML files merged over ``configs/default.yaml``, then environment overrides.

Every key may be overridden by an environment variable of the same name in upper case
(``kiwix_max_books`` <- ``KIWIX_MAX_BOOKS``); values from the environment are parsed as YAML scalars,
so ``KIWIX_MAX_BOOKS=3`` is the integer 3. Two kinds of keys: *switches* (``SWITCHES``: ``embedder``,
``kiwix``, ``llm``, ``executor``...) select ``@config.when`` variants and are all that Hamilton's
``with_config`` receives; every other key is a *setting* (a number, path or URL), passed to the nodes
as the input of the same name at execute time (``dataflows.registry.execute``), where the node's
signature holds its default. A few settings are read by the assembly layer instead (``ASSEMBLY_KEYS``).
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from folio.nodes.types import FolioError

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
    """Defaults <- the given YAML file (which may name a ``base``) <- environment <- explicit overrides."""
    config = _read_yaml(DEFAULT_CONFIG)
    if path is not None:
        layer = _read_yaml(Path(path))
        base = layer.pop("base", None)
        if base:
            base_path = (Path(path).parent / base) if not Path(base).is_absolute() else Path(base)
            config.update(_read_yaml(base_path))
        unknown = sorted(set(layer) - set(config))
        if unknown:
            raise FolioError(str(path), f"unknown config key(s): {', '.join(unknown)}")
        config.update(layer)
    env = os.environ if environ is None else environ
    for key in list(config):
        raw = env.get(key.upper())
        if raw is not None:
            config[key] = yaml.safe_load(raw) if raw.strip() else None
    if overrides:
        unknown = sorted(set(overrides) - set(config))
        if unknown:
            raise FolioError("config", f"unknown config key(s): {', '.join(unknown)}")
        config.update(overrides)
    return config


# Variant switches: the only keys that go to Hamilton's ``with_config`` (they select ``@config.when``
# functions). Every other key is a setting: a node input with a default in its signature, passed at
# execute time (``folio.dataflows.registry.settings_inputs``).
SWITCHES = frozenset(
    {
        "embedder",
        "kiwix",
        "llm",
        "executor",
        "answer_mode",
        "search_mode",
        "hybrid_fusion",
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
    }
)
