"""MkDocs hook: the diagrams and plots of ``viz/`` become files of the site under ``viz/``.

The pages embed ``viz/ask.svg`` and the like; the files stay where ``folio viz`` and ``make bench``
write them (the repository's ``viz/``), so the site never holds a stale copy.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

VIZ_SUFFIXES = {".svg", ".png"}


def on_files(files: Files, config: Any) -> Files:
    root = Path(config["config_file_path"]).parent
    viz = root / "viz"
    for path in sorted(viz.rglob("*")):
        if path.suffix in VIZ_SUFFIXES and path.is_file():
            uri = path.relative_to(root).as_posix()
            if files.get_file_from_path(uri) is None:
                files.append(File(uri, str(root), config["site_dir"], config["use_directory_urls"]))
    return _with_dags_page(files, config)


DAG_PURPOSES = {
    "ingest": "One book: reader → manifest → chunks → lexical rows, windows → vectors → concept map.",
    "library": "Every book file through the per-book ingest (local pool or Dask), then one commit each.",
    "search": "The one retrieval path: lexical (FTS5 bm25) and semantic (usearch) hits, blended.",
    "kiwix": "Kiwix alone (`folio kiwix`): search terms → candidates → disambiguation → scores → passages.",
    "ask": "The whole query graph: routes → book evidence and Kiwix → cross-source fusion → answer.",
    "eval": "Question files → gold spans → retrieval records → answer checks → metrics.",
}


def dags_page(root: Path) -> str:
    """The DAGs page, written from ``viz/index.json``: each DAG's drawings and the configs drawn by each."""
    import json

    index = json.loads((root / "viz" / "index.json").read_text(encoding="utf-8"))
    lines = [
        "# The DAGs",
        "",
        "Each box is one Python function of `nodes/`, each arrow a parameter named after the upstream",
        "function. `folio viz` draws one SVG per distinct graph; a config whose graph differs from the",
        "default (a backend switch) gets its own drawing. This page is generated from `viz/index.json`.",
        "",
    ]
    for dag, purpose in DAG_PURPOSES.items():
        drawings: dict[str, list[str]] = {}
        for config_name, dags in sorted(index.items()):
            if dag in dags:
                drawings.setdefault(dags[dag]["svg"], []).append(config_name)
        lines += [f"## {dag}", "", purpose, ""]
        for svg, configs in sorted(drawings.items(), key=lambda item: (item[0].count("."), item[0])):
            lines += [
                f"**`viz/{svg}`**, configs: {', '.join(configs)}",
                "",
                f"![{dag}: {svg}](viz/{svg})",
                "",
            ]
    return "\n".join(lines) + "\n"


def _with_dags_page(files: Files, config: Any) -> Files:
    root = Path(config["config_file_path"]).parent
    files.append(File.generated(config, "dags.md", content=dags_page(root)))
    return files
