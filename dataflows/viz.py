"""``folio viz``: one readable SVG per distinct DAG graph, its structure as JSON, and an index; and the
import graph of the modules, ``viz/modules.svg`` (one cluster per group of ``nodes/`` and ``dataflows/``;
``dataflows.import_graph``) with its structure ``viz/modules.json``.

For every DAG of the registry (ingest, library, search, kiwix, ask, eval) and every ``configs/*.yaml``
it builds the driver and computes the graph's structure. Each DISTINCT structure gets one diagram:
the default config's graph is ``viz/<dag>.svg``, and a config whose graph differs from every earlier
one (default first, then the others by name) is ``viz/<dag>.<config>.svg``. Next to each SVG,
``<stem>.json`` holds the structure (sorted nodes with type, module, selected function and whether
it is an input or a setting; sorted edges), which the tests compare with the code so a committed
diagram never drifts from the DAG. ``viz/index.json`` maps every config and DAG to its files.

What a diagram shows:

* only what the DAG's outputs (``Dag.outputs``) need, i.e. what ``dr.execute(outputs)`` runs; where no
  output of the registry is in the graph, the whole graph;
* one box per function node (name, output type in small text, the ``@config.when`` variant that the
  config selected), grouped in one cluster per node module; the DAG's outputs have a double border;
* data inputs a caller passes (question, stores, encoder, backends…) as small plain ovals;
* settings (the keys of ``config.settings``, the switches, and any input with a default in its
  signature) are not drawn: each module cluster lists the settings its nodes read in its label;
* config keys that no node reads are left out.

The DOT text is written here in sorted order (no timestamps) and laid out by graphviz's ``dot``, so
the output is byte-identical across runs and processes; a file is rewritten only when its content
changes. PNGs are made on demand (``folio viz --format png``).

Limitations: needs the graphviz ``dot`` binary; the layout is graphviz's, so a large change to a
graph may move boxes around.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
import textwrap
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hamilton import driver

from folio.dataflows.config import SWITCHES, config_files, load_config, settings
from folio.dataflows.registry import DAGS, driver_for
from folio.nodes.core.types import FolioError

_REPO_ROOT = Path(__file__).resolve().parent.parent
_IN_REPO = (_REPO_ROOT / "pyproject.toml").is_file() and (_REPO_ROOT / "nodes").is_dir()
# The repo's viz/ when running from the repo; installed from a wheel there is no repo: ./viz instead.
VIZ_DIR = _REPO_ROOT / "viz" if _IN_REPO else Path("viz")
DEFAULT_CONFIG_NAME = "default"
FORMATS = ("svg", "png")
INDEX_FILE = "index.json"
MODULES_STEM = "modules"  # viz/modules.svg: the import graph (``dataflows.import_graph``)

# Cluster fill colours, picked per module by a stable checksum of its name (same module, same colour).
_PALETTE = (
    "#eef4fb",
    "#f1f8ec",
    "#fdf3e7",
    "#f5eefa",
    "#eaf6f6",
    "#fbeff2",
    "#f6f4e6",
    "#eef0f3",
    "#e9f1fa",
    "#f9f0e1",
    "#edf7f0",
    "#f7ecf7",
)
_QUALIFIED = re.compile(r"\b(?:[A-Za-z_]\w*\.)+([A-Za-z_]\w*)")


@dataclass(frozen=True)
class Diagram:
    """One distinct graph of one DAG: its file stem, the configs that build it, its structure."""

    dag: str
    stem: str
    configs: tuple[str, ...]
    structure: dict[str, Any]


# ---------------------------------------------------------------------------------------------- structure


def _type_name(tp: Any) -> str:
    """A short, process-independent name for a type annotation (``tuple[BookInfo, ...]``)."""
    if isinstance(tp, type) and not getattr(tp, "__args__", None):
        return tp.__name__
    return _QUALIFIED.sub(r"\1", str(tp)).replace("NoneType", "None")


def _module_name(fn: Any) -> str:
    return str(fn.__module__).removeprefix("folio.nodes.")


def _needed(variables: Mapping[str, Any], outputs: Sequence[str]) -> set[str]:
    """The outputs present in the graph and everything upstream of them (all nodes if none present)."""
    stack = [o for o in outputs if o in variables]
    if not stack:
        return set(variables)
    keep: set[str] = set()
    while stack:
        name = stack.pop()
        if name in keep:
            continue
        keep.add(name)
        var = variables[name]
        stack.extend(var.required_dependencies | var.optional_dependencies)
    return keep


def graph_structure(dr: driver.Driver, config: Mapping[str, Any], dag: str) -> dict[str, Any]:
    """Sorted nodes and edges of what ``dag``'s outputs need in ``dr``'s graph (see the module doc)."""
    variables = {v.name: v for v in dr.list_available_variables()}
    keep = _needed(variables, DAGS[dag].outputs)
    with_default = {dep for name in keep for dep in variables[name].optional_dependencies}
    used = with_default | {dep for name in keep for dep in variables[name].required_dependencies}
    setting_names = set(settings(config)) | SWITCHES | with_default
    nodes = []
    edges: list[list[str]] = []
    for name in sorted(keep):
        var = variables[name]
        if var.is_external_input:
            if name not in used:
                continue  # a config key that no node reads
            nodes.append(
                {
                    "name": name,
                    "type": _type_name(var.type),
                    "module": None,
                    "function": None,
                    "input": True,
                    "setting": name in setting_names,
                }
            )
            continue
        fn = var.originating_functions[0] if var.originating_functions else None
        nodes.append(
            {
                "name": name,
                "type": _type_name(var.type),
                "module": _module_name(fn) if fn else None,
                "function": fn.__qualname__ if fn else None,
                "input": False,
                "setting": False,
            }
        )
        edges.extend([dep, name] for dep in var.required_dependencies | var.optional_dependencies)
    return {
        "dag": dag,
        "outputs": sorted(o for o in DAGS[dag].outputs if o in keep),
        "nodes": nodes,
        "edges": sorted(edges),
    }


def _configs() -> list[tuple[str, dict[str, Any]]]:
    """(name, config) for every shipped config, the default first, then by name."""
    loaded = [(p.stem, load_config(p, environ={})) for p in config_files()]
    return sorted(loaded, key=lambda item: (item[0] != DEFAULT_CONFIG_NAME, item[0]))


def structures() -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(config name, dag name, structure) for every shipped config and every DAG."""
    for config_name, config in _configs():
        for dag in sorted(DAGS):
            yield config_name, dag, graph_structure(driver_for(dag, config), config, dag)


def distinct_diagrams(
    items: Iterable[tuple[str, str, dict[str, Any]]] | None = None,
) -> tuple[list[Diagram], dict[str, dict[str, str]]]:
    """The distinct graphs of every DAG, and the stem that draws each (config, dag)."""
    found: dict[str, list[tuple[str, dict[str, Any], list[str]]]] = {}
    index: dict[str, dict[str, str]] = {}
    for config_name, dag, structure in structures() if items is None else items:
        seen = found.setdefault(dag, [])
        match = next((entry for entry in seen if entry[1] == structure), None)
        if match is None:
            stem = dag if not seen and config_name == DEFAULT_CONFIG_NAME else f"{dag}.{config_name}"
            match = (stem, structure, [])
            seen.append(match)
        match[2].append(config_name)
        index.setdefault(config_name, {})[dag] = match[0]
    diagrams = [
        Diagram(dag, stem, tuple(configs), structure)
        for dag in sorted(found)
        for stem, structure, configs in found[dag]
    ]
    return sorted(diagrams, key=lambda d: d.stem), index


# ---------------------------------------------------------------------------------------------- DOT


def _q(text: str) -> str:
    """A DOT double-quoted ID."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _h(text: str) -> str:
    return html.escape(text, quote=True)


def _short(text: str, width: int = 34) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _colour(module: str) -> str:
    return _PALETTE[zlib.crc32(module.encode("utf-8")) % len(_PALETTE)]


def _box_label(node: Mapping[str, Any]) -> str:
    lines = [
        f"<b>{_h(node['name'])}</b>",
        f'<font point-size="9" color="#555555">{_h(_short(node["type"]))}</font>',
    ]
    function = node.get("function") or ""
    if function != node["name"] and "__" in function:
        variant = function.rsplit("__", 1)[1]
        lines.append(f'<font point-size="9" color="#8a4b08"><i>variant: {_h(variant)}</i></font>')
    return "<" + "<br/>".join(lines) + ">"


def _cluster_label(module: str, module_settings: Sequence[str]) -> str:
    rows = [f'<tr><td align="left"><b>{_h(module)}</b></td></tr>']
    if module_settings:
        wrapped = textwrap.wrap("settings: " + ", ".join(module_settings), width=48)
        rows += [
            f'<tr><td align="left"><font point-size="8" color="#666666">{_h(line)}</font></td></tr>'
            for line in wrapped
        ]
    return '<<table border="0" cellpadding="0" cellspacing="1">' + "".join(rows) + "</table>>"


_INPUT_STYLE = (
    'shape=oval, style=solid, color="#999999", fontsize=9, fontcolor="#333333", height=0.22, '
    'margin="0.04,0.01"'
)


def to_dot(structure: Mapping[str, Any], title: str = "", rankdir: str = "TB") -> str:
    """The DOT text of a structure: every node, edge and cluster in sorted order.

    Function nodes are boxes in one cluster per module; a data input read by one module only sits
    in that module's cluster, one read by several sits outside; settings are listed in the label of
    each cluster that reads them, and are not drawn.
    """
    nodes = {n["name"]: n for n in structure["nodes"]}
    outputs = set(structure.get("outputs", ()))
    edges = sorted((src, dst) for src, dst in structure["edges"] if src in nodes and dst in nodes)
    module_of = {name: node["module"] or "(other)" for name, node in nodes.items() if not node["input"]}
    readers: dict[str, set[str]] = {}
    for src, dst in edges:
        if nodes[src]["input"]:
            readers.setdefault(src, set()).add(module_of[dst])
    members: dict[str, list[str]] = {}
    settings_read: dict[str, list[str]] = {}
    loose_inputs: list[str] = []
    for name in sorted(nodes):
        node = nodes[name]
        if not node["input"]:
            members.setdefault(module_of[name], []).append(name)
        elif node["setting"]:
            for module in sorted(readers.get(name, ())):
                settings_read.setdefault(module, []).append(name)
        elif len(readers.get(name, ())) == 1:
            members.setdefault(next(iter(readers[name])), []).append(name)
        else:
            loose_inputs.append(name)

    out = [f"digraph {_q(structure.get('dag', 'dag'))} {{"]
    graph_attrs = [
        f"rankdir={rankdir}",
        "newrank=true",
        'fontname="Helvetica"',
        "fontsize=12",
        "nodesep=0.22",
        "ranksep=0.35",
        "labelloc=t",
        "labeljust=l",
        'bgcolor="white"',
    ]
    if title:
        graph_attrs.append(f"label={title}")
    out.append(f"  graph [{', '.join(graph_attrs)}];")
    out.append(
        '  node [shape=box, style="rounded,filled", fillcolor="white", color="#4a6fa5", '
        'fontname="Helvetica", fontsize=11, margin="0.10,0.04", height=0.3];'
    )
    out.append('  edge [color="#7a8899", arrowsize=0.6, penwidth=0.9];')
    for module in sorted(members):
        out.append(f"  subgraph {_q('cluster_' + module)} {{")
        out.append(f"    label={_cluster_label(module, settings_read.get(module, ()))};")
        out.append(
            f'    style="rounded,filled"; fillcolor="{_colour(module)}"; color="#b8c0cc"; fontsize=11;'
        )
        for name in members[module]:
            if nodes[name]["input"]:
                out.append(f"    {_q(name)} [{_INPUT_STYLE}];")
            else:
                extra = ", peripheries=2" if name in outputs else ""
                out.append(f"    {_q(name)} [label={_box_label(nodes[name])}{extra}];")
        out.append("  }")
    for name in loose_inputs:
        out.append(f"  {_q(name)} [{_INPUT_STYLE}];")
    for src, dst in edges:
        if not nodes[src]["setting"]:
            out.append(f"  {_q(src)} -> {_q(dst)};")
    out.append("}")
    return "\n".join(out) + "\n"


def _title(diagram: Diagram) -> str:
    dag = DAGS[diagram.dag]
    small = '<font point-size="9" color="#666666">'
    return (
        f'<<b>{_h(diagram.dag)}</b>  <font point-size="10">{_h(dag.description)}</font><br align="left"/>'
        f'{small}configs: {_h(", ".join(diagram.configs))}</font><br align="left"/>'
        f"{small}box: one function (output type; the variant its config selects) · oval: an input · "
        f'double border: an output of the DAG · settings: listed per module</font><br align="left"/> >'
    )


# ---------------------------------------------------------------------------------------------- files


def _dot_binary() -> str:
    found = shutil.which("dot")
    if found is None:
        raise FolioError("dot", "graphviz is not installed (Debian: apt install graphviz)")
    return found


def run_dot(dot_text: str, fmt: str) -> bytes:
    """Lay out ``dot_text`` with graphviz ``dot`` into ``fmt`` (svg, png)."""
    done = subprocess.run(
        [_dot_binary(), f"-T{fmt}"], input=dot_text.encode("utf-8"), capture_output=True, check=False
    )
    if done.returncode != 0:
        reason = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise FolioError("dot", reason[0] if reason else f"exit status {done.returncode}")
    return done.stdout


def _write_if_changed(path: Path, content: bytes) -> bool:
    if path.is_file() and path.read_bytes() == content:
        return False
    path.write_bytes(content)
    return True


def _json_bytes(value: Any) -> bytes:
    return (json.dumps(value, indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


def _is_ours(path: Path) -> bool:
    """A file ``folio viz`` writes: ``<dag>[.<config>].(svg|png|json)``."""
    parts = path.name.split(".")
    return len(parts) in (2, 3) and parts[0] in DAGS and parts[-1] in (*FORMATS, "json")


def default_out_dir() -> Path:
    """Where ``folio viz`` writes by default: the repo's ``viz/``, or ``./viz`` when installed."""
    return VIZ_DIR if VIZ_DIR.is_absolute() else Path.cwd() / VIZ_DIR


def _render_modules(out_dir: Path, formats: Sequence[str]) -> list[Path]:
    """Write the import graph, ``modules.svg`` (and PNG on demand) with its structure ``modules.json``;
    returns the files that changed."""
    from folio.dataflows.import_graph import module_structure, modules_dot

    structure = module_structure()
    files = {"json": _json_bytes(structure)}
    dot_text = modules_dot(structure)
    for fmt in formats:
        files[fmt] = run_dot(dot_text, fmt)
    changed = []
    for ext, content in files.items():
        path = out_dir / f"{MODULES_STEM}.{ext}"
        if _write_if_changed(path, content):
            changed.append(path)
    return changed


def render_all(out: str | Path | None = None, formats: Sequence[str] = ("svg",)) -> list[Path]:
    """Write one SVG (and PNG on demand) and one JSON per distinct graph, and ``index.json``.

    Files are written only when their content changes, and diagram files of graphs that no longer
    exist are removed; returns the files written or removed.
    """
    unknown = sorted(set(formats) - set(FORMATS))
    if unknown:
        raise FolioError("viz", f"unknown format(s): {', '.join(unknown)} (choose from {', '.join(FORMATS)})")
    out_dir = Path(out) if out is not None else default_out_dir()
    out_dir.mkdir(parents=True, exist_ok=True)
    wanted = sorted({"svg", *formats})
    diagrams, index = distinct_diagrams()
    changed: list[Path] = []
    current: set[str] = {INDEX_FILE}
    for diagram in diagrams:
        dot_text = to_dot(diagram.structure, title=_title(diagram))
        files = {"json": _json_bytes(diagram.structure)}
        for fmt in wanted:
            files[fmt] = run_dot(dot_text, fmt)
        for ext, content in files.items():
            path = out_dir / f"{diagram.stem}.{ext}"
            current.add(path.name)
            if _write_if_changed(path, content):
                changed.append(path)
    listing = {
        config: {dag: {"json": f"{stem}.json", "svg": f"{stem}.svg"} for dag, stem in dags.items()}
        for config, dags in index.items()
    }
    index_path = out_dir / INDEX_FILE
    if _write_if_changed(index_path, _json_bytes(listing)):
        changed.append(index_path)
    changed += _render_modules(out_dir, wanted)
    for stale in sorted(out_dir.iterdir()):
        if stale.is_file() and _is_ours(stale) and stale.name not in current:
            if stale.suffix == ".png" and "png" not in wanted and (out_dir / f"{stale.stem}.svg").is_file():
                continue  # a PNG made on demand earlier, of a graph that still exists
            stale.unlink()
            changed.append(stale)
    return changed
