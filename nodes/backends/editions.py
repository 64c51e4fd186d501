"""A book file's edition and translator, when the file says so (the always-on context names them).

``edition_info(path)`` reads only a file's metadata: a plain text's Project Gutenberg header ("Translator:",
"Translated by …", "Edition:" lines before the ``*** START OF`` marker, in the first ``HEADER_BYTES``),
an EPUB's package document (``dc:contributor`` whose role is ``trl``: the EPUB 2 ``opf:role`` attribute
or an EPUB 3 ``<meta refines="#id" property="role">trl</meta>``; the edition from
``<meta property="schema:bookEdition">`` or ``<meta name="edition" content="…">``). It returns
``{"translator": …, "edition": …}`` with only the keys found; any other format, or a file that cannot be
read, gives ``{}`` (the book still ingests: this is context, not content).

Limitations: English header labels only; an EPUB's edition is read only from those two meta forms
(``dc:source`` URLs and free-text descriptions are not parsed); several translators are joined by "and".
"""

from __future__ import annotations

import re
import zipfile
from pathlib import Path
from xml.etree import ElementTree as ET

HEADER_BYTES = 20_000
_START = re.compile(r"^\s*\*\*\*\s*START OF", re.MULTILINE | re.IGNORECASE)
_LABELS = re.compile(r"^\s*(Translator|Translated by|Edition)\s*:?\s+(\S.*?)\s*$", re.IGNORECASE)
_OPF = "{http://www.idpf.org/2007/opf}"
_DC = "{http://purl.org/dc/elements/1.1/}"


def gutenberg_edition(header: str) -> dict[str, str]:
    """``translator``/``edition`` from the labelled lines of a Project Gutenberg header."""
    found: dict[str, str] = {}
    head = header[: m.start()] if (m := _START.search(header)) else header
    for line in head.splitlines():
        match = _LABELS.match(line)
        if not match:
            continue
        key = "edition" if match.group(1).lower() == "edition" else "translator"
        found.setdefault(key, " ".join(match.group(2).split()))
    return found


def opf_edition(opf: bytes | str) -> dict[str, str]:
    """``translator``/``edition`` from an EPUB package document ({} when it does not parse)."""
    try:
        root = ET.fromstring(opf)
    except ET.ParseError:
        return {}
    metadata = root.find(f"{_OPF}metadata")
    if metadata is None:
        return {}
    roles = {
        (m.get("refines") or "").lstrip("#"): (m.text or "").strip().lower()
        for m in metadata.iter(f"{_OPF}meta")
        if m.get("property") == "role"
    }
    translators = [
        " ".join((c.text or "").split())
        for c in metadata.iter(f"{_DC}contributor")
        if "trl" in {(c.get(f"{_OPF}role") or "").lower(), roles.get(c.get("id") or "", "")}
    ]
    found: dict[str, str] = {}
    if any(translators):
        found["translator"] = " and ".join(dict.fromkeys(t for t in translators if t))
    for m in metadata.iter(f"{_OPF}meta"):
        value = (m.text or m.get("content") or "").strip()
        if value and (m.get("property") == "schema:bookEdition" or m.get("name") == "edition"):
            found["edition"] = value
            break
    return found


def _opf_bytes(path: Path) -> bytes | None:
    with zipfile.ZipFile(path) as zf:
        container = ET.fromstring(zf.read("META-INF/container.xml"))
        rootfile = next((e for e in container.iter() if e.tag.endswith("rootfile")), None)
        name = rootfile.get("full-path") if rootfile is not None else None
        return zf.read(name) if name else None


def edition_info(path: str | Path) -> dict[str, str]:
    """The edition and translator a book file names (see the module docstring)."""
    path = Path(path)
    try:
        if path.suffix.lower() == ".txt":
            with path.open("rb") as f:
                return gutenberg_edition(f.read(HEADER_BYTES).decode("utf-8", "replace"))
        if path.suffix.lower() == ".epub":
            opf = _opf_bytes(path)
            return opf_edition(opf) if opf else {}
    except (OSError, KeyError, zipfile.BadZipFile, ET.ParseError, ValueError):
        return {}
    return {}
