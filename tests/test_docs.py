"""The documentation site and the README: the site builds offline and strict, and the README stays short."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_DIR

pytestmark = pytest.mark.slow


def _build(site: Path) -> subprocess.CompletedProcess[str]:
    mkdocs = Path(sys.executable).with_name("mkdocs")
    if not mkdocs.exists():
        pytest.skip("mkdocs is not installed: pip install 'folio[docs]'")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run(
        [str(mkdocs), "build", "--strict", "-d", str(site)],
        cwd=REPO_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("site")
    result = _build(path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "WARNING" not in result.stderr, result.stderr
    return path


def test_every_page_of_the_nav_is_built(site: Path) -> None:
    pages = sorted(p.stem for p in (REPO_DIR / "docs").glob("*.md"))
    for page in pages:
        built = site / "index.html" if page == "index" else site / page / "index.html"
        assert built.is_file(), page


def test_every_diagram_of_viz_is_embedded_in_the_dags_page(site: Path) -> None:
    index = json.loads((REPO_DIR / "viz" / "index.json").read_text(encoding="utf-8"))
    drawings = {dags[dag]["svg"] for dags in index.values() for dag in dags}
    page = (site / "dags" / "index.html").read_text(encoding="utf-8")
    for svg in drawings:
        assert f'src="../viz/{svg}"' in page, svg
        assert (site / "viz" / svg).is_file(), svg


def test_the_site_fetches_nothing_from_the_network(site: Path) -> None:
    remote = re.compile(r"""<(?:script|link|img)\b[^>]*(?:src|href)=["']https?://""", re.IGNORECASE)
    for html in site.rglob("*.html"):
        assert not remote.search(html.read_text(encoding="utf-8")), html


def test_readme_is_short_and_the_licence_is_there() -> None:
    readme = (REPO_DIR / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(readme) <= 250
    assert readme[3].startswith("make demo") and readme[4].startswith("make test")
    licence = (REPO_DIR / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in licence and "Version 2.0" in licence
