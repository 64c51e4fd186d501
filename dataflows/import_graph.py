"""Folio's import graph, read from the source with ``ast`` (nothing is imported): every import of every
module of ``folio.nodes`` and ``folio.dataflows``, the module → module edges, a cycle finder, and the
graph as one diagram with a cluster per group (``folio viz`` writes it as ``viz/modules.svg``;
``tests/test_architecture.py`` checks the rules of the house on the same scan).

The groups are the folders of ``nodes/`` (ingest, search, query, kiwix, eval, core, backends, readers)
and ``dataflows/``. An edge is drawn solid when the import runs at module level, dashed when it runs
only inside a function (a lazy import, kept out of start-up). Imports of ``nodes/core/types.py`` (the
values nearly every module uses) are not drawn: the diagram says so in its title.

Config: none. Limitations: only static imports are seen (no ``importlib.import_module`` by name); a
``from package import name`` counts as an import of ``package.name`` when that is a module.
"""

from __future__ import annotations

import ast
import html
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PACKAGES = ("nodes", "dataflows")
NODE_GROUPS = ("ingest", "search", "query", "kiwix", "eval", "core", "backends", "readers")
UNDRAWN = "folio.nodes.core.types"  # imported by nearly every module: its arrows would hide the rest
GROUP_COLOURS = {
    "ingest": "#eef4fb",
    "search": "#eefaf1",
    "query": "#fbf3e6",
    "kiwix": "#f5eefa",
    "eval": "#fbeef0",
    "core": "#f2f2f2",
    "backends": "#eaf6f6",
    "readers": "#f8f6e6",
    "dataflows": "#fdf0e8",
}


@dataclass(frozen=True)
class Import:
    module: str  # the importing module (folio.*)
    target: str  # the imported module, or for ``from X import name`` X itself
    names: tuple[str, ...]  # ``from X import a, b``: (a, b); ``import X``: ()
    line: int
    top_level: bool


def source_root() -> Path:
    """The folder holding ``nodes/`` and ``dataflows/`` (the repository, or the installed ``folio``)."""
    return Path(__file__).resolve().parent.parent


def module_name(root: Path, path: Path) -> str:
    """The dotted ``folio.*`` name of a source file under ``root``."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(["folio", *parts])


def sources(root: Path) -> dict[str, Path]:
    """Every module of ``nodes/`` and ``dataflows/`` under ``root``, by dotted name."""
    return {
        module_name(root, p): p
        for package in PACKAGES
        for p in sorted((root / package).rglob("*.py"))
        if "__pycache__" not in p.parts
    }


def _absolute(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def imports_of(module: str, path: Path) -> Iterator[Import]:
    """The imports of one source file, at module level and inside functions alike."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    top = {id(n) for n in tree.body}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(module, alias.name, (), node.lineno, id(node) in top)
        elif isinstance(node, ast.ImportFrom):
            target = _absolute(module, path.name == "__init__.py", node)
            yield Import(module, target, tuple(a.name for a in node.names), node.lineno, id(node) in top)


def all_imports(root: Path) -> tuple[Import, ...]:
    return tuple(imp for module, path in sources(root).items() for imp in imports_of(module, path))


def _targets(imp: Import, modules: set[str]) -> set[str]:
    """The folio modules one import reaches (``from pkg import mod`` counts as ``pkg.mod``)."""
    targets = {f"{imp.target}.{n}" for n in imp.names if f"{imp.target}.{n}" in modules}
    if not targets or len(targets) < len(imp.names):
        targets.add(imp.target)
    return {t for t in targets if t in modules and t != imp.module}


def edges(imports: tuple[Import, ...], modules: set[str]) -> dict[str, set[str]]:
    """folio module → the folio modules it imports."""
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for imp in imports:
        if imp.target.startswith("folio."):
            graph[imp.module].update(_targets(imp, modules))
    return graph


def find_cycle(graph: Mapping[str, set[str]]) -> list[str] | None:
    """One import cycle (as a path that returns to its start), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state:
            found = visit(start)
            if found:
                return found
    return None


# --- the diagram -----------------------------------------------------------------------------------------
def group_of(module: str) -> str:
    """A module's group: its ``nodes/`` folder, or ``dataflows``."""
    parts = module.split(".")
    return parts[2] if parts[1] == "nodes" and len(parts) > 3 else parts[1]


def module_structure(root: Path | None = None) -> dict[str, Any]:
    """The import graph as sorted JSON-ready data: the modules (package ``__init__`` files left out)
    with their group, and the edges ``[importer, imported, "module" | "function"]`` (where the import
    runs; "module" when any of its imports runs at module level); imports of ``UNDRAWN`` are left out."""
    root = root or source_root()
    found = sources(root)
    modules = {m for m, p in found.items() if p.name != "__init__.py"}
    kinds: dict[tuple[str, str], str] = {}
    for imp in all_imports(root):
        if imp.module not in modules or not imp.target.startswith("folio."):
            continue
        for target in _targets(imp, set(found)) & modules:
            if imp.top_level or (imp.module, target) not in kinds:
                kinds[(imp.module, target)] = "module" if imp.top_level else "function"
    kinds = {edge: kind for edge, kind in kinds.items() if edge[1] != UNDRAWN}
    return {
        "groups": [*NODE_GROUPS, "dataflows"],
        "modules": [{"name": m, "group": group_of(m)} for m in sorted(modules)],
        "edges": [[a, b, kind] for (a, b), kind in sorted(kinds.items())],
    }


def modules_dot(structure: Mapping[str, Any]) -> str:
    """The import graph as DOT text: one cluster per group, one box per module (its file name), an
    arrow per import (dashed: inside a function only)."""
    lines = [
        'digraph "modules" {',
        '  graph [rankdir=TB, newrank=true, fontname="Helvetica", fontsize=14, nodesep=0.15, ranksep=0.9, '
        'labelloc=t, label=<<b>Folio: imports between modules</b><br/><font point-size="10">solid: at module '
        "level, dashed: inside a function; imports of nodes/core/types.py (nearly every module) not drawn"
        "</font>>];",
        '  node [shape=box, style="rounded,filled", fillcolor="white", color="#4a6fa5", '
        'fontname="Helvetica", fontsize=10, height=0.25, margin="0.06,0.02"];',
        '  edge [color="#7a889966", arrowsize=0.5, penwidth=0.7];',
    ]
    by_group: dict[str, list[str]] = {}
    for module in structure["modules"]:
        by_group.setdefault(module["group"], []).append(module["name"])
    for group in structure["groups"]:
        title = "dataflows/" if group == "dataflows" else f"nodes/{group}/"
        lines += [
            f'  subgraph "cluster_{group}" {{',
            f'    label=<<b>{html.escape(title)}</b>>; style="rounded,filled"; '
            f'fillcolor="{GROUP_COLOURS[group]}"; color="#b8c0cc";',
        ]
        lines += [f'    "{m}" [label="{m.rpartition(".")[2]}"];' for m in by_group.get(group, [])]
        lines.append("  }")
    for importer, imported, kind in structure["edges"]:
        style = " [style=dashed]" if kind == "function" else ""
        lines.append(f'  "{importer}" -> "{imported}"{style};')
    lines.append("}")
    return "\n".join(lines) + "\n"
