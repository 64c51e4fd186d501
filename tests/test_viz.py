"""``folio viz``: the committed diagrams match the code, rendering is deterministic, diagrams stay small."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from folio.dataflows.cli import main
from folio.dataflows.config import CONFIG_DIR, config_files, load_config, settings
from folio.dataflows.import_graph import NODE_GROUPS, module_structure, modules_dot
from folio.dataflows.registry import DAGS, driver_for
from folio.dataflows.viz import MODULES_STEM, VIZ_DIR, graph_structure, render_all, run_dot, to_dot

SVG = "{http://www.w3.org/2000/svg}"


def _index() -> dict[str, dict[str, dict[str, str]]]:
    return json.loads((VIZ_DIR / "index.json").read_text(encoding="utf-8"))


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def _svg_nodes(path: Path) -> dict[str, str]:
    """Node name -> its shape in a graphviz SVG ("ellipse" for ovals, "box" otherwise)."""
    shapes = {}
    for g in ET.parse(path).getroot().iter(f"{SVG}g"):
        if g.get("class") == "node":
            name = g.find(f"{SVG}title").text
            shapes[name] = "ellipse" if g.find(f"{SVG}ellipse") is not None else "box"
    return shapes


def test_every_config_and_dag_is_in_the_index():
    index = _index()
    assert sorted(index) == sorted(p.stem for p in config_files())
    for config_name, dags in index.items():
        assert sorted(dags) == sorted(DAGS), config_name
        for files in dags.values():
            assert (VIZ_DIR / files["svg"]).is_file() and (VIZ_DIR / files["json"]).is_file(), files


def test_committed_diagrams_match_the_code():
    for config_name, dags in _index().items():
        config = load_config(CONFIG_DIR / f"{config_name}.yaml", environ={})
        for dag, files in dags.items():
            committed = json.loads((VIZ_DIR / files["json"]).read_text(encoding="utf-8"))
            assert committed == graph_structure(driver_for(dag, config), config, dag), (
                f"viz/{files['json']} is stale for {config_name}/{dag}: run `folio viz`"
            )


def test_each_distinct_graph_is_drawn_once_with_the_default_as_the_plain_name():
    index = _index()
    for dag in DAGS:
        assert index["default"][dag]["svg"] == f"{dag}.svg"
        stems = {index[c][dag]["json"] for c in index}
        structures = [(VIZ_DIR / s).read_text(encoding="utf-8") for s in sorted(stems)]
        assert len(set(structures)) == len(structures), f"{dag}: two files draw the same graph"
    drawn = {p.name for p in VIZ_DIR.glob("*.svg")} - {f"{MODULES_STEM}.svg"}
    assert drawn == {files["svg"] for dags in index.values() for files in dags.values()}


# The ask diagram's readability bound: 40 boxes until issue 27 added the whole-book stage (book_overviews,
# the 41st box of the openai graph); 42 leaves one box of room, and a graph that needs more is split.
ASK_MAX_BOXES = 42


def test_the_ask_diagrams_stay_within_their_box_bound_and_have_no_settings_boxes():
    index = _index()
    for config_name in index:
        config = load_config(CONFIG_DIR / f"{config_name}.yaml", environ={})
        shapes = _svg_nodes(VIZ_DIR / index[config_name]["ask"]["svg"])
        boxes = [name for name, shape in shapes.items() if shape == "box"]
        assert "answer" in boxes and "question" in shapes
        assert len(boxes) <= ASK_MAX_BOXES, f"{config_name}: {len(boxes)} boxes"
        assert not set(shapes) & set(settings(config)), set(shapes) & set(settings(config))


def test_the_dot_writer_draws_a_tiny_structure_exactly():
    structure = {
        "dag": "toy",
        "outputs": ["answer"],
        "nodes": [
            {"name": "words", "type": "tuple[str, ...]", "module": "text", "function": "words"}
            | {"input": False, "setting": False},
            {"name": "question", "type": "str", "module": None, "function": None}
            | {"input": True, "setting": False},
            {"name": "k", "type": "int", "module": None, "function": None} | {"input": True, "setting": True},
            {"name": "answer", "type": "str", "module": "reply", "function": "answer__short"}
            | {"input": False, "setting": False},
        ],
        "edges": [["words", "answer"], ["question", "words"], ["k", "answer"]],
    }
    small = '<font point-size="8" color="#666666">'
    assert to_dot(structure) == (
        'digraph "toy" {\n'
        '  graph [rankdir=TB, newrank=true, fontname="Helvetica", fontsize=12, nodesep=0.22, '
        'ranksep=0.35, labelloc=t, labeljust=l, bgcolor="white"];\n'
        '  node [shape=box, style="rounded,filled", fillcolor="white", color="#4a6fa5", '
        'fontname="Helvetica", fontsize=11, margin="0.10,0.04", height=0.3];\n'
        '  edge [color="#7a8899", arrowsize=0.6, penwidth=0.9];\n'
        '  subgraph "cluster_reply" {\n'
        '    label=<<table border="0" cellpadding="0" cellspacing="1">'
        '<tr><td align="left"><b>reply</b></td></tr>'
        f'<tr><td align="left">{small}settings: k</font></td></tr></table>>;\n'
        '    style="rounded,filled"; fillcolor="#eef4fb"; color="#b8c0cc"; fontsize=11;\n'
        '    "answer" [label=<<b>answer</b><br/><font point-size="9" color="#555555">str</font><br/>'
        '<font point-size="9" color="#8a4b08"><i>variant: short</i></font>>, peripheries=2];\n'
        "  }\n"
        '  subgraph "cluster_text" {\n'
        '    label=<<table border="0" cellpadding="0" cellspacing="1">'
        '<tr><td align="left"><b>text</b></td></tr></table>>;\n'
        '    style="rounded,filled"; fillcolor="#f5eefa"; color="#b8c0cc"; fontsize=11;\n'
        '    "question" [shape=oval, style=solid, color="#999999", fontsize=9, fontcolor="#333333", '
        'height=0.22, margin="0.04,0.01"];\n'
        '    "words" [label=<<b>words</b><br/>'
        '<font point-size="9" color="#555555">tuple[str, ...]</font>>];\n'
        "  }\n"
        '  "question" -> "words";\n'
        '  "words" -> "answer";\n'
        "}\n"
    )


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("viz-a")
    render_all(out)
    return out


def test_rendering_twice_gives_identical_files_and_rewrites_nothing(rendered, tmp_path):
    again = tmp_path / "viz-b"
    render_all(again)
    assert _files(again) == _files(rendered)
    assert render_all(rendered) == []  # unchanged code: no file is written


def test_rendering_in_another_process_gives_identical_files_and_only_svg_and_json(rendered, tmp_path):
    out = tmp_path / "viz-c"
    env = {**os.environ, "PYTHONHASHSEED": "4242", "HAMILTON_TELEMETRY_ENABLED": "false"}
    done = subprocess.run(
        [sys.executable, "-m", "folio.dataflows.cli", "viz", "--out", str(out), "--quiet"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert _files(out) == _files(rendered)
    assert {p.suffix for p in out.iterdir()} == {".svg", ".json"}


def test_folio_viz_writes_png_only_on_demand_and_removes_graphs_that_are_gone(rendered, tmp_path, capsys):
    out = tmp_path / "viz-d"
    out.mkdir()
    (out / "ask.gone.svg").write_text("<svg/>")
    (out / "notes.txt").write_text("not ours")
    assert main(["viz", "--out", str(out), "--format", "png"]) == 0
    printed = capsys.readouterr().out
    assert "ask.gone.svg" in printed and "file(s) changed" in printed
    names = {p.name for p in out.iterdir()}
    svgs = {n for n in names if n.endswith(".svg")}
    assert svgs == {p.name for p in rendered.glob("*.svg")}
    assert {n for n in names if n.endswith(".png")} == {n.replace(".svg", ".png") for n in svgs}
    assert "ask.gone.svg" not in names and "notes.txt" in names
    assert (out / "ask.png").read_bytes().startswith(b"\x89PNG")


# --- the import graph (viz/modules.svg) -------------------------------------------------------------------
def _svg_clusters(path: Path) -> set[str]:
    return {
        g.find(f"{SVG}title").text.removeprefix("cluster_")
        for g in ET.parse(path).getroot().iter(f"{SVG}g")
        if g.get("class") == "cluster"
    }


def test_the_committed_import_graph_matches_the_code():
    committed = json.loads((VIZ_DIR / f"{MODULES_STEM}.json").read_text(encoding="utf-8"))
    assert committed == module_structure(), "viz/modules.json is stale: run `folio viz`"
    svg = VIZ_DIR / f"{MODULES_STEM}.svg"
    assert svg.read_bytes() == run_dot(modules_dot(committed), "svg"), (
        "viz/modules.svg is stale: run `folio viz`"
    )
    assert set(_svg_nodes(svg)) == {m["name"] for m in committed["modules"]}
    assert _svg_clusters(svg) == {*NODE_GROUPS, "dataflows"}


def test_the_import_graph_puts_each_module_in_its_group_and_sees_lazy_imports():
    structure = module_structure()
    groups = {m["name"]: m["group"] for m in structure["modules"]}
    assert groups["folio.nodes.backends.index_search"] == "backends"
    assert groups["folio.nodes.query.routing"] == "query" and groups["folio.dataflows.cli"] == "dataflows"
    kinds = {(a, b): kind for a, b, kind in structure["edges"]}
    assert kinds[("folio.nodes.backends.library_index", "folio.nodes.backends.index_search")] == "module"
    assert kinds[("folio.dataflows.cli", "folio.dataflows.viz")] == "function"  # imported inside cmd_viz
    assert not any(b == "folio.nodes.core.types" for _, b in kinds)  # the one module left undrawn
