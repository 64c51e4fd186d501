"""The `folio` command line: cache and concepts commands, one-line errors, --version."""

import ast
import json
import subprocess
import sys

import pytest

from tests.conftest import run_folio


def test_concepts_json_lists_matches_with_chapter_titles(alice_library):
    out = run_folio("concepts", "White Rabbit", "--library", str(alice_library), "--json", "-k", "5")
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    entity = next(r for r in rows if r["kind"] == "entity" and r["label"] == "White Rabbit")
    assert "Down The Rabbit-Hole" in entity["chapter_titles"]


def test_cache_info_then_clear(alice_copy):
    info = json.loads(run_folio("cache", "info", "--library", str(alice_copy), "--json").stdout)
    assert info["node_results"] > 0 and info["window_embeddings"] > 0
    assert run_folio("cache", "clear", "--library", str(alice_copy)).returncode == 0
    info = json.loads(run_folio("cache", "info", "--library", str(alice_copy), "--json").stdout)
    assert info["node_results"] == 0 and info["window_embeddings"] == 0


def test_search_on_an_empty_library_is_one_line(tmp_path):
    out = run_folio("search", "whale", "--library", str(tmp_path / "empty"))
    assert out.returncode == 1
    assert out.stderr.strip().count("\n") == 0 and "no books yet" in out.stderr


def test_ingesting_a_folder_without_books_says_so(tmp_path):
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "picture.png").write_bytes(b"\x89PNG")
    out = run_folio("ingest", str(tmp_path / "notes"), "--library", str(tmp_path / "lib"))
    assert out.returncode == 1
    assert "no book files" in out.stderr and str(tmp_path / "notes") in out.stderr


def test_version_prints_the_distribution_version_without_loading_the_api():
    from importlib.metadata import version

    code = (
        "import sys; from folio.dataflows.cli import main; rc = main(['--version']);"
        "heavy = [m for m in ('hamilton', 'torch', 'folio.dataflows.api') if m in sys.modules];"
        "print('heavy:', heavy); sys.exit(rc)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [f"folio {version('folio')}", "heavy: []"]


def test_version_is_also_an_option_of_the_full_parser(capsys):
    from folio.dataflows.cli import build_parser

    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.startswith("folio ")


def test_ingest_refuses_a_fifo_a_device_and_a_newline_name_each_on_one_line(tmp_path):
    import os
    import time

    fifo = tmp_path / "pipe.txt"
    os.mkfifo(fifo)
    odd = tmp_path / "odd\nname.txt"
    odd.write_bytes(b"\x89PNG\r\n")
    started = time.monotonic()
    out = run_folio("ingest", str(fifo), "/dev/zero", str(odd), "--library", str(tmp_path / "lib"))
    assert time.monotonic() - started < 90  # a FIFO or /dev/zero read would never end
    assert out.returncode == 1
    lines = [line for line in out.stderr.splitlines() if line.startswith("folio: ")]
    assert lines == [
        f"folio: {fifo}: a FIFO (named pipe), not a book file: only regular files are read",
        "folio: /dev/zero: a device, not a book file: only regular files are read",
        f"folio: {tmp_path}/odd\\nname.txt: not a text or EPUB file: looks like a PNG image",
    ]


# onnxruntime is left out: opening the vector index imports it first when installed (a segfault otherwise,
# nodes.backends.library_index.usearch_index), about 0.1 s of CPU.
HEAVY = ("torch", "transformers", "sentence_transformers", "matplotlib", "sklearn")


def _imported_heavy(args: list[str]) -> tuple[int, list[str]]:
    """Run ``folio ARGS`` in a fresh process; its exit status and which heavy modules it imported."""
    code = (
        "import sys\nfrom folio.dataflows.cli import main\n"
        f"try:\n    rc = main({args!r})\nexcept SystemExit as e:\n    rc = e.code\n"
        f"print('heavy:', [m for m in {HEAVY!r} if m in sys.modules], file=sys.stderr)\n"
        "sys.exit(rc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("heavy: "), out.stderr[-2000:]
    return out.returncode, ast.literal_eval(last.removeprefix("heavy: "))


@pytest.mark.parametrize(
    "args",
    [["--help"], ["books"], ["cache", "info"], ["experiment", "show"], ["search", "x", "--help"]],
    ids=["help", "books", "cache-info", "experiment-show", "search-help"],
)
def test_commands_that_need_no_model_import_no_model_library(args, tmp_path):
    rc, heavy = _imported_heavy([*args, "--library", str(tmp_path / "lib")] if args[0] != "--help" else args)
    assert rc in (0, 1) and heavy == []


def test_lexical_search_over_a_real_library_imports_no_model_library(alice_library):
    rc, heavy = _imported_heavy(
        ["search", "White Rabbit", "--mode", "lexical", "--library", str(alice_library)]
    )
    assert rc == 0 and heavy == []


# --- issue 13's fault corpus: argument helpers ------------------------------------------------------------
def test_a_repeated_chapter_is_kept_once_and_too_many_distinct_ones_are_refused_before_argparse() -> None:
    from folio.dataflows.cli import MAX_CHAPTERS, fewer_chapters
    from folio.nodes.core.types import FolioError

    argv = ["search", "whale", *["--chapter", "ch-1"] * 5, "--chapter", "ch-2", "-k", "3"]
    assert fewer_chapters(argv) == ["search", "whale", "--chapter", "ch-1", "--chapter", "ch-2", "-k", "3"]
    many = [a for i in range(MAX_CHAPTERS + 1) for a in ("--chapter", f"ch-{i}")]
    with pytest.raises(FolioError, match="at most 10,000 chapters"):
        fewer_chapters(["search", "x", *many])


@pytest.mark.parametrize(
    ("text", "ok"), [("8765", True), ("1", True), ("65535", True), ("0", False), ("99999", False)]
)
def test_a_port_is_a_whole_number_from_1_to_65535(text: str, ok: bool) -> None:
    import argparse

    from folio.dataflows.cli_args import port

    if ok:
        assert port(text) == int(text)
    else:
        with pytest.raises(argparse.ArgumentTypeError, match="from 1 to 65535"):
            port(text)
