"""``folio viz``: DAG diagrams (SVG, PNG) and their graph structure (JSON) for every config.

For each ``configs/*.yaml`` and each DAG (ingest, library, search, kiwix, ask, eval) it
writes ``viz/<config>.<dag>.svg|png`` and ``viz/<config>.<dag>.json`` (sorted nodes and edges). The
JSON is what the tests compare with the code, so a committed diagram can never drift from the DAG.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from hamilton import driver

from folio.dataflows.asking import ask_driver
from folio.dataflows.config import config_files, load_config
from folio.dataflows.drivers import ingest_driver, search_driver
from folio.dataflows.evaluation import eval_driver
from folio.dataflows.kiwix_query import kiwix_driver
from folio.dataflows.parallel import library_driver

VIZ_DIR = Path(__file__).resolve().parent.parent / "viz"


def _dag_builders() -> dict[str, Callable[[dict[str, Any]], driver.Driver]]:
    builders: dict[str, Callable[[dict[str, Any]], driver.Driver]] = {
        "ingest": ingest_driver,
        "search": search_driver,
    }
    builders["library"] = library_driver  # the library-ingest DAG (its executor variant follows `executor`)
    builders["kiwix"] = kiwix_driver
    builders["ask"] = ask_driver
    builders["eval"] = eval_driver
    return builders


def graph_structure(dr: driver.Driver) -> dict[str, Any]:
    """Sorted nodes (name, type) and edges (upstream → downstream) of a driver's graph."""
    nodes = []
    edges = []
    for var in dr.list_available_variables():
        nodes.append(
            {
                "name": var.name,
                "type": getattr(var.type, "__name__", str(var.type)),
                "input": var.is_external_input,
            }
        )
        for dep in var.required_dependencies | var.optional_dependencies:
            edges.append([dep, var.name])
    return {"nodes": sorted(nodes, key=lambda n: n["name"]), "edges": sorted(edges)}


def diagrams() -> Iterator[tuple[str, str, driver.Driver]]:
    """(config name, dag name, driver) for every shipped config and DAG."""
    for path in config_files():
        config = load_config(path, environ={})
        for dag, build in _dag_builders().items():
            yield path.stem, dag, build(config)


def render_all(out: str | Path | None = None, formats: tuple[str, ...] = ("svg", "png")) -> list[Path]:
    """Write every diagram and its structure JSON; returns the files written."""
    out_dir = Path(out) if out else VIZ_DIR
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for config_name, dag, dr in diagrams():
        stem = out_dir / f"{config_name}.{dag}"
        structure = Path(f"{stem}.json")
        structure.write_text(json.dumps(graph_structure(dr), indent=1) + "\n", encoding="utf-8")
        written.append(structure)
        for fmt in formats:
            dr.display_all_functions(f"{stem}.{fmt}", orient="LR")
            written.append(Path(f"{stem}.{fmt}"))
    return written
